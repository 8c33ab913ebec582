//! What librdkafka calls back into, inside `recv()` and inside commits, on the consumer's own
//! task: the rebalance callback that opens and closes partition epochs in the [`Tracker`], and
//! the commit callback that records what Kafka acknowledged. Kept apart from the consume loop
//! ([`crate::consumer`]), which only pulls, hands batches on and asks for commits.

use crate::tracker::Tracker;
use metrics::{counter, gauge};
use pipeline_common::catalog;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaResult;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// The tracker, shared between the consume loop and librdkafka's callbacks.
#[derive(Clone, Default)]
pub(crate) struct Shared(Arc<Mutex<Tracker>>);

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Tracker> {
        // A poisoned lock means a panic while it was held; the tracker's data is still
        // consistent (every method leaves it so), so keep going rather than panic again.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One consumer's place in the group as the rest of the process sees it: which partitions it
/// owns now, and a way to ask it to leave and rejoin ([`crate::stall`]).
#[derive(Clone)]
pub(crate) struct Membership {
    pub(crate) consumer: usize,
    tracker: Shared,
    rejoin: Arc<Notify>,
}

impl Membership {
    pub(crate) fn new(consumer: usize, tracker: Shared) -> Membership {
        Membership { consumer, tracker, rejoin: Arc::new(Notify::new()) }
    }

    /// The partitions this consumer owns now.
    pub(crate) fn owned(&self) -> Vec<i32> {
        self.tracker.lock().partitions()
    }

    /// Asks the consumer to leave and rejoin the group at its next turn of the loop (a request
    /// made while it is busy is kept until then).
    pub(crate) fn ask_rejoin(&self) {
        self.rejoin.notify_one();
    }

    /// Resolves when a rejoin was asked for.
    pub(crate) async fn rejoin_asked(&self) {
        self.rejoin.notified().await;
    }
}

pub(crate) struct Ctx {
    /// This consumer's number in the process (the `consumer` label).
    pub(crate) id: usize,
    pub(crate) topic: String,
    pub(crate) tracker: Shared,
}

impl ClientContext for Ctx {}

impl ConsumerContext for Ctx {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let partitions = |tpl: &TopicPartitionList| tpl.elements().iter().map(|e| e.partition()).collect::<Vec<_>>();
        match rebalance {
            // Assign before librdkafka does, so no record of the new assignment arrives without
            // an epoch.
            Rebalance::Assign(tpl) => {
                let mut t = self.tracker.lock();
                for e in tpl.elements() {
                    t.assign(e.partition());
                }
                tracing::info!(consumer = self.id, partitions = ?partitions(tpl), "partitions assigned");
            }
            Rebalance::Revoke(tpl) => {
                let lost = consumer.assignment_lost();
                let mut t = self.tracker.lock();
                // A lost assignment may already belong to another member: committing could move
                // its offsets backwards. Only a clean revoke commits what is stored.
                if !lost {
                    let offsets = t.take_final_commit();
                    drop(t);
                    commit(consumer, &self.topic, &self.tracker, offsets, CommitMode::Sync);
                    t = self.tracker.lock();
                }
                for e in tpl.elements() {
                    t.revoke(e.partition());
                }
                tracing::info!(consumer = self.id, partitions = ?partitions(tpl), lost, "partitions revoked");
            }
            Rebalance::Error(e) => {
                // librdkafka unassigns everything after a failed rebalance.
                self.tracker.lock().revoke_all();
                tracing::warn!(consumer = self.id, error = %e, "rebalance failed; every partition dropped");
            }
        }
        let assigned = self.tracker.lock().assigned();
        gauge!(catalog::WRITER_ASSIGNED_PARTITIONS, "consumer" => self.id.to_string()).set(assigned as f64);
    }

    /// The broker's answer to a commit: only acknowledged offsets reach the gauge, and a failed
    /// commit is asked again by the next `take_commit`. rust-rdkafka 0.39 never calls this for
    /// manual asynchronous commits (upstream #856): only the synchronous ones are acknowledged
    /// here; docs/explanation/trust.md says what that costs (a redelivery, never a loss).
    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        acknowledge(&self.tracker, &result, offsets);
    }
}

fn acknowledge(tracker: &Shared, result: &KafkaResult<()>, offsets: &TopicPartitionList) {
    let mut t = tracker.lock();
    for e in offsets.elements() {
        let (p, offset) = (e.partition(), e.offset());
        match (result, offset) {
            (Ok(()), Offset::Offset(o)) if e.error().is_ok() => {
                if t.acked(p, o) {
                    gauge!(catalog::WRITER_PARTITION_COMMITTED_OFFSET, "partition" => p.to_string()).set(o as f64);
                }
            }
            _ => {
                counter!(catalog::WRITER_COMMIT_FAILURES_TOTAL).increment(1);
                t.commit_failed(p);
            }
        }
    }
    if let Err(e) = result {
        // Not fatal: the same offsets are asked again, and a record whose offset is never
        // committed is only redelivered, never lost.
        tracing::warn!(error = %e, "offset commit failed; will retry");
    }
}

/// Commits `offsets` (the next record to read, per partition) and records the answer.
pub(crate) fn commit<C: Consumer<Ctx>>(
    consumer: &C,
    topic: &str,
    tracker: &Shared,
    offsets: BTreeMap<i32, i64>,
    mode: CommitMode,
) {
    if offsets.is_empty() {
        return;
    }
    let mut tpl = TopicPartitionList::new();
    for (&p, &o) in &offsets {
        if let Err(e) = tpl.add_partition_offset(topic, p, Offset::Offset(o)) {
            tracing::error!(partition = p, offset = o, error = %e, "cannot express offset");
        }
    }
    let result = consumer.commit(&tpl, mode);
    // A synchronous commit's answer is its return value; an asynchronous one's arrives in
    // `commit_callback` (a failure to even queue it is known now).
    if matches!(mode, CommitMode::Sync) || result.is_err() {
        acknowledge(tracker, &result, &tpl);
    }
}
