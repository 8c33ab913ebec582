//! Which offsets may be committed: the contiguous completed prefix of each partition.
//!
//! Batches finish out of order (a slow Elasticsearch write for batch 1 can end after batch 2),
//! so the tracker keeps each partition's batches in offset order and only ever commits up to
//! the first batch that is still in flight. That is the fix for the seed's defect: a committed
//! offset means every record before it is in every store.

use std::collections::{BTreeMap, HashMap, VecDeque};

#[derive(Debug)]
struct Segment {
    batch: u64,
    /// Offset of the batch's last record in this partition.
    last: i64,
    done: bool,
}

#[derive(Debug, Default)]
pub struct Tracker {
    parts: HashMap<i32, VecDeque<Segment>>,
}

impl Tracker {
    /// Records that `batch` holds records of `partition` up to offset `last`. Batches must be
    /// added in the order they were polled.
    pub fn add(&mut self, partition: i32, batch: u64, last: i64) {
        self.parts.entry(partition).or_default().push_back(Segment { batch, last, done: false });
    }

    /// Marks `batch` complete in every partition it touched (partitions revoked meanwhile are
    /// gone and stay gone).
    pub fn complete(&mut self, batch: u64) {
        for q in self.parts.values_mut() {
            if let Some(seg) = q.iter_mut().find(|s| s.batch == batch) {
                seg.done = true;
            }
        }
    }

    /// Pops every partition's completed prefix and returns the offsets to commit (last + 1, the
    /// Kafka convention: the next record to read).
    pub fn take_committable(&mut self) -> BTreeMap<i32, i64> {
        let mut out = BTreeMap::new();
        for (&p, q) in self.parts.iter_mut() {
            while q.front().is_some_and(|s| s.done) {
                let s = q.pop_front().expect("checked");
                out.insert(p, s.last + 1);
            }
        }
        out
    }

    /// Forgets a partition that this consumer no longer owns; its incomplete batches will be
    /// redelivered to the new owner and rewritten idempotently.
    pub fn revoke(&mut self, partition: i32) {
        self.parts.remove(&partition);
    }

    /// Batch segments still waiting for a store write.
    pub fn pending(&self) -> usize {
        self.parts.values().map(|q| q.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_only_the_contiguous_prefix() {
        let mut t = Tracker::default();
        t.add(0, 1, 9);
        t.add(0, 2, 19);
        t.add(0, 3, 29);
        t.complete(2);
        assert!(t.take_committable().is_empty(), "batch 1 still in flight blocks batch 2");
        t.complete(1);
        assert_eq!(t.take_committable(), BTreeMap::from([(0, 20)]));
        t.complete(3);
        assert_eq!(t.take_committable(), BTreeMap::from([(0, 30)]));
        assert_eq!(t.pending(), 0);
    }

    #[test]
    fn partitions_are_independent() {
        let mut t = Tracker::default();
        t.add(0, 1, 5);
        t.add(1, 2, 7);
        t.add(1, 3, 8);
        t.complete(3);
        assert!(t.take_committable().is_empty(), "batch 2 still in flight in partition 1");
        t.complete(2);
        assert_eq!(t.take_committable(), BTreeMap::from([(1, 9)]));
        t.revoke(0);
        t.complete(1);
        assert!(t.take_committable().is_empty(), "a revoked partition is never committed");
        assert_eq!(t.pending(), 0);
    }
}
