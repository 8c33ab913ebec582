//! One consumer of the group: pull a batch, decode it, hand it to the driver, commit the
//! offsets whose records are stored everywhere (see [`crate::tracker`] for what may be committed
//! across rebalances).

use crate::config::{CommitMode, WriterConfig};
use crate::dlq::Dlq;
use crate::driver::{Completion, Driver, Ticket};
use crate::rebalance::{commit, Ctx, Membership, Shared};
use crate::tracker::Epoch;
use anyhow::{bail, Context as _};
use metrics::counter;
use pipeline_common::catalog;
use pipeline_common::kafka::client_config;
use pipeline_common::message::Limits;
use pipeline_common::record;
use rdkafka::consumer::{CommitMode as KafkaCommit, Consumer, StreamConsumer};
use rdkafka::error::KafkaResult;
use rdkafka::message::BorrowedMessage;
use rdkafka::Message as _;
use std::collections::BTreeMap;
use std::sync::Arc;
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

/// Why a consumer stopped.
pub(crate) enum Stopped {
    /// The stop signal came (what is in flight is drained next).
    Asked,
    /// Stopped, and every write in flight finished.
    Drained,
    /// The shutdown grace ran out with writes in flight: they are redelivered to the next owner.
    GraceOver,
    /// A batch can never be stored (a store write panicked).
    Failed(anyhow::Error),
}

impl Stopped {
    fn as_str(&self) -> &'static str {
        match self {
            Stopped::Asked => "asked",
            Stopped::Drained => "drained",
            Stopped::GraceOver => "grace over",
            Stopped::Failed(_) => "failed",
        }
    }
}

pub(crate) struct BatchConsumer {
    id: usize,
    cfg: Arc<WriterConfig>,
    consumer: StreamConsumer<Ctx>,
    tracker: Shared,
    membership: Membership,
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
        let membership = Membership::new(id, tracker.clone());
        Ok(BatchConsumer { id, cfg, consumer, tracker, membership, driver, dlq })
    }

    /// This consumer's place in the group, for the stall watch ([`crate::stall`]).
    pub(crate) fn membership(&self) -> Membership {
        self.membership.clone()
    }

    /// Leaves the group and joins it again as a new member: a membership change, which every
    /// broker answers with a rebalance over the live members. The revoke commits what is stored
    /// (as in any rebalance), and the epochs keep records pulled before it from being committed
    /// after it ([`crate::tracker`]).
    fn rejoin(&self) -> anyhow::Result<()> {
        counter!(catalog::WRITER_GROUP_REJOINS_TOTAL).increment(1);
        tracing::warn!(consumer = self.id, "leaving and rejoining the group to have its partitions assigned again");
        self.consumer.unsubscribe();
        self.consumer.subscribe(&[&self.cfg.kafka.topic]).context("subscribing again after leaving the group")
    }

    /// Runs until `stop` is cancelled: consumes, then drains what is in flight (within the
    /// shutdown grace), then commits what is stored, synchronously. Returns `Err` when a batch can
    /// never be stored (a store adapter panicked): the caller must exit non-zero so a supervisor
    /// restarts the process; nothing past that batch is committed.
    pub(crate) async fn run(self, stop: CancellationToken) -> anyhow::Result<()> {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Completion>();
        let grace = self.cfg.shutdown_grace();
        // Fires `grace` after the stop signal: bounds a write stuck behind a store outage.
        let grace_over = async {
            stop.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::pin!(grace_over);
        tracing::info!(consumer = self.id, "consuming");
        let mut why = self.consume(&stop, &done_tx, &mut done_rx, grace_over.as_mut()).await;
        if matches!(why, Stopped::Asked) {
            why = self.drain(&mut done_rx, grace_over.as_mut()).await;
        }
        self.commit_ready(KafkaCommit::Sync);
        tracing::info!(consumer = self.id, why = why.as_str(), "stopped; every stored batch committed");
        match why {
            Stopped::Failed(e) => Err(e),
            Stopped::Asked | Stopped::Drained | Stopped::GraceOver => Ok(()),
        }
    }

    /// Pulls, writes and commits until asked to stop, a write outlives the grace, or a batch
    /// fails for good.
    async fn consume(
        &self,
        stop: &CancellationToken,
        done_tx: &mpsc::UnboundedSender<Completion>,
        done_rx: &mut mpsc::UnboundedReceiver<Completion>,
        mut grace_over: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Stopped {
        let mut next_batch: u64 = 0;
        loop {
            // Apply completions and commit the stored prefix before pulling more.
            while let Ok(c) = done_rx.try_recv() {
                if let Err(e) = self.complete(c) {
                    return Stopped::Failed(e);
                }
            }
            self.commit_ready(KafkaCommit::Async);
            // Only the wait for the first record races with completions and the stop signal:
            // `recv()` is cancel-safe, but a half-collected batch is not (dropping it would lose
            // records whose offsets a later batch then commits).
            let first = tokio::select! {
                _ = stop.cancelled() => return Stopped::Asked,
                _ = self.membership.rejoin_asked() => match self.rejoin() {
                    Ok(()) => continue,
                    Err(e) => return Stopped::Failed(e),
                },
                Some(c) = done_rx.recv() => match self.complete(c) {
                    Ok(()) => continue,
                    Err(e) => return Stopped::Failed(e),
                },
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
                r = self.handle(next_batch, records, done_tx) => if let Err(e) = r {
                    return Stopped::Failed(e);
                },
                _ = grace_over.as_mut() => {
                    tracing::warn!(consumer = self.id, "shutdown grace over during a synchronous write");
                    return Stopped::GraceOver;
                }
            }
        }
    }

    /// After the stop: no more fetching; waits, at most until the grace is over, for the writes
    /// in flight, committing as they finish.
    async fn drain(
        &self,
        done_rx: &mut mpsc::UnboundedReceiver<Completion>,
        mut grace_over: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Stopped {
        while self.tracker.lock().pending() > 0 {
            tokio::select! {
                c = done_rx.recv() => match c {
                    Some(c) => if let Err(e) = self.complete(c) { return Stopped::Failed(e) },
                    None => break,
                },
                _ = grace_over.as_mut() => {
                    let pending = self.tracker.lock().pending();
                    tracing::warn!(consumer = self.id, pending, "shutdown grace over; uncommitted batches will be redelivered");
                    return Stopped::GraceOver;
                }
            }
            self.commit_ready(KafkaCommit::Async);
        }
        Stopped::Drained
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
        // With no pooled writes the ticket fires at once, but the completion is only applied by
        // `run` after this function returns, i.e. after the synchronous writes are done.
        // after-submit, the reference experiment's unsafe ack: nobody waits for the pool jobs,
        // and the batch counts as done as soon as they are submitted.
        let ticket = match after_submit {
            true => Ticket::unobserved(batch, writes),
            false => Ticket::new(batch, writes, done.clone()),
        };
        if !messages.is_empty() {
            self.driver.dispatch(Arc::new(messages), bytes, ticket).await?;
        }
        if after_submit {
            let _ = done.send(Completion { batch, ok: true });
        }
        Ok(())
    }
}
