//! One consumer of the group: pull a batch, decode it, hand it to the dispatcher, commit the
//! offsets whose records are stored everywhere.

use crate::config::{CommitMode, WriterConfig};
use crate::dispatch::{Dispatcher, Ticket};
use crate::dlq::Dlq;
use crate::tracker::Tracker;
use metrics::{counter, gauge};
use pipeline_common::kafka::client_config;
use pipeline_common::message::{Limits, Message};
use rdkafka::consumer::{
    BaseConsumer, CommitMode as KafkaCommit, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaResult;
use rdkafka::message::BorrowedMessage;
use rdkafka::{ClientContext, Message as _, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Shares the offset tracker with librdkafka's rebalance callback, which runs inside `recv()`.
struct Ctx {
    topic: String,
    tracker: Arc<Mutex<Tracker>>,
}

impl ClientContext for Ctx {}

impl ConsumerContext for Ctx {
    /// Before partitions go to another member: commit what is complete, forget the rest (the
    /// new owner gets it again and rewrites it idempotently).
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let mut tracker = self.tracker.lock().expect("tracker lock");
            commit(consumer, &self.topic, tracker.take_committable(), KafkaCommit::Sync);
            for e in tpl.elements() {
                tracker.revoke(e.partition());
            }
            tracing::info!(partitions = ?tpl.elements().iter().map(|e| e.partition()).collect::<Vec<_>>(), "partitions revoked");
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            tracing::info!(partitions = ?tpl.elements().iter().map(|e| e.partition()).collect::<Vec<_>>(), "partitions assigned");
        }
    }
}

fn commit<C: Consumer<Ctx>>(consumer: &C, topic: &str, offsets: BTreeMap<i32, i64>, mode: KafkaCommit) {
    if offsets.is_empty() {
        return;
    }
    let mut tpl = TopicPartitionList::new();
    for (&p, &o) in &offsets {
        tpl.add_partition_offset(topic, p, Offset::Offset(o)).expect("valid offset");
    }
    match consumer.commit(&tpl, mode) {
        Ok(()) => {
            for (p, o) in offsets {
                gauge!("writer_partition_committed_offset", "partition" => p.to_string()).set(o as f64);
            }
        }
        // Not fatal: the next commit carries higher offsets for the same partitions, and a
        // record whose offset is never committed is only redelivered, never lost.
        Err(e) => tracing::warn!(error = %e, "offset commit failed"),
    }
}

pub struct BatchConsumer {
    id: usize,
    cfg: Arc<WriterConfig>,
    consumer: StreamConsumer<Ctx>,
    tracker: Arc<Mutex<Tracker>>,
    dispatcher: Arc<Dispatcher>,
    dlq: Dlq,
}

impl BatchConsumer {
    pub fn new(id: usize, cfg: Arc<WriterConfig>, dispatcher: Arc<Dispatcher>, dlq: Dlq) -> anyhow::Result<Self> {
        let tracker = Arc::new(Mutex::new(Tracker::default()));
        let ctx = Ctx { topic: cfg.kafka.topic.clone(), tracker: tracker.clone() };
        let consumer: StreamConsumer<Ctx> = client_config(&cfg.kafka)
            .set("group.id", &cfg.kafka.group)
            .set("client.id", format!("writer-{id}"))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "1000")
            .create_with_context(ctx)?;
        consumer.subscribe(&[&cfg.kafka.topic])?;
        Ok(BatchConsumer { id, cfg, consumer, tracker, dispatcher, dlq })
    }

    /// Runs until `stop` is cancelled, then finishes in-flight writes and commits them.
    pub async fn run(self, stop: CancellationToken) {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<u64>();
        let limits = Limits { max_body_bytes: self.cfg.max_body_bytes };
        let mut next_batch: u64 = 0;
        tracing::info!(consumer = self.id, "consuming");
        loop {
            // Apply completions and commit the stored prefix before pulling more.
            while let Ok(batch) = done_rx.try_recv() {
                self.complete(batch);
            }
            self.commit_ready(KafkaCommit::Async);
            // Only the wait for the first record races with completions and the stop signal:
            // `recv()` is cancel-safe, but a half-collected batch is not (dropping it would lose
            // records whose offsets a later batch then commits).
            let first = tokio::select! {
                _ = stop.cancelled() => break,
                Some(batch) = done_rx.recv() => { self.complete(batch); continue; }
                r = self.consumer.recv() => r,
            };
            let records = self.fill(first).await;
            if records.is_empty() {
                continue;
            }
            next_batch += 1;
            self.handle(next_batch, records, limits, &done_tx).await;
        }
        // Shutdown: no more fetching; wait for what is in flight, then commit it.
        let pending = || self.tracker.lock().expect("tracker lock").pending();
        while pending() > 0 {
            match done_rx.recv().await {
                Some(batch) => self.complete(batch),
                None => break,
            }
            self.commit_ready(KafkaCommit::Async);
        }
        self.commit_ready(KafkaCommit::Sync);
        tracing::info!(consumer = self.id, "stopped; all written batches committed");
    }

    fn complete(&self, batch: u64) {
        self.tracker.lock().expect("tracker lock").complete(batch);
    }

    fn commit_ready(&self, mode: KafkaCommit) {
        let offsets = self.tracker.lock().expect("tracker lock").take_committable();
        commit(&self.consumer, &self.cfg.kafka.topic, offsets, mode);
    }

    /// One batch: the first record, then what arrives within `batch_wait`, up to `batch_max`.
    /// Records are copied out of librdkafka's buffers (partition, offset, payload).
    async fn fill(&self, first: KafkaResult<BorrowedMessage<'_>>) -> Vec<(i32, i64, Vec<u8>)> {
        let mut out = Vec::new();
        match first {
            Ok(m) => self.take(&m, &mut out),
            Err(e) => {
                tracing::warn!(error = %e, "consume error");
                tokio::time::sleep(Duration::from_millis(100)).await;
                return out;
            }
        }
        let deadline = Instant::now() + self.cfg.batch_wait();
        while out.len() < self.cfg.batch_max {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.consumer.recv()).await {
                Ok(Ok(m)) => self.take(&m, &mut out),
                Ok(Err(e)) => tracing::warn!(error = %e, "consume error"),
                Err(_) => break,
            }
        }
        out
    }

    fn take(&self, m: &BorrowedMessage<'_>, out: &mut Vec<(i32, i64, Vec<u8>)>) {
        out.push((m.partition(), m.offset(), m.payload().unwrap_or_default().to_vec()));
    }

    async fn handle(
        &self,
        batch: u64,
        records: Vec<(i32, i64, Vec<u8>)>,
        limits: Limits,
        done: &mpsc::UnboundedSender<u64>,
    ) {
        counter!("writer_records_total").increment(records.len() as u64);
        let mut last: BTreeMap<i32, i64> = BTreeMap::new();
        let mut messages = Vec::with_capacity(records.len());
        for (p, o, payload) in records {
            last.insert(p, o);
            match Message::decode(&payload, limits) {
                Ok(m) => messages.push(m),
                Err(e) => self.dlq.send(format!("{p}:{o}").as_bytes(), &payload, &format!("decode: {e}")).await,
            }
        }
        {
            let mut t = self.tracker.lock().expect("tracker lock");
            for (&p, &o) in &last {
                t.add(p, batch, o);
            }
        }
        let after_submit = self.cfg.commit == CommitMode::AfterSubmit;
        let writes = if messages.is_empty() { 0 } else { self.dispatcher.pooled_writes() };
        // after-submit: the seed's behaviour. The pool jobs get a ticket nobody listens to, and
        // the batch counts as done as soon as they are submitted.
        let (detached, _) = mpsc::unbounded_channel();
        // With no pooled writes the ticket fires at once, but the completion is only applied by
        // `run` after this function returns, i.e. after the synchronous writes are done.
        let ticket = Ticket::new(batch, writes, if after_submit { detached } else { done.clone() });
        if !messages.is_empty() {
            self.dispatcher.dispatch(Arc::new(messages), ticket).await;
        }
        if after_submit {
            let _ = done.send(batch);
        }
    }
}
