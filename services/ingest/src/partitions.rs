//! Which partition the records of a given moment go to: one partition per linger window, taking
//! the partitions in turn.
//!
//! Why not librdkafka's sticky partitioner: it picks the next window's partition at random, so
//! one window in four lands on the partition whose previous request tansu has not answered yet.
//! With idempotence, librdkafka sends a partition nothing new while 5 or more of its messages
//! are in flight, yet it has already scheduled an immediate wake-up for the ready batch: its
//! broker thread then spins on `poll(0)` until the answer comes (docs/results/performance-log.md). Taken in turn,
//! a partition's previous request went out `partitions - 1` windows ago.
//!
//! The partition count comes from the broker's metadata, the answer the readiness loop asks for
//! every few seconds anyway (`crate::ready`); until it is known, records go out unassigned and the
//! sticky partitioner places them.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone)]
pub struct Rotation {
    epoch: Instant,
    window_ms: u128,
    /// The topic's partition count; 0 while unknown.
    count: Arc<AtomicI32>,
}

impl Rotation {
    /// One partition per `window` (the ring's gathering window, or the producer's linger).
    pub fn new(window: Duration) -> Rotation {
        Rotation { epoch: Instant::now(), window_ms: window.as_millis().max(1), count: Arc::new(AtomicI32::new(0)) }
    }

    /// The partition for records sent now, or `None` while the partition count is unknown.
    pub fn now(&self) -> Option<i32> {
        self.at(self.epoch.elapsed())
    }

    fn at(&self, since_epoch: Duration) -> Option<i32> {
        let n = self.count.load(Ordering::Relaxed);
        (n > 0).then(|| ((since_epoch.as_millis() / self.window_ms) % n as u128) as i32)
    }

    /// How long records go to one partition (the tests check it follows the settings).
    #[cfg(test)]
    pub fn window(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.window_ms).unwrap_or(u64::MAX))
    }

    pub fn set_count(&self, n: usize) {
        self.count.store(i32::try_from(n).unwrap_or(i32::MAX), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_count_leaves_records_unassigned() {
        assert_eq!(Rotation::new(Duration::from_millis(50)).at(Duration::from_millis(120)), None);
    }

    #[test]
    fn each_window_takes_the_next_partition_in_turn() {
        let r = Rotation::new(Duration::from_millis(50));
        r.set_count(4);
        let seen: Vec<_> =
            [0, 49, 50, 99, 100, 150, 199, 200, 250].iter().map(|&ms| r.at(Duration::from_millis(ms))).collect();
        let want = [0, 0, 1, 1, 2, 3, 3, 0, 1].map(Some);
        assert_eq!(seen, want);
    }

    #[test]
    fn a_zero_linger_still_rotates() {
        let r = Rotation::new(Duration::ZERO);
        r.set_count(2);
        assert_eq!((r.at(Duration::from_millis(0)), r.at(Duration::from_millis(1))), (Some(0), Some(1)));
    }
}
