//! Requests gathered into Kafka records: the ring consumer joins the records of every request
//! that arrives within one window (`--linger-ms`) into one record of at most `--record-max-bytes`.
//!
//! Why here and not in librdkafka's linger: librdkafka batches records into one produce request,
//! but each record stays a record, and the broker's work (tansu's most of all) and librdkafka's
//! delivery reports are per record. Single POSTs were one record each, and tansu's CPU per
//! message on them was several times its CPU for messages that came 100 to a record
//! (docs/results/performance-log.md). Joined here, a window of single POSTs is one record, and librdkafka
//! sends it as soon as it has it (its own linger is 0 while the ring gathers).
//!
//! The window can adapt (`--linger-mode adaptive`, the default; docs/explanation/architecture.md): a gathered record goes as soon as
//! nothing is in flight to the broker, and requests gather only while the previous record awaits
//! its acknowledgement, as Nagle's algorithm does for TCP segments; but a record follows the one
//! before only after a [`spacing`] that grows with the requests that one held. An idle ingest
//! then sends a request's record at once instead of holding it for the whole window. A busy one
//! still makes large records: without the spacing the broker's round trip (a few ms) set the
//! record size under load, and the broker's CPU per message (tansu's work is per record) and the
//! producer's (librdkafka's wake-ups are per record) grew with the record count, on the cores the
//! load shares. `--linger-ms` stays the upper bound. `--linger-mode fixed` always waits for the
//! window.
//!
//! The acknowledgement contract is unchanged: a gathered record carries the acknowledgement of
//! every request record it holds, and its delivery report is reported to each of them, so a
//! request hears Kafka's answer for every record that holds its messages.

use crate::ack::Ack;
use pipeline_common::record::Joined;
use std::time::{Duration, Instant};

/// Spacing earned by each request record the last gathered record held.
const SPACING_PER_REQUEST: Duration = Duration::from_millis(1);
/// The most an adaptive window spaces its records, whatever the window.
const SPACING_MAX: Duration = Duration::from_millis(10);

/// The least time between a gathered record that held `held` request records and the next one,
/// with an adaptive window: 1 ms per request it held, at most half the window and at most 10 ms.
///
/// Why it grows with the record: the spacing is there to keep records few when the ingest is
/// busy, and must cost nothing when it is quiet. A record of one request (a quiet ingest) lets
/// the next go 1 ms later, sooner than the broker answers, so the round trip spaces the records
/// and a request does not wait for the spacing. Past 1,000 requests a second each record holds
/// more requests than its spacing has milliseconds, so the spacing grows to its bound: at most
/// 100 records a second, each of ten requests or more. The bound is small next to the window's
/// 20 ms and to a 202 under load, and half the window keeps a short window the upper bound.
pub(crate) fn spacing(window: Duration, held: usize) -> Duration {
    SPACING_PER_REQUEST.saturating_mul(u32::try_from(held).unwrap_or(u32::MAX)).min(window / 2).min(SPACING_MAX)
}

/// What a request puts in the ring.
pub(crate) struct Entry {
    pub payload: Vec<u8>,
    /// `Some` in `--ack kafka` mode: the delivery report is sent here.
    pub ack: Option<Ack>,
    /// When the request put it in the ring (its wait there is `ingest_ring_wait_seconds`).
    pub put: Instant,
}

impl Entry {
    pub(crate) fn bytes(&self) -> u64 {
        self.payload.len() as u64
    }
}

/// Where the ring consumer hands its gathered records: the Kafka producer in the service. The
/// ring knows only this, not the producer; `send_all` may block while the producer is full (the
/// ring consumer's thread waits, and the ring fills: the backpressure the 503s come from).
pub(crate) trait Publish: Send + 'static {
    fn send_all(&self, records: impl Iterator<Item = Pending>);
    /// Records handed over whose delivery report has not come yet: with none, the link to the
    /// broker is idle and an adaptive window sends what it gathered.
    fn in_flight(&self) -> usize;
    /// From now on, the delivery report that leaves nothing in flight calls `wake.link_idle()`
    /// (the ring consumer may sleep for it, `crate::wake`).
    fn wake_when_link_idle(&self, wake: std::sync::Arc<crate::wake::Wake>);
}

/// A record on its way to Kafka.
pub(crate) struct Pending {
    pub payload: Vec<u8>,
    /// One per request record it holds (`crate::gather`); none in `--ack ring` mode.
    pub acks: Vec<Ack>,
    /// When its first request record left the ring.
    pub since: Instant,
}

/// The record being gathered and the records ready to send.
pub(crate) struct Gather {
    /// Largest gathered record; 0 = gather nothing (one record per message, the old format).
    max_bytes: usize,
    window: Duration,
    /// Send as soon as nothing is in flight (the window is then only the upper bound).
    adaptive: bool,
    joined: Joined,
    acks: Vec<Ack>,
    /// When the first record of the one being gathered was taken from the ring.
    first: Option<Instant>,
    /// When the last gathered record was made ready: an adaptive window sends the next one no
    /// sooner than its [`spacing`] after it.
    last_sent: Option<Instant>,
    /// That record's spacing (from the request records it held).
    last_spacing: Duration,
    /// Ring bytes (`Entry::bytes`) of the record being gathered, and of the ready ones: the ring
    /// counts them as held until they are handed to librdkafka, so its byte bound still bounds
    /// what the consumer holds while librdkafka's queue is full.
    joined_bytes: u64,
    ready_bytes: u64,
    ready: Vec<Pending>,
}

impl Gather {
    pub(crate) fn new(max_bytes: usize, window: Duration, adaptive: bool) -> Gather {
        Gather {
            max_bytes,
            window,
            adaptive,
            joined: Joined::default(),
            acks: Vec::new(),
            first: None,
            last_sent: None,
            last_spacing: Duration::ZERO,
            joined_bytes: 0,
            ready_bytes: 0,
            ready: Vec::new(),
        }
    }

    /// Takes a request's record. The record being gathered is sent first if this one would take
    /// it past the budget; a record at or over the budget on its own is sent alone.
    pub(crate) fn push(&mut self, entry: Entry, now: Instant) {
        if self.max_bytes == 0 || entry.payload.len() >= self.max_bytes {
            self.ready_bytes += entry.bytes();
            self.ready.push(Pending { payload: entry.payload, acks: entry.ack.into_iter().collect(), since: now });
            return;
        }
        if !self.joined.is_empty() && self.joined.len_with(&entry.payload) > self.max_bytes {
            self.flush_at(now);
        }
        self.first.get_or_insert(now);
        self.joined_bytes += entry.bytes();
        self.joined.push(entry.payload);
        self.acks.extend(entry.ack);
    }

    /// How long until the record being gathered must go (zero: now), or `None` when there is none.
    pub(crate) fn due_in(&self, now: Instant) -> Option<Duration> {
        // `checked_add`: a window too large for the clock means "not before a very long time".
        self.first
            .map(|first| first.checked_add(self.window).map_or(Duration::MAX, |due| due.saturating_duration_since(now)))
    }

    /// Ends the record being gathered: it is ready to send.
    pub(crate) fn flush(&mut self) {
        self.flush_at(Instant::now());
    }

    fn flush_at(&mut self, now: Instant) {
        let since = self.first.take();
        let held = self.joined.records();
        if let (Some(payload), Some(since)) = (self.joined.take(), since) {
            self.last_sent = Some(now);
            self.last_spacing = spacing(self.window, held);
            self.ready.push(Pending { payload, acks: std::mem::take(&mut self.acks), since });
            self.ready_bytes += std::mem::take(&mut self.joined_bytes);
        }
    }

    /// Sends the record being gathered if its window is over, or, with an adaptive window, if
    /// nothing is in flight (`in_flight` is the publisher's count) and the last record went at
    /// least its [`spacing`] ago.
    pub(crate) fn flush_if_due(&mut self, now: Instant, in_flight: usize) {
        let spaced = self.last_sent.is_none_or(|t| now.saturating_duration_since(t) >= self.last_spacing);
        if self.due_in(now) == Some(Duration::ZERO) || (self.adaptive && in_flight == 0 && spaced) {
            self.flush_at(now);
        }
    }

    /// How long until an adaptive window's spacing allows the next record, `None` when it allows
    /// one now (and always with a fixed window, which has no spacing).
    pub(crate) fn spacing_left(&self, now: Instant) -> Option<Duration> {
        if !self.adaptive {
            return None;
        }
        let next = self.last_sent? + self.last_spacing;
        (next > now).then(|| next - now)
    }

    /// True while a record is being gathered and an adaptive window waits for the broker's
    /// acknowledgement of the one before (the ring consumer then sleeps for that, `crate::wake`).
    pub(crate) fn awaits_link(&self) -> bool {
        self.adaptive && self.first.is_some()
    }

    /// The records ready to send, in order, and the ring bytes they held.
    pub(crate) fn ready(&mut self) -> (std::vec::Drain<'_, Pending>, u64) {
        (self.ready.drain(..), std::mem::take(&mut self.ready_bytes))
    }

    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::{Delivery, RequestAck};

    fn entry(payload: &str, ack: Option<&Ack>) -> Entry {
        Entry { payload: payload.as_bytes().to_vec(), ack: ack.cloned(), put: Instant::now() }
    }

    fn payloads(g: &mut Gather) -> Vec<String> {
        g.ready().0.map(|p| String::from_utf8_lossy(&p.payload).into_owned()).collect()
    }

    #[test]
    fn a_window_of_requests_is_one_record_sent_when_the_window_ends() {
        let t0 = Instant::now();
        let window = Duration::from_millis(50);
        let mut g = Gather::new(1 << 10, window, false);
        assert_eq!(g.due_in(t0), None, "nothing gathered, nothing due");
        g.push(entry(r#"{"id":"a"}"#, None), t0);
        g.push(entry(r#"[{"id":"b"},{"id":"c"}]"#, None), t0 + Duration::from_millis(10));
        g.push(entry(r#"{"id":"d"}"#, None), t0 + Duration::from_millis(20));
        assert!(!g.has_ready());
        assert_eq!(g.due_in(t0 + Duration::from_millis(20)), Some(Duration::from_millis(30)), "due from the first");
        g.flush_if_due(t0 + Duration::from_millis(49), 0);
        assert!(!g.has_ready(), "not before the window ends");
        g.flush_if_due(t0 + window, 0);
        assert_eq!(payloads(&mut g), vec![r#"[{"id":"a"},{"id":"b"},{"id":"c"},{"id":"d"}]"#]);
        assert_eq!(g.due_in(t0 + window), None);
        // A request alone in its window stays what it was.
        g.push(entry(r#"{"id":"e"}"#, None), t0 + window);
        g.flush();
        assert_eq!(payloads(&mut g), vec![r#"{"id":"e"}"#]);
    }

    #[test]
    fn the_budget_cuts_records_and_a_large_one_goes_alone() {
        let t0 = Instant::now();
        let mut g = Gather::new(30, Duration::from_secs(1), false);
        g.push(entry(r#"{"id":"aaaa"}"#, None), t0); // 13 bytes
        g.push(entry(r#"{"id":"bbbb"}"#, None), t0); // [13,13] = 29: fits
        g.push(entry(r#"{"id":"cccc"}"#, None), t0); // 43: the first two go
        g.push(entry(r#"{"id":"a very long one, over 30 bytes"}"#, None), t0); // alone, at once
        assert_eq!(
            payloads(&mut g),
            vec![r#"[{"id":"aaaa"},{"id":"bbbb"}]"#, r#"{"id":"a very long one, over 30 bytes"}"#]
        );
        g.flush();
        assert_eq!(payloads(&mut g), vec![r#"{"id":"cccc"}"#]);
        // The ring bytes go with the records: gathered ones count until they are ready.
        g.push(entry(r#"{"id":"dddd"}"#, None), t0);
        g.push(entry(r#"{"id":"a very long one, over 30 bytes"}"#, None), t0);
        assert_eq!(g.ready().1, 39, "the large one only");
        g.flush();
        assert_eq!(g.ready().1, 13);
        assert_eq!(g.ready().1, 0);
        // Budget 0: nothing is gathered (one record per message, librdkafka lingers instead).
        let mut g = Gather::new(0, Duration::from_secs(1), false);
        g.push(entry(r#"{"id":"x"}"#, None), t0);
        g.push(entry(r#"{"id":"y"}"#, None), t0);
        assert_eq!(payloads(&mut g), vec![r#"{"id":"x"}"#, r#"{"id":"y"}"#]);
    }

    #[test]
    fn every_request_of_a_gathered_record_hears_its_report() {
        let t0 = Instant::now();
        let mut g = Gather::new(1 << 10, Duration::from_millis(5), true);
        // A batch request cut into two records, and a single request, gathered into one.
        let (batch, mut batch_rx) = RequestAck::new(2);
        let (single, mut single_rx) = RequestAck::new(1);
        g.push(entry(r#"[{"id":"a"}]"#, Some(&batch)), t0);
        g.push(entry(r#"[{"id":"b"}]"#, Some(&batch)), t0);
        g.push(entry(r#"{"id":"c"}"#, Some(&single)), t0);
        g.flush();
        let records: Vec<Pending> = g.ready().0.collect();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].acks.len(), 3, "one report per request record it holds");
        for ack in &records[0].acks {
            ack.report(Delivery::Acknowledged);
        }
        assert_eq!(batch_rx.try_recv(), Ok(Delivery::Acknowledged));
        assert_eq!(single_rx.try_recv(), Ok(Delivery::Acknowledged));
    }

    #[test]
    fn an_adaptive_window_sends_when_the_link_is_idle_and_gathers_while_a_record_is_in_flight() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_micros(n * 1000);
        let window = Duration::from_millis(20);
        let mut g = Gather::new(1 << 10, window, true);
        // Nothing in flight: the first request goes at once, alone.
        g.push(entry(r#"{"id":"a"}"#, None), t0);
        assert!(g.awaits_link());
        g.flush_if_due(t0, 0);
        assert_eq!(payloads(&mut g), vec![r#"{"id":"a"}"#]);
        assert!(!g.awaits_link());
        // Its record in flight: the next requests gather...
        g.push(entry(r#"{"id":"b"}"#, None), t0 + Duration::from_micros(300));
        g.push(entry(r#"{"id":"c"}"#, None), t0 + Duration::from_micros(400));
        g.flush_if_due(t0 + Duration::from_micros(500), 1);
        assert!(!g.has_ready(), "gathers while the previous record awaits its acknowledgement");
        // ...and go together once it is acknowledged and the spacing of a one-request record
        // (1 ms after it) is over.
        g.flush_if_due(t0 + Duration::from_micros(900), 0);
        assert!(!g.has_ready(), "a record of one request spaces the next by 1 ms");
        assert_eq!(g.spacing_left(t0 + Duration::from_micros(900)), Some(Duration::from_micros(100)));
        g.flush_if_due(ms(1), 0);
        assert_eq!(payloads(&mut g), vec![r#"[{"id":"b"},{"id":"c"}]"#]);
        // Two requests: the next record waits 2 ms after this one (sent at 1 ms).
        g.push(entry(r#"{"id":"d"}"#, None), ms(2));
        g.flush_if_due(t0 + Duration::from_micros(2900), 0);
        assert!(!g.has_ready(), "a record of two requests spaces the next by 2 ms");
        g.flush_if_due(ms(3), 0);
        assert_eq!(payloads(&mut g), vec![r#"{"id":"d"}"#]);
        // A busy ingest's large record spaces the next by the bound (10 ms, under half the window).
        for i in 0..30 {
            g.push(entry(&format!(r#"{{"id":"{i}"}}"#), None), ms(3));
        }
        g.flush_if_due(ms(4), 0);
        assert_eq!(g.ready().0.count(), 1);
        assert_eq!(g.spacing_left(ms(4)), Some(Duration::from_millis(10)));
        // The window stays the upper bound when the broker is slow to answer.
        g.push(entry(r#"{"id":"e"}"#, None), ms(5));
        g.flush_if_due(ms(24), 1);
        assert!(!g.has_ready());
        g.flush_if_due(ms(25), 1);
        assert_eq!(payloads(&mut g), vec![r#"{"id":"e"}"#]);
        // A fixed window waits for the window even when the link is idle.
        let mut f = Gather::new(1 << 10, window, false);
        f.push(entry(r#"{"id":"f"}"#, None), t0);
        f.flush_if_due(ms(1), 0);
        assert!(!f.has_ready() && !f.awaits_link());
        f.flush_if_due(ms(20), 0);
        assert_eq!(f.ready().0.count(), 1);
        assert_eq!(f.spacing_left(ms(20)), None, "a fixed window has no spacing to sleep through");
    }

    #[test]
    fn the_spacing_grows_with_the_record_up_to_its_bounds() {
        let window = Duration::from_millis(20);
        assert_eq!(spacing(window, 0), Duration::ZERO);
        assert_eq!(spacing(window, 1), Duration::from_millis(1), "a quiet ingest's record");
        assert_eq!(spacing(window, 7), Duration::from_millis(7));
        assert_eq!(spacing(window, 5_000), Duration::from_millis(10), "a busy one's: the bound");
        assert_eq!(spacing(Duration::from_secs(40), 5_000), Duration::from_millis(10), "whatever the window");
        assert_eq!(spacing(Duration::from_millis(4), 5_000), Duration::from_millis(2), "at most half the window");
        assert_eq!(spacing(window, usize::MAX), Duration::from_millis(10));
    }
}
