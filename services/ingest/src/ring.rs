//! The ring: a `disruptor` multi-producer ring buffer between the HTTP workers and the Kafka
//! producer.
//!
//! HTTP workers claim preallocated slots with `try_publish` (never blocking: a full ring is an
//! immediate 503); one consumer thread, ours, drains whole batches with the crate's
//! `EventPoller`, gathers them into Kafka records (`crate::gather`) and hands those to
//! librdkafka. It owns its loop because gathering needs a timer: a window's record must go when
//! the window ends, even if no further request comes. Between looks it parks, never spins; with
//! the ring empty it parks for `--ring-idle-sleep-us` (never past the gathered record's due
//! time), so an idle ingest costs almost nothing on a 2-core machine that also runs k6 and five
//! servers; a put wakes it, so a quiet request does not wait out the nap (`crate::wake`: who
//! wakes it when), and the last ring handle wakes it to finish.
//! Slots hold their entry behind an uncontended mutex because the disruptor hands consumers
//! `&E` and the consumer must move the entry (and its acknowledgement channel) out.
//!
//! A slot holds one request record: a single POST's message, or a batch POST's messages as one
//! array (`pipeline_common::record`, cut at `--record-max-bytes`). The ring is bounded in bytes
//! as well as in slots: 131,072 slots of records up to 256 KB each would be gigabytes. A put
//! that would pass the byte bound is a 503 like a full ring.

use crate::gather::{Entry, Gather, Publish};
use crate::wake::{Awaits, Wake};
use disruptor::{
    build_multi_producer, BusySpin, EventPoller, MultiProducer, MultiProducerBarrier, Polling, Producer,
    SingleConsumerBarrier,
};
use metrics::{counter, gauge, histogram};
use pipeline_common::catalog;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Slot(Mutex<Option<Entry>>);

/// A slot's entry. Never contended (the disruptor hands a slot to one side at a time); a
/// poisoned lock still holds a consistent `Option`, so take it rather than panic.
fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<Entry>> {
    slot.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Published and drained counts, for the occupancy gauge, and the bytes held.
#[derive(Default)]
struct Counts {
    published: AtomicU64,
    drained: AtomicU64,
    bytes: AtomicU64,
    max_bytes: u64,
}

impl Counts {
    /// Reserves room for `n` bytes, or refuses when that would pass the bound. An empty ring
    /// always takes one put, so a single message larger than the bound is never refused forever.
    fn reserve(&self, n: u64) -> bool {
        let before = self.bytes.fetch_add(n, Ordering::AcqRel);
        if before > 0 && before + n > self.max_bytes {
            self.bytes.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Nothing published is left to poll, given the consumer's own count of what it drained. A put
    /// is counted after its slot is published, so the consumer can drain an entry before it is
    /// counted; that is nothing left too, and the consumer may sleep: the put's wake-up follows
    /// its count. (Equality alone kept the consumer looking, without sleeping, until the count
    /// caught up: a spin for as long as the putting worker was off its core.)
    fn all_drained(&self, drained: u64) -> bool {
        self.published.load(Ordering::SeqCst) <= drained
    }
}

/// The ring is full (or has fewer free slots than a batch needs).
#[derive(Debug)]
pub(crate) struct RingFull;

/// One producer handle. Each HTTP worker owns a clone; the ring shuts down (after draining
/// every published entry and sending what it gathered) when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct Ring {
    // Dropped first: the last producer handle tells the consumer to finish...
    producer: MultiProducer<Slot, SingleConsumerBarrier>,
    counts: Arc<Counts>,
    // ...and the last `Joiner` then waits for it.
    _consumer: Arc<Joiner>,
    /// Wakes the consumer after a put when it sleeps for one (`crate::wake`).
    wake: Arc<Wake>,
}

/// Joins the consumer thread when the last ring handle goes.
struct Joiner(Option<std::thread::JoinHandle<()>>);

impl Drop for Joiner {
    fn drop(&mut self) {
        // The producer handle went first, so the consumer's next look finds the ring shut: wake
        // it for that look rather than wait out its nap (a put ends the nap, and none comes now).
        if let Some(Err(e)) = self.0.take().map(|t| {
            t.thread().unpark();
            t.join()
        }) {
            tracing::error!(error = ?e, "the ring consumer panicked");
        }
    }
}

/// Says when the ring consumer has drained the ring and handed everything to librdkafka. The
/// shutdown waits for it before the producer's last flush: dropping one ring handle is not enough,
/// because actix's workers may drop theirs after the server has said it stopped.
pub(crate) struct Drained(std::sync::mpsc::Receiver<()>);

impl Drained {
    /// Waits at most `timeout`; true when the consumer has finished.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        matches!(self.0.recv_timeout(timeout), Err(std::sync::mpsc::RecvTimeoutError::Disconnected) | Ok(()))
    }
}

/// How the ring consumer gathers and sleeps.
pub(crate) struct RingOptions {
    pub size: usize,
    pub max_bytes: u64,
    pub idle_sleep_max: Duration,
    /// `--record-max-bytes`: the largest gathered record (0: gather nothing).
    pub record_max_bytes: usize,
    /// `--linger-ms`: how long a record gathers requests (at most, with `adaptive`).
    pub window: Duration,
    /// `--linger-mode adaptive`: send a gathered record as soon as nothing is in flight.
    pub adaptive: bool,
}

impl Ring {
    /// A ring of `size` slots holding at most `max_bytes` of records, drained by a thread that
    /// gathers them into records for `publisher`; and what says when that thread has finished.
    pub(crate) fn start(opts: RingOptions, publisher: impl Publish) -> std::io::Result<(Ring, Drained)> {
        gauge!(catalog::INGEST_RING_CAPACITY).set(opts.size as f64);
        gauge!(catalog::INGEST_RING_CAPACITY_BYTES).set(opts.max_bytes as f64);
        let counts = Arc::new(Counts { max_bytes: opts.max_bytes, ..Counts::default() });
        // The wait strategy is the crate's, for its own consumer threads; ours sleeps itself.
        let (poller, builder) = build_multi_producer(opts.size, Slot::default, BusySpin).new_event_poller();
        let producer = builder.build();
        let c = counts.clone();
        let wake = Arc::new(Wake::default());
        publisher.wake_when_link_idle(wake.clone());
        let (finished, drained) = std::sync::mpsc::channel::<()>();
        let w = wake.clone();
        let consumer = std::thread::Builder::new().name("ring-consumer".into()).spawn(move || {
            consume(poller, &c, &opts, &publisher, &w);
            drop(finished);
        })?;
        wake.set_consumer(consumer.thread().clone());
        Ok((Ring { producer, counts, _consumer: Arc::new(Joiner(Some(consumer))), wake }, Drained(drained)))
    }

    /// Puts all entries in the ring or none of them, so a 503 never leaves half a batch behind.
    pub(crate) fn try_put_all(&mut self, entries: Vec<Entry>) -> Result<(), RingFull> {
        let n = entries.len();
        let bytes: u64 = entries.iter().map(Entry::bytes).sum();
        if !self.counts.reserve(bytes) {
            counter!(catalog::INGEST_RING_REJECTIONS_TOTAL, "reason" => "bytes").increment(1);
            return Err(RingFull);
        }
        let mut it = entries.into_iter();
        match self.producer.try_batch_publish(n, |slots| {
            for slot in slots {
                *lock(slot) = it.next();
            }
        }) {
            Ok(_) => {
                self.counts.published.fetch_add(n as u64, Ordering::SeqCst);
                self.wake.put();
                Ok(())
            }
            Err(_) => {
                self.counts.bytes.fetch_sub(bytes, Ordering::AcqRel);
                counter!(catalog::INGEST_RING_REJECTIONS_TOTAL, "reason" => "slots").increment(1);
                Err(RingFull)
            }
        }
    }
}

/// The consumer thread: drain, gather, send; sleep while there is nothing to do. Returns once
/// every published entry was drained and sent (the last producer handle is gone).
fn consume(
    mut poller: EventPoller<Slot, MultiProducerBarrier>,
    c: &Counts,
    opts: &RingOptions,
    publisher: &impl Publish,
    wake: &Wake,
) {
    let mut gather = Gather::new(opts.record_max_bytes, opts.window, opts.adaptive);
    // Handles made once: a `histogram!` per record would look the series up each time.
    let (ring_wait, drain_batch) =
        (histogram!(catalog::INGEST_RING_WAIT_SECONDS), histogram!(catalog::INGEST_RING_DRAIN_BATCH_RECORDS));
    loop {
        let now = Instant::now();
        let (idle, finished) = match poller.poll() {
            Ok(mut events) => {
                let mut n = 0u64;
                for slot in &mut events {
                    if let Some(entry) = lock(slot).take() {
                        n += 1;
                        ring_wait.record(now.saturating_duration_since(entry.put).as_secs_f64());
                        gather.push(entry, now);
                    }
                }
                // The guard goes here: the slots are free for the HTTP workers again (their bytes
                // stay counted until they are in librdkafka: see `Gather`).
                drop(events);
                drain_batch.record(n as f64);
                let drained = c.drained.fetch_add(n, Ordering::Relaxed) + n;
                gauge!(catalog::INGEST_RING_OCCUPANCY)
                    .set((c.published.load(Ordering::Relaxed).saturating_sub(drained)) as f64);
                (false, false)
            }
            Err(Polling::NoEvents) => (true, false),
            Err(Polling::Shutdown) => {
                gather.flush();
                (false, true)
            }
        };
        gather.flush_if_due(now, publisher.in_flight());
        if gather.has_ready() {
            let (records, bytes) = gather.ready();
            publisher.send_all(records);
            let held = c.bytes.fetch_sub(bytes, Ordering::AcqRel).saturating_sub(bytes);
            gauge!(catalog::INGEST_RING_BYTES).set(held as f64);
        } else if idle {
            // Nothing came and nothing is due: sleep. While an adaptive window's spacing lasts,
            // nothing can be sent, so nothing wakes us before it ends: puts wait in the ring and
            // the delivery report is read when it ends (a wake-up per put or per report cost a
            // thread switch per record under load, when the spacing is longer than the broker's
            // round trip). After it, with a record gathered behind one in flight, until the
            // broker's acknowledgement leaves nothing in flight (the delivery report wakes us) or
            // the window ends; puts do not wake us then, they only join what is gathered. With
            // nothing gathered, until a put wakes us: the whole `--ring-idle-sleep-us` at once,
            // because looking sooner would find nothing (timed looks 1, 2, 4... ms apart were
            // two wake-ups in three of a quiet ingest's consumer).
            let (what, nap) = match (gather.spacing_left(now), gather.awaits_link(), publisher.in_flight() > 0) {
                (Some(left), _, _) => (None, left),
                (None, true, true) => (Some(Awaits::Link), Duration::MAX),
                // The link went idle after `flush_if_due` looked: look again.
                (None, true, false) => (None, Duration::ZERO),
                (None, false, _) => (Some(Awaits::Put), opts.idle_sleep_max),
            };
            let nap = gather.due_in(now).map_or(nap, |due| due.min(nap));
            let drained = c.drained.load(Ordering::Relaxed);
            let still_needed = |what: Awaits| match what {
                Awaits::Link => publisher.in_flight() > 0,
                Awaits::Put => c.all_drained(drained),
            };
            match what {
                Some(what) if wake.prepare(what, || still_needed(what)) => std::thread::park_timeout(nap),
                Some(_) => {}
                None => std::thread::park_timeout(nap),
            }
            wake.awake();
        }
        if finished {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gather::Pending;
    use pipeline_common::procstat::thread_switches;
    use std::sync::atomic::AtomicUsize;

    /// A broker that acknowledges at once: it counts the records it is handed.
    #[derive(Clone, Default)]
    struct Counting(Arc<AtomicUsize>);

    impl Publish for Counting {
        fn send_all(&self, records: impl Iterator<Item = Pending>) {
            self.0.fetch_add(records.count(), Ordering::SeqCst);
        }
        fn in_flight(&self) -> usize {
            0
        }
        fn wake_when_link_idle(&self, _: Arc<Wake>) {}
    }

    fn start(idle_sleep_max: Duration) -> (Ring, Drained, Counting) {
        let sent = Counting::default();
        let opts = RingOptions {
            size: 64,
            max_bytes: 1 << 20,
            idle_sleep_max,
            record_max_bytes: 1 << 16,
            window: Duration::from_millis(20),
            adaptive: true,
        };
        let (ring, drained) = Ring::start(opts, sent.clone()).expect("ring");
        (ring, drained, sent)
    }

    fn put(ring: &mut Ring) {
        let entry = Entry { payload: br#"{"id":"a"}"#.to_vec(), ack: None, put: Instant::now() };
        assert!(ring.try_put_all(vec![entry]).is_ok(), "an empty ring takes a put");
    }

    fn until_sent(sent: &Counting, n: usize) {
        for _ in 0..5000 {
            if sent.0.load(Ordering::SeqCst) >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the consumer never sent record {n}");
    }

    /// Quiet traffic, a request every 10 ms: the consumer wakes for each request and for its
    /// record's spacing, not on a timer in between (a put wakes it, so looking sooner finds
    /// nothing). Counted in the consumer thread's sleeps, not in time.
    #[test]
    fn a_quiet_ingest_wakes_the_consumer_twice_a_request() {
        // A nap far longer than the test: a put that did not wake the consumer stalls it, and
        // `until_sent` says so.
        let (mut ring, _drained, sent) = start(Duration::from_secs(60));
        put(&mut ring);
        until_sent(&sent, 1);
        let before = thread_switches(None, "ring-consumer").expect("own threads");
        let n = 50;
        for i in 0..n {
            std::thread::sleep(Duration::from_millis(10));
            put(&mut ring);
            until_sent(&sent, i + 2);
        }
        // Every consumer of the process is counted: under `cargo test` another test's ring may
        // add a few (nextest runs each test in a process of its own).
        let switches = thread_switches(None, "ring-consumer").expect("own threads").saturating_sub(before);
        assert!(switches <= (n as u64) * 5 / 2, "{switches} sleeps of the consumer for {n} requests");
    }

    #[test]
    fn an_entry_drained_before_it_is_counted_lets_the_consumer_sleep() {
        let c = Counts::default();
        c.published.store(5, Ordering::SeqCst);
        assert!(!c.all_drained(4), "one published entry not yet drained");
        assert!(c.all_drained(5));
        assert!(c.all_drained(6), "drained before the putting worker counted it: nothing to poll");
    }

    /// The last ring handle wakes the consumer to finish: its nap while the ring is idle may be
    /// long (a put ends it), and the shutdown must not wait it out.
    #[test]
    fn the_last_handle_ends_the_consumer_nap() {
        let (mut ring, drained, sent) = start(Duration::from_secs(60));
        put(&mut ring);
        until_sent(&sent, 1);
        // Long enough for the consumer to be parked in its nap.
        std::thread::sleep(Duration::from_millis(200));
        let t0 = Instant::now();
        drop(ring);
        assert!(drained.wait(Duration::from_secs(5)), "the consumer did not finish");
        assert!(t0.elapsed() < Duration::from_secs(1), "the shutdown waited {:?} for the nap", t0.elapsed());
    }
}
