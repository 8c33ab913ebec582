//! A partition nobody consumes, noticed from outside the group protocol and answered with a
//! rejoin.
//!
//! Kafka promises that once a rebalance completes every partition of a subscribed topic belongs
//! to a live member, and starts a rebalance when a member's session ends. A broker that breaks
//! that promise leaves records the ingest answered 202 for unread, with every writer healthy and
//! idle, and nothing in the consumer protocol tells a member about a partition assigned to nobody.
//! tansu 0.6.0 breaks it two ways (docs/explanation/architecture.md, "Known server quirks"): a member whose
//! session ends in a formed group is dropped without a rebalance, so its partitions stay assigned
//! to it; and a follower's empty SyncGroup, arriving just after the leader's session ended, is
//! taken as the leader's, so the group forms with no partition assigned at all.
//!
//! So the writer watches what it can see: each partition's committed offset against its high
//! watermark, sampled by [`crate::watermarks`]. When a partition with records waiting has not
//! moved for `--rejoin-stalled-secs`, no consumer of this process owns it, and every store
//! answers its healthcheck (a store outage stalls partitions for a reason the retry driver is
//! already waiting out), one consumer of this process leaves and rejoins the group: every broker
//! answers a membership change with a rebalance over the live members. Rejoins back off
//! (doubling to [`MAX_BACKOFF`]) while the stall lasts, and the first waits a random extra part
//! of the interval, so that several writers seeing one stall do not all rejoin at once (each
//! membership change during a rebalance is one more chance for the broker to lose it again).

use crate::rebalance::Membership;
use pipeline_common::kafka::PartitionLag;
use pipeline_stores::{Sink, CONNECT_TIMEOUT};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest wait between two rejoins while one stall lasts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// The decision, apart from Kafka and the stores so that it can be tested with a clock of its own.
#[derive(Debug)]
pub(crate) struct StallWatch {
    /// How long a partition with records waiting may stand still (plus this process's jitter).
    after: Duration,
    /// Per partition with records waiting: the committed offset last seen, and since when.
    since: BTreeMap<i32, (i64, Instant)>,
    /// No rejoin before this instant.
    quiet_until: Option<Instant>,
    /// The wait after the next rejoin.
    backoff: Duration,
}

impl StallWatch {
    /// `jitter` is added to `after` for this process: a fraction of it, chosen at random once.
    pub(crate) fn new(after: Duration, jitter: Duration) -> StallWatch {
        StallWatch { after: after + jitter, since: BTreeMap::new(), quiet_until: None, backoff: after }
    }

    /// Takes one sample of the group's offsets; returns the partitions that have stood still
    /// with records waiting for the whole interval and that no consumer of this process owns,
    /// when a rejoin may be made now (empty otherwise).
    pub(crate) fn observe(&mut self, sample: &[PartitionLag], owned: &BTreeSet<i32>, now: Instant) -> Vec<i32> {
        self.since.retain(|p, _| sample.iter().any(|s| s.partition == *p && s.lag() > 0));
        let mut stalled_anywhere = false;
        let mut orphans = Vec::new();
        for s in sample.iter().filter(|s| s.lag() > 0) {
            let seen = self.since.entry(s.partition).or_insert((s.committed, now));
            if seen.0 != s.committed {
                *seen = (s.committed, now);
            }
            if now.saturating_duration_since(seen.1) >= self.after {
                stalled_anywhere = true;
                if !owned.contains(&s.partition) {
                    orphans.push(s.partition);
                }
            }
        }
        if !stalled_anywhere {
            // Everything moves again: the next stall starts from the first interval.
            self.quiet_until = None;
            self.backoff = self.after;
        }
        if self.quiet_until.is_some_and(|t| now < t) {
            return Vec::new();
        }
        orphans
    }

    /// A rejoin was made at `now`: the next waits the backoff, which doubles.
    pub(crate) fn rejoined(&mut self, now: Instant) {
        self.quiet_until = Some(now + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }
}

/// The watch with what it acts on: this process's consumers and its stores.
pub(crate) struct Rejoiner {
    watch: StallWatch,
    members: Vec<Membership>,
    sinks: Vec<Arc<dyn Sink>>,
}

impl Rejoiner {
    pub(crate) fn new(after: Duration, members: Vec<Membership>, sinks: Vec<Arc<dyn Sink>>) -> Rejoiner {
        // Up to half the interval more, different in every process.
        let jitter = after.mul_f64((getrandom::u64().unwrap_or(0) % 1000) as f64 / 2000.0);
        Rejoiner { watch: StallWatch::new(after, jitter), members, sinks }
    }

    /// One sample of the group's offsets; may ask one consumer of this process to rejoin.
    pub(crate) async fn check(&mut self, sample: &[PartitionLag]) {
        let owned: BTreeSet<i32> = self.members.iter().flat_map(Membership::owned).collect();
        let now = Instant::now();
        let orphans = self.watch.observe(sample, &owned, now);
        if orphans.is_empty() {
            return;
        }
        if let Some(why) = self.a_store_down().await {
            tracing::info!(partitions = ?orphans, store = %why, "partitions stand still while a store does not answer; no rejoin");
            return;
        }
        // The consumer that gives up the least: one that owns nothing, else the one owning fewest.
        let Some(member) = self.members.iter().min_by_key(|m| m.owned().len()) else { return };
        let waiting: i64 = sample.iter().filter(|s| orphans.contains(&s.partition)).map(PartitionLag::lag).sum();
        tracing::warn!(
            partitions = ?orphans,
            records_waiting = waiting,
            consumer = member.consumer,
            "partitions with records waiting have not moved and no consumer here owns them; \
             rejoining the group so the broker assigns them again"
        );
        member.ask_rejoin();
        self.watch.rejoined(now);
    }

    /// The first store that does not answer its healthcheck in time, if any.
    async fn a_store_down(&self) -> Option<String> {
        let checks = self.sinks.iter().map(|s| async move {
            match tokio::time::timeout(CONNECT_TIMEOUT, s.healthcheck()).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("{}: no answer in {CONNECT_TIMEOUT:?}", s.kind())),
            }
        });
        futures::future::join_all(checks).await.into_iter().flatten().next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_secs(30);

    fn lag(partition: i32, committed: i64, high: i64) -> PartitionLag {
        PartitionLag { partition, committed, high }
    }

    fn set(p: &[i32]) -> BTreeSet<i32> {
        p.iter().copied().collect()
    }

    #[test]
    fn a_partition_standing_still_with_records_waiting_and_owned_elsewhere_is_named_after_the_interval() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(AFTER, Duration::ZERO);
        let sample = [lag(0, 5, 10), lag(1, 7, 7)];
        assert!(w.observe(&sample, &set(&[]), t0).is_empty(), "not yet");
        assert!(w.observe(&sample, &set(&[]), t0 + AFTER - Duration::from_secs(1)).is_empty(), "not yet");
        assert_eq!(w.observe(&sample, &set(&[]), t0 + AFTER), vec![0], "partition 1 has nothing waiting");
    }

    #[test]
    fn a_partition_that_moves_restarts_its_clock() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(AFTER, Duration::ZERO);
        w.observe(&[lag(0, 5, 10)], &set(&[]), t0);
        w.observe(&[lag(0, 6, 12)], &set(&[]), t0 + Duration::from_secs(20));
        assert!(w.observe(&[lag(0, 6, 14)], &set(&[]), t0 + AFTER).is_empty(), "moved 10 s ago");
        assert_eq!(w.observe(&[lag(0, 6, 14)], &set(&[]), t0 + Duration::from_secs(50)), vec![0]);
    }

    #[test]
    fn a_partition_this_process_owns_is_not_a_group_problem() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(AFTER, Duration::ZERO);
        w.observe(&[lag(0, 5, 10)], &set(&[0]), t0);
        assert!(w.observe(&[lag(0, 5, 10)], &set(&[0]), t0 + AFTER).is_empty(), "ours: the retry driver's business");
    }

    #[test]
    fn a_partition_never_committed_counts_from_zero() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(AFTER, Duration::ZERO);
        w.observe(&[lag(3, 0, 40)], &set(&[]), t0);
        assert_eq!(w.observe(&[lag(3, 0, 40)], &set(&[]), t0 + AFTER), vec![3]);
    }

    #[test]
    fn rejoins_back_off_while_the_stall_lasts_and_start_over_once_everything_moves() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(AFTER, Duration::ZERO);
        let stuck = [lag(0, 5, 10)];
        w.observe(&stuck, &set(&[]), t0);
        let t1 = t0 + AFTER;
        assert_eq!(w.observe(&stuck, &set(&[]), t1), vec![0]);
        w.rejoined(t1);
        assert!(w.observe(&stuck, &set(&[]), t1 + AFTER - Duration::from_secs(1)).is_empty(), "backing off");
        let t2 = t1 + AFTER;
        assert_eq!(w.observe(&stuck, &set(&[]), t2), vec![0]);
        w.rejoined(t2);
        assert!(w.observe(&stuck, &set(&[]), t2 + AFTER).is_empty(), "the second wait is twice as long");
        let t3 = t2 + AFTER * 2;
        assert_eq!(w.observe(&stuck, &set(&[]), t3), vec![0]);
        w.rejoined(t3);
        // It moves: the quiet period ends, and the next stall waits one interval again.
        let t4 = t3 + Duration::from_secs(5);
        assert!(w.observe(&[lag(0, 10, 10)], &set(&[]), t4).is_empty());
        w.observe(&[lag(0, 10, 20)], &set(&[]), t4);
        assert_eq!(w.observe(&[lag(0, 10, 20)], &set(&[]), t4 + AFTER), vec![0]);
    }

    #[test]
    fn the_backoff_is_bounded() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(AFTER, Duration::ZERO);
        for i in 0..10 {
            w.rejoined(t0 + Duration::from_secs(i));
        }
        assert_eq!(w.backoff, MAX_BACKOFF);
    }

    #[test]
    fn the_jitter_lengthens_the_first_interval_only_for_this_process() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(AFTER, Duration::from_secs(10));
        w.observe(&[lag(0, 5, 10)], &set(&[]), t0);
        assert!(w.observe(&[lag(0, 5, 10)], &set(&[]), t0 + AFTER).is_empty());
        assert_eq!(w.observe(&[lag(0, 5, 10)], &set(&[]), t0 + AFTER + Duration::from_secs(10)), vec![0]);
    }
}
