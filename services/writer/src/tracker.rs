//! Which offsets may be committed: the contiguous completed prefix of each partition this
//! consumer owns *now*.
//!
//! Batches finish out of order (a slow Elasticsearch write for batch 1 can end after batch 2),
//! so each partition's batches are kept in offset order and a commit only ever reaches the
//! first batch still in flight: a committed offset means every record before it is in every
//! store (the reference experiment committed as soon as the async writes were submitted).
//!
//! Rebalances make this subtle. librdkafka runs the rebalance callback inside `recv()`, so a
//! batch being collected can hold records pulled before its partition was revoked, and even
//! records from before a revoke *and* a re-assignment of the same partition. If such a record
//! were tracked after the revoke emptied the partition's queue, it would have no predecessor, and
//! its completion would commit past the earlier batches still queued in the pools. So:
//! - every assignment of a partition opens a new **epoch**; records are stamped with the epoch
//!   they were pulled in, and [`Tracker::add`] refuses records of an epoch that is over (they are
//!   dropped unwritten; their new owner, or this consumer's new epoch, reads them again from the
//!   committed offset);
//! - only partitions assigned now are ever committed, and only forward;
//! - what Kafka acknowledged (the commit callback) is kept apart from what was asked, so a failed
//!   commit is asked again and the committed-offset gauge shows only acknowledged offsets.

use std::collections::{BTreeMap, HashMap, VecDeque};

/// One assignment of one partition to this consumer.
pub(crate) type Epoch = u64;

#[derive(Debug)]
struct Segment {
    batch: u64,
    /// Offset of the batch's last record in this partition.
    last: i64,
    done: bool,
}

#[derive(Debug)]
struct Part {
    epoch: Epoch,
    queue: VecDeque<Segment>,
    /// Next offset to read such that everything before it is stored (the committable offset).
    stored_upto: Option<i64>,
    /// Highest offset sent in a commit request this epoch.
    requested: Option<i64>,
    /// Highest offset Kafka acknowledged this epoch.
    acked: Option<i64>,
}

#[derive(Debug, Default)]
pub(crate) struct Tracker {
    parts: HashMap<i32, Part>,
    last_epoch: Epoch,
}

impl Tracker {
    /// The partition is now ours: a new epoch with nothing in flight.
    pub(crate) fn assign(&mut self, partition: i32) -> Epoch {
        self.last_epoch += 1;
        let part =
            Part { epoch: self.last_epoch, queue: VecDeque::new(), stored_upto: None, requested: None, acked: None };
        self.parts.insert(partition, part);
        self.last_epoch
    }

    /// The partition is no longer ours (revoked or lost): forget it. Its batches still in the
    /// pools finish unobserved; whatever was not committed is redelivered to the next owner and
    /// rewritten idempotently.
    pub(crate) fn revoke(&mut self, partition: i32) {
        self.parts.remove(&partition);
    }

    /// Forgets every partition (a failed rebalance unassigns them all).
    pub(crate) fn revoke_all(&mut self) {
        self.parts.clear();
    }

    /// How many partitions are assigned to us.
    pub(crate) fn assigned(&self) -> usize {
        self.parts.len()
    }

    /// The partitions assigned to us, in order.
    pub(crate) fn partitions(&self) -> Vec<i32> {
        let mut p: Vec<i32> = self.parts.keys().copied().collect();
        p.sort_unstable();
        p
    }

    /// The current epoch of a partition, `None` when it is not assigned to us.
    pub(crate) fn epoch(&self, partition: i32) -> Option<Epoch> {
        self.parts.get(&partition).map(|p| p.epoch)
    }

    /// Records that `batch` holds records of `partition`, pulled in `epoch`, up to offset `last`.
    /// Batches must be added in the order they were polled. Returns false, and tracks nothing,
    /// when that epoch is over: the caller must then not write those records.
    pub(crate) fn add(&mut self, partition: i32, epoch: Epoch, batch: u64, last: i64) -> bool {
        match self.parts.get_mut(&partition) {
            Some(p) if p.epoch == epoch => {
                p.queue.push_back(Segment { batch, last, done: false });
                true
            }
            _ => false,
        }
    }

    /// Marks `batch` complete in every partition it touched (partitions revoked meanwhile are
    /// gone and stay gone).
    pub(crate) fn complete(&mut self, batch: u64) {
        for p in self.parts.values_mut() {
            if let Some(seg) = p.queue.iter_mut().find(|s| s.batch == batch) {
                seg.done = true;
            }
        }
    }

    fn advance(&mut self) {
        for p in self.parts.values_mut() {
            while p.queue.front().is_some_and(|s| s.done) {
                if let Some(s) = p.queue.pop_front() {
                    p.stored_upto = Some(s.last + 1);
                }
            }
        }
    }

    /// Offsets to commit now (Kafka's convention: the next record to read): every assigned
    /// partition whose stored prefix moved past what was already asked for. Marks them asked.
    pub(crate) fn take_commit(&mut self) -> BTreeMap<i32, i64> {
        self.stored_past(|p| p.requested)
    }

    /// Offsets for a final, synchronous commit: every assigned partition's stored prefix that
    /// Kafka has not acknowledged yet, whether or not an asynchronous commit asked for it.
    pub(crate) fn take_final_commit(&mut self) -> BTreeMap<i32, i64> {
        self.stored_past(|p| p.acked)
    }

    /// Every assigned partition whose stored prefix is past `floor` (nothing yet counts as
    /// below everything), marked as asked for.
    fn stored_past(&mut self, floor: fn(&Part) -> Option<i64>) -> BTreeMap<i32, i64> {
        self.advance();
        let mut out = BTreeMap::new();
        for (&partition, p) in self.parts.iter_mut() {
            if let Some(upto) = p.stored_upto.filter(|u| floor(p).is_none_or(|f| *u > f)) {
                p.requested = Some(upto);
                out.insert(partition, upto);
            }
        }
        out
    }

    /// Kafka acknowledged a commit of `offset` for `partition`. Returns true when this moved the
    /// partition's acknowledged offset (a late acknowledgement for an earlier epoch or a smaller
    /// offset changes nothing).
    pub(crate) fn acked(&mut self, partition: i32, offset: i64) -> bool {
        match self.parts.get_mut(&partition) {
            Some(p) if p.acked.is_none_or(|a| offset > a) && p.requested.is_some_and(|r| offset <= r) => {
                p.acked = Some(offset);
                true
            }
            _ => false,
        }
    }

    /// A commit for `partition` failed: ask again on the next [`Tracker::take_commit`].
    pub(crate) fn commit_failed(&mut self, partition: i32) {
        if let Some(p) = self.parts.get_mut(&partition) {
            p.requested = p.acked;
        }
    }

    /// Batch segments still waiting for a store write.
    pub(crate) fn pending(&self) -> usize {
        self.parts.values().map(|p| p.queue.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_only_the_contiguous_prefix() {
        let mut t = Tracker::default();
        let e = t.assign(0);
        assert!(t.add(0, e, 1, 9));
        assert!(t.add(0, e, 2, 19));
        assert!(t.add(0, e, 3, 29));
        t.complete(2);
        assert!(t.take_commit().is_empty(), "batch 1 still in flight blocks batch 2");
        t.complete(1);
        assert_eq!(t.take_commit(), BTreeMap::from([(0, 20)]));
        t.complete(3);
        assert_eq!(t.take_commit(), BTreeMap::from([(0, 30)]));
        assert_eq!(t.pending(), 0);
    }

    #[test]
    fn partitions_are_independent() {
        let mut t = Tracker::default();
        let (e0, e1) = (t.assign(0), t.assign(1));
        t.add(0, e0, 1, 5);
        t.add(1, e1, 2, 7);
        t.add(1, e1, 3, 8);
        t.complete(3);
        assert!(t.take_commit().is_empty(), "batch 2 still in flight in partition 1");
        t.complete(2);
        assert_eq!(t.take_commit(), BTreeMap::from([(1, 9)]));
        t.revoke(0);
        t.complete(1);
        assert!(t.take_commit().is_empty(), "a revoked partition is never committed");
        assert_eq!(t.pending(), 0);
    }

    /// The trust issue's finding 1. Batch 1 of partition 0 (offsets ..=9) is in a pool when a
    /// rebalance inside `recv()` revokes the partition; batch 2 (offsets 10..=19) had already been
    /// pulled. On the old tracker, batch 2 was added to the emptied queue and its completion
    /// committed offset 20 with batch 1 unwritten: a loss. Seen failing on the old code
    /// (`take_committable` returned {0: 20}).
    #[test]
    fn a_batch_pulled_before_a_revoke_never_commits_past_the_revoked_batches() {
        let mut t = Tracker::default();
        let e = t.assign(0);
        assert!(t.add(0, e, 1, 9));
        t.revoke(0);
        assert!(!t.add(0, e, 2, 19), "records of a revoked partition are refused");
        t.complete(2);
        assert!(t.take_commit().is_empty(), "nothing may be committed past batch 1");
    }

    /// The same, with the partition re-assigned to this consumer inside the same `fill()`:
    /// records from the old epoch are refused, records of the new epoch (re-read from the
    /// committed offset) are tracked from scratch.
    #[test]
    fn a_reassigned_partition_starts_a_new_epoch() {
        let mut t = Tracker::default();
        let old = t.assign(0);
        t.add(0, old, 1, 9);
        t.revoke(0);
        let new = t.assign(0);
        assert_ne!(old, new);
        assert!(!t.add(0, old, 2, 19), "pulled in the old epoch");
        t.complete(1);
        t.complete(2);
        assert!(t.take_commit().is_empty(), "old batches complete into nothing");
        assert!(t.add(0, new, 3, 9));
        t.complete(3);
        assert_eq!(t.take_commit(), BTreeMap::from([(0, 10)]));
    }

    #[test]
    fn commits_go_forward_and_failed_ones_are_asked_again() {
        let mut t = Tracker::default();
        let e = t.assign(0);
        t.add(0, e, 1, 9);
        t.complete(1);
        assert_eq!(t.take_commit(), BTreeMap::from([(0, 10)]));
        assert!(t.take_commit().is_empty(), "asked once");
        t.commit_failed(0);
        assert_eq!(t.take_commit(), BTreeMap::from([(0, 10)]), "asked again after a failure");
        assert!(t.acked(0, 10));
        assert!(!t.acked(0, 5), "acknowledgements only move forward");
        assert!(t.take_final_commit().is_empty(), "everything stored is acknowledged");
        t.add(0, e, 2, 19);
        t.complete(2);
        assert_eq!(t.take_commit(), BTreeMap::from([(0, 20)]));
        // The asynchronous commit of 20 is still unanswered at shutdown: the final commit repeats it.
        assert_eq!(t.take_final_commit(), BTreeMap::from([(0, 20)]));
    }

    #[test]
    fn a_lost_assignment_forgets_everything() {
        let mut t = Tracker::default();
        let (a, b) = (t.assign(0), t.assign(1));
        t.add(0, a, 1, 9);
        t.add(1, b, 1, 9);
        t.revoke_all();
        t.complete(1);
        assert!(t.take_commit().is_empty() && t.take_final_commit().is_empty());
        assert_eq!(t.epoch(0), None);
    }
}
