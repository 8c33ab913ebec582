//! One consumer of the group: pull a batch, decode it, hand it to the driver, commit the
//! offsets whose records are stored everywhere (see [`crate::tracker`] for what may be committed
//! across rebalances).

use crate::config::{CommitMode, WriterConfig};
use crate::dlq::Dlq;
use crate::driver::{Completion, Driver, Ticket};
use crate::tracker::{Epoch, Tracker};
use anyhow::bail;
use metrics::{counter, gauge};
use pipeline_common::catalog;
use pipeline_common::kafka::client_config;
use pipeline_common::message::Limits;
use pipeline_common::record;
use rdkafka::consumer::{
    BaseConsumer, CommitMode as KafkaCommit, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaResult;
use rdkafka::message::BorrowedMessage;
use rdkafka::{ClientContext, Message as _, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// One record decoded out of librdkafka's buffers (one message, or a batch request's array:
/// `pipeline_common::record`), stamped with the assignment epoch of its partition at the moment
/// it was pulled.
pub(crate) struct Record {
    pub partition: i32,
    pub offset: i64,
    pub epoch: Epoch,
    /// The record's size, for the pools' byte bounds.
    pub bytes: usize,
    pub decoded: record::Decoded,
}

/// The tracker, shared with librdkafka's callbacks (which run inside `recv()` and inside
/// commits, on the consumer's own task).
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Tracker>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Tracker> {
        // A poisoned lock means a panic while it was held; the tracker's data is still
        // consistent (every method leaves it so), so keep going rather than panic again.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct Ctx {
    /// This consumer's number in the process (the `consumer` label).
    id: usize,
    topic: String,
    tracker: Shared,
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
                tracing::info!(partitions = ?partitions(tpl), "partitions assigned");
            }
            Rebalance::Revoke(tpl) => {
                let lost = consumer.assignment_lost();
                let mut t = self.tracker.lock();
                // A lost assignment may already belong to another member: committing could move
                // its offsets backwards. Only a clean revoke commits what is stored.
                if !lost {
                    let offsets = t.take_final_commit();
                    drop(t);
                    commit(consumer, &self.topic, &self.tracker, offsets, KafkaCommit::Sync);
                    t = self.tracker.lock();
                }
                for e in tpl.elements() {
                    t.revoke(e.partition());
                }
                tracing::info!(partitions = ?partitions(tpl), lost, "partitions revoked");
            }
            Rebalance::Error(e) => {
                // librdkafka unassigns everything after a failed rebalance.
                self.tracker.lock().revoke_all();
                tracing::warn!(error = %e, "rebalance failed; every partition dropped");
            }
        }
        let assigned = self.tracker.lock().assigned();
        gauge!(catalog::WRITER_ASSIGNED_PARTITIONS, "consumer" => self.id.to_string()).set(assigned as f64);
    }

    /// The broker's answer to a commit: only acknowledged offsets reach the gauge, and a failed
    /// commit is asked again by the next `take_commit`. rust-rdkafka 0.39 never calls this for
    /// manual asynchronous commits (upstream #856): only the synchronous ones are acknowledged
    /// here; docs/trust.md says what that costs (a redelivery, never a loss).
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

fn commit<C: Consumer<Ctx>>(
    consumer: &C,
    topic: &str,
    tracker: &Shared,
    offsets: BTreeMap<i32, i64>,
    mode: KafkaCommit,
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
    if matches!(mode, KafkaCommit::Sync) || result.is_err() {
        acknowledge(tracker, &result, &tpl);
    }
}

pub(crate) struct BatchConsumer {
    id: usize,
    cfg: Arc<WriterConfig>,
    consumer: StreamConsumer<Ctx>,
    tracker: Shared,
    driver: Arc<Driver<Dlq>>,
    dlq: Dlq,
}

impl BatchConsumer {
    pub(crate) fn new(id: usize, cfg: Arc<WriterConfig>, driver: Arc<Driver<Dlq>>, dlq: Dlq) -> anyhow::Result<Self> {
        let tracker = Shared::default();
        let ctx = Ctx { id, topic: cfg.kafka.topic.clone(), tracker: tracker.clone() };
        let mut config = client_config(&cfg.kafka);
        config
            .set("group.id", &cfg.kafka.group)
            .set("client.id", format!("writer-{id}"))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "1000");
        cfg.consumer_options.apply(&mut config);
        let consumer: StreamConsumer<Ctx> = config.create_with_context(ctx)?;
        consumer.subscribe(&[&cfg.kafka.topic])?;
        Ok(BatchConsumer { id, cfg, consumer, tracker, driver, dlq })
    }

    /// Runs until `stop` is cancelled, then waits at most the shutdown grace for in-flight
    /// writes, commits what is stored (synchronously) and returns. Returns `Err` when a batch
    /// can never be stored (a store adapter panicked): the caller must exit non-zero so a
    /// supervisor restarts the process; nothing past that batch is committed.
    pub(crate) async fn run(self, stop: CancellationToken) -> anyhow::Result<()> {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Completion>();
        let grace = self.cfg.shutdown_grace();
        // Fires `grace` after the stop signal: bounds a write stuck behind a store outage.
        let grace_over = async {
            stop.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::pin!(grace_over);
        // Set once `grace_over` has fired: a finished future must not be polled again.
        let mut grace_spent = false;
        let mut next_batch: u64 = 0;
        let mut outcome = Ok(());
        tracing::info!(consumer = self.id, "consuming");
        'consume: loop {
            // Apply completions and commit the stored prefix before pulling more.
            while let Ok(c) = done_rx.try_recv() {
                if let Err(e) = self.complete(c) {
                    outcome = Err(e);
                    break 'consume;
                }
            }
            self.commit_ready(KafkaCommit::Async);
            // Only the wait for the first record races with completions and the stop signal:
            // `recv()` is cancel-safe, but a half-collected batch is not (dropping it would lose
            // records whose offsets a later batch then commits).
            let first = tokio::select! {
                _ = stop.cancelled() => break,
                Some(c) = done_rx.recv() => {
                    if let Err(e) = self.complete(c) {
                        outcome = Err(e);
                        break;
                    }
                    continue;
                }
                r = self.consumer.recv() => r,
            };
            let records = self.fill(first).await;
            if records.is_empty() {
                continue;
            }
            next_batch += 1;
            // Dropping `handle` mid-write (grace over) is safe: its batch is never completed,
            // so never committed, and is redelivered to the next owner.
            tokio::select! {
                r = self.handle(next_batch, records, &done_tx) => if let Err(e) = r {
                    outcome = Err(e);
                    break;
                },
                _ = &mut grace_over => {
                    tracing::warn!(consumer = self.id, "shutdown grace over during a synchronous write");
                    grace_spent = true;
                    break;
                }
            }
        }
        if outcome.is_ok() && !grace_spent {
            // Shutdown: no more fetching; wait (at most the grace) for what is in flight.
            while self.tracker.lock().pending() > 0 {
                tokio::select! {
                    c = done_rx.recv() => match c {
                        Some(c) => if let Err(e) = self.complete(c) { outcome = Err(e); break; },
                        None => break,
                    },
                    _ = &mut grace_over => {
                        let pending = self.tracker.lock().pending();
                        tracing::warn!(consumer = self.id, pending, "shutdown grace over; uncommitted batches will be redelivered");
                        break;
                    }
                }
                self.commit_ready(KafkaCommit::Async);
            }
        }
        self.commit_ready(KafkaCommit::Sync);
        tracing::info!(consumer = self.id, ok = outcome.is_ok(), "stopped; every stored batch committed");
        outcome
    }

    fn complete(&self, c: Completion) -> anyhow::Result<()> {
        if !c.ok {
            bail!("consumer {}: batch {} can never be reported stored (a store write panicked)", self.id, c.batch);
        }
        self.tracker.lock().complete(c.batch);
        Ok(())
    }

    fn commit_ready(&self, mode: KafkaCommit) {
        let offsets = match mode {
            KafkaCommit::Sync => self.tracker.lock().take_final_commit(),
            KafkaCommit::Async => self.tracker.lock().take_commit(),
        };
        commit(&self.consumer, &self.cfg.kafka.topic, &self.tracker, offsets, mode);
    }

    /// One batch: the first record, then what arrives within `batch_wait`, until it holds
    /// `batch_max` messages or more (the last record may take it past).
    async fn fill(&self, first: KafkaResult<BorrowedMessage<'_>>) -> Vec<Record> {
        let mut out = Vec::new();
        let mut items = 0;
        match first {
            Ok(m) => items += self.take(&m, &mut out),
            Err(e) => {
                tracing::warn!(error = %e, "consume error");
                tokio::time::sleep(Duration::from_millis(100)).await;
                return out;
            }
        }
        let deadline = Instant::now() + self.cfg.batch_wait();
        while items < self.cfg.batch_max {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.consumer.recv()).await {
                Ok(Ok(m)) => items += self.take(&m, &mut out),
                Ok(Err(e)) => tracing::warn!(error = %e, "consume error"),
                Err(_) => break,
            }
        }
        out
    }

    /// Decodes a record, stamped with its partition's current epoch, and returns how many items
    /// it holds; a record of a partition we do not own (cannot normally happen) is dropped here.
    fn take(&self, m: &BorrowedMessage<'_>, out: &mut Vec<Record>) -> usize {
        let Some(epoch) = self.tracker.lock().epoch(m.partition()) else { return 0 };
        let payload = m.payload().unwrap_or_default();
        let decoded = record::decode(payload, Limits { max_body_bytes: self.cfg.max_body_bytes });
        let items = decoded.messages.len() + decoded.bad.len();
        out.push(Record { partition: m.partition(), offset: m.offset(), epoch, bytes: payload.len(), decoded });
        items
    }

    /// One batch, in a span that names it (consumer, batch number, the offsets of each
    /// partition): every log line of its writes, retries and dead letters carries it.
    async fn handle(
        &self,
        batch: u64,
        records: Vec<Record>,
        done: &mpsc::UnboundedSender<Completion>,
    ) -> anyhow::Result<()> {
        let mut spans: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
        for r in &records {
            let e = spans.entry(r.partition).or_insert((r.offset, r.offset));
            e.0 = e.0.min(r.offset);
            e.1 = e.1.max(r.offset);
        }
        let offsets: Vec<String> = spans.iter().map(|(p, (a, b))| format!("{p}:{a}-{b}")).collect();
        let span = tracing::info_span!("batch", consumer = self.id, batch, records = records.len(), offsets = %offsets.join(","));
        self.handle_in_span(batch, records, done).instrument(span).await
    }

    async fn handle_in_span(
        &self,
        batch: u64,
        records: Vec<Record>,
        done: &mpsc::UnboundedSender<Completion>,
    ) -> anyhow::Result<()> {
        // Drop records whose partition was revoked (or revoked and re-assigned) while the batch
        // was collected. No rebalance can run between this check and `add` below: callbacks
        // only run inside `recv()`.
        let records: Vec<Record> = {
            let t = self.tracker.lock();
            let before = records.len();
            let kept: Vec<Record> = records.into_iter().filter(|r| t.epoch(r.partition) == Some(r.epoch)).collect();
            if kept.len() < before {
                counter!(catalog::WRITER_RECORDS_DROPPED_ON_REBALANCE_TOTAL).increment((before - kept.len()) as u64);
            }
            kept
        };
        if records.is_empty() {
            return Ok(());
        }
        counter!(catalog::WRITER_RECORDS_TOTAL).increment(records.len() as u64);
        let mut last: BTreeMap<i32, (Epoch, i64)> = BTreeMap::new();
        let mut messages = Vec::with_capacity(records.iter().map(|r| r.decoded.messages.len()).sum());
        let mut bytes = 0;
        for r in records {
            last.insert(r.partition, (r.epoch, r.offset));
            for bad in &r.decoded.bad {
                self.dlq.send_undecodable(r.partition, r.offset, bad).await;
            }
            if !r.decoded.messages.is_empty() {
                bytes += r.bytes;
                messages.extend(r.decoded.messages);
            }
        }
        {
            let mut t = self.tracker.lock();
            for (&p, &(epoch, offset)) in &last {
                t.add(p, epoch, batch, offset);
            }
        }
        let after_submit = self.cfg.commit == CommitMode::AfterSubmit;
        let writes = if messages.is_empty() { 0 } else { self.driver.pooled_writes(messages.len()) };
        // after-submit: the reference experiment's behaviour. The pool jobs get a ticket nobody listens to, and
        // the batch counts as done as soon as they are submitted.
        let (detached, _) = mpsc::unbounded_channel();
        // With no pooled writes the ticket fires at once, but the completion is only applied by
        // `run` after this function returns, i.e. after the synchronous writes are done.
        let ticket = Ticket::new(batch, writes, if after_submit { detached } else { done.clone() });
        if !messages.is_empty() {
            self.driver.dispatch(Arc::new(messages), bytes, ticket).await?;
        }
        if after_submit {
            let _ = done.send(Completion { batch, ok: true });
        }
        Ok(())
    }
}
