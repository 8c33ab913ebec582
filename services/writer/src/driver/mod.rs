//! The driver: gets every batch into every store, the way the write policy says, and tells the
//! consumer when a batch is stored everywhere (or that it never will be).
//!
//! - [`Driver`] (this file) is the policy: which stores are written on the consumer task
//!   (`--sync-stores`), which through [`pool`]s (`--pool shared|per-store`). The reference
//!   experiment's policies A, B and C live here as data instead of three code variants.
//! - [`retry`] gets one batch into one store whatever the store says: transient errors retried,
//!   permanent ones isolated and returned, panics contained. It knows nothing of pools.
//! - [`pool`] is the bounded, observable worker pool ([`spec`] its `core/max/queue/policy`).
//! - [`ticket`] counts a batch's pooled writes down and reports the batch to the consumer once.
//!
//! It is generic over where refused records go ([`DeadLetters`]): the writer's Kafka dead-letter
//! topic in production, an in-process list in the unit tests, so the whole driver (policy, pool,
//! retry, dead letters, completion) is tested without servers. Stores are already `dyn Sink` (the write side is all the writer needs).

pub(crate) mod adaptive;
#[cfg(test)]
mod fake;
pub(crate) mod pool;
pub(crate) mod retry;
pub(crate) mod ticket;

pub(crate) use pool::{Job, Outcome, Pool};
pub(crate) use retry::{Backoff, Panicked};
pub(crate) use ticket::{Completion, Ticket};

use crate::config::{PoolMode, WriterConfig};
use async_trait::async_trait;
use pipeline_common::Message;
use pipeline_stores::Sink;
use std::sync::Arc;
use std::time::Duration;
use ticket::JobGuard;
use tracing::Instrument;

/// Where the records a store refuses for good go. `refused` returns once they are safely kept
/// (acknowledged by the dead-letter topic), because the batch's offset may be committed right after.
#[async_trait]
pub(crate) trait DeadLetters: Clone + Send + Sync + 'static {
    async fn refused(&self, store: &'static str, msg: &Message, reason: &str);
}

pub(crate) struct Driver<D: DeadLetters> {
    sync: Vec<Arc<dyn Sink>>,
    pooled: Vec<(Arc<dyn Sink>, Pool)>,
    /// Most messages per pool job (`--pool-job-max`); 0 = the whole batch is one job.
    job_max: usize,
    dlq: D,
    backoff: Backoff,
}

impl<D: DeadLetters> Driver<D> {
    pub(crate) fn new(cfg: &WriterConfig, stores: Vec<Arc<dyn Sink>>, dlq: D) -> Self {
        // Created on first use, so per-store mode exports no idle `shared` pool.
        let mut shared: Option<Pool> = None;
        let (mut sync, mut pooled) = (Vec::new(), Vec::new());
        for s in stores {
            if cfg.sync_stores.0.contains(&s.kind()) {
                sync.push(s);
            } else {
                let pool = match cfg.pool {
                    PoolMode::Shared => shared
                        .get_or_insert_with(|| {
                            Pool::with("shared", cfg.pool_shared, cfg.pool_queue_max_bytes, cfg.pool_adaptive)
                        })
                        .clone(),
                    PoolMode::PerStore => Pool::with(
                        s.kind().name(),
                        cfg.pool_spec(s.kind()),
                        cfg.pool_queue_max_bytes,
                        cfg.pool_adaptive,
                    ),
                };
                pooled.push((s, pool));
            }
        }
        let backoff =
            Backoff { min: Duration::from_millis(cfg.retry_min_ms), max: Duration::from_millis(cfg.retry_max_ms) };
        Driver { sync, pooled, job_max: cfg.pool_job_max, dlq, backoff }
    }

    /// Number of pooled writes (jobs) for a batch of `messages`, i.e. the count a [`Ticket`]
    /// starts from: one per pooled store and slice of at most `--pool-job-max` messages.
    pub(crate) fn pooled_writes(&self, messages: usize) -> usize {
        self.pooled.len() * slices(messages, self.job_max)
    }

    /// Writes the synchronous stores now, then submits the pooled jobs: per slice of the batch
    /// (the whole batch unless `--pool-job-max`), one job per pooled store, so with one message
    /// per slice the pool sees what the reference's did (each message offered to each store in
    /// turn). `ticket` reports when the pooled writes are all done. Returns once every job is
    /// accepted, or `Err` when a synchronous write panicked (nothing of this batch may be
    /// committed).
    pub(crate) async fn dispatch(
        &self,
        batch: Arc<Vec<Message>>,
        bytes: usize,
        ticket: Arc<Ticket>,
    ) -> Result<(), Panicked> {
        for store in &self.sync {
            write_and_dead_letter(store.as_ref(), &batch, &self.dlq, self.backoff).await?;
        }
        let n = slices(batch.len(), self.job_max);
        for part in 0..n {
            // One slice is the batch itself: no copy in the default shape.
            let (slice, slice_bytes) = if n == 1 {
                (batch.clone(), bytes)
            } else {
                let from = part * self.job_max;
                let to = (from + self.job_max).min(batch.len());
                let slice: Vec<Message> = batch.get(from..to).unwrap_or_default().to_vec();
                // The queue's byte bound counts a slice's share of the batch's bytes.
                (Arc::new(slice), bytes * (to - from) / batch.len().max(1))
            };
            for (store, pool) in &self.pooled {
                let mut job = self.job(store.clone(), slice.clone(), slice_bytes, ticket.clone());
                // Policy `reject`: the submission failed and was counted; try again after a pause.
                while let Err(rejected) = pool.submit(job).await {
                    job = rejected.0;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        Ok(())
    }

    fn job(&self, store: Arc<dyn Sink>, batch: Arc<Vec<Message>>, bytes: usize, ticket: Arc<Ticket>) -> Job {
        let (dlq, backoff) = (self.dlq.clone(), self.backoff);
        let guard = JobGuard { ticket, finished: false };
        // The job runs on a pool worker: it keeps the batch's span (consumer, batch, offsets)
        // and adds its store, so a slow or failed pooled write names the batch it belongs to.
        let span = tracing::info_span!(parent: &tracing::Span::current(), "store_write", store = store.kind().name());
        Job::reporting(
            bytes,
            async move {
                // Move the whole guard in (a closure would otherwise capture only the `bool`
                // field, and the guard would fire as soon as the job is built).
                let mut guard = guard;
                let result = write_and_dead_letter(store.as_ref(), &batch, &dlq, backoff).await;
                guard.finished = result.is_ok();
                match result {
                    Ok(0) => Outcome::Written,
                    Ok(_) => Outcome::Refused,
                    Err(_) => Outcome::Failed,
                }
            }
            .instrument(span),
        )
    }
}

/// How many pool jobs per store a batch of `messages` makes: one, or one per `job_max` messages.
fn slices(messages: usize, job_max: usize) -> usize {
    if job_max == 0 || messages <= job_max {
        1
    } else {
        messages.div_ceil(job_max)
    }
}

/// One store write of one batch, with the records it refuses for good dead-lettered (and
/// acknowledged by the dead-letter topic) before it returns; how many it refused.
async fn write_and_dead_letter(
    store: &dyn Sink,
    batch: &[Message],
    dlq: &impl DeadLetters,
    backoff: Backoff,
) -> Result<usize, Panicked> {
    let name = store.kind().name();
    let refused = retry::store_batch(store, batch, backoff).await?;
    let n = refused.len();
    for r in refused {
        match batch.iter().find(|m| m.id == r.id) {
            Some(msg) => dlq.refused(name, msg, &r.reason).await,
            // An adapter naming an id that is not in the batch is a bug: nothing to dead-letter.
            None => tracing::error!(store = name, id = %r.id, "store refused an id that is not in the batch"),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::fake::{batch, Fake, Letters};
    use super::*;
    use clap::Parser;
    use pipeline_stores::StoreKind;
    use tokio::sync::mpsc;

    /// MySQL on the consumer task, Elasticsearch through a one-worker pool that rejects when busy.
    fn driver(mysql: &Arc<Fake>, es: &Arc<Fake>, letters: &Letters) -> Driver<Letters> {
        driver_with(mysql, es, letters, "1/1/0/reject", &[])
    }

    fn driver_with(
        mysql: &Arc<Fake>,
        es: &Arc<Fake>,
        letters: &Letters,
        es_pool: &str,
        extra: &[&str],
    ) -> Driver<Letters> {
        let mut args = vec![
            "writer",
            "--sync-stores",
            "mysql",
            "--pool",
            "per-store",
            "--pool-es",
            es_pool,
            "--retry-min-ms",
            "1",
            "--retry-max-ms",
            "4",
        ];
        args.extend_from_slice(extra);
        let cfg = WriterConfig::parse_from(args);
        let stores: Vec<Arc<dyn Sink>> = vec![mysql.clone(), es.clone()];
        Driver::new(&cfg, stores, letters.clone())
    }

    #[tokio::test]
    async fn a_batch_is_reported_stored_once_every_store_has_it_and_refusals_are_dead_lettered_first() {
        let (mysql, es) = (Arc::new(Fake::of(StoreKind::Mysql)), Arc::new(Fake::of(StoreKind::Es)));
        *es.flaky.lock().unwrap() = 3;
        let letters = Letters::default();
        let d = driver(&mysql, &es, &letters);
        assert_eq!(d.pooled_writes(3), 1);
        let (tx, mut rx) = mpsc::unbounded_channel();
        for (n, ids) in [["a", "poison-1", "b"], ["c", "d", "e"]].into_iter().enumerate() {
            let ticket = Ticket::new(n as u64, d.pooled_writes(ids.len()), tx.clone());
            d.dispatch(Arc::new(batch(&ids)), 100, ticket).await.unwrap();
        }
        let mut done = Vec::new();
        while done.len() < 2 {
            let c = rx.recv().await.unwrap();
            if c.batch == 0 {
                // Batch 0 may be committed now: its refused record must already be dead-lettered.
                assert!(letters.0.lock().unwrap().contains(&("es".into(), "poison-1".into())));
            }
            done.push(c);
        }
        done.sort_by_key(|c| c.batch);
        assert_eq!(done, [Completion { batch: 0, ok: true }, Completion { batch: 1, ok: true }]);
        let mut got = letters.0.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, [("es".to_string(), "poison-1".to_string()), ("mysql".into(), "poison-1".into())]);
        for store in [&mysql, &es] {
            let mut ids = store.stored.lock().unwrap().clone();
            ids.sort();
            assert_eq!(ids, ["a", "b", "c", "d", "e"], "{}", store.kind);
        }
    }

    #[tokio::test]
    async fn with_a_job_max_the_pool_gets_one_job_per_slice_and_the_sync_store_one_call() {
        let (mysql, es) = (Arc::new(Fake::of(StoreKind::Mysql)), Arc::new(Fake::of(StoreKind::Es)));
        let letters = Letters::default();
        // A one-worker pool with a queue, so slices wait rather than being rejected.
        let d = driver_with(&mysql, &es, &letters, "1/1/8/block", &["--pool-job-max", "2"]);
        let ids = ["a", "b", "c", "d", "e"];
        assert_eq!(d.pooled_writes(ids.len()), 3);
        assert_eq!(d.pooled_writes(2), 1);
        let (tx, mut rx) = mpsc::unbounded_channel();
        d.dispatch(Arc::new(batch(&ids)), 500, Ticket::new(0, d.pooled_writes(ids.len()), tx.clone())).await.unwrap();
        assert_eq!(rx.recv().await, Some(Completion { batch: 0, ok: true }));
        // Reported once, after the last slice.
        assert!(rx.try_recv().is_err());
        assert_eq!(*mysql.calls.lock().unwrap(), 1, "the synchronous store takes the batch in one call");
        assert_eq!(*es.calls.lock().unwrap(), 3, "the pooled store takes [a, b], [c, d], [e]");
        assert_eq!(*es.stored.lock().unwrap(), ids);
        // A refusal stays in its slice: the others are stored, the poison dead-lettered once per store.
        let ids = ["f", "poison-1", "g"];
        d.dispatch(Arc::new(batch(&ids)), 300, Ticket::new(1, d.pooled_writes(ids.len()), tx)).await.unwrap();
        assert_eq!(rx.recv().await, Some(Completion { batch: 1, ok: true }));
        let mut stored = es.stored.lock().unwrap().clone();
        stored.sort();
        assert_eq!(stored, ["a", "b", "c", "d", "e", "f", "g"]);
        let mut got = letters.0.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, [("es".to_string(), "poison-1".to_string()), ("mysql".into(), "poison-1".into())]);
    }

    #[test]
    fn a_batch_is_cut_into_slices_of_at_most_job_max() {
        assert_eq!(slices(500, 0), 1);
        assert_eq!(slices(500, 1), 500);
        assert_eq!(slices(500, 500), 1);
        assert_eq!(slices(501, 500), 2);
        assert_eq!(slices(0, 1), 1);
    }

    #[tokio::test]
    async fn a_panic_in_a_pooled_write_fails_the_batch_and_one_on_the_consumer_task_stops_it() {
        let (mysql, es) = (Arc::new(Fake::of(StoreKind::Mysql)), Arc::new(Fake::of(StoreKind::Es)));
        let d = driver(&mysql, &es, &Letters::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        // The synchronous MySQL write panics first: dispatch returns the panic, no job is submitted.
        let err = d.dispatch(Arc::new(batch(&["panic-1"])), 10, Ticket::new(0, 1, tx.clone())).await.unwrap_err();
        assert_eq!(err.store, "mysql");
        assert!(es.stored.lock().unwrap().is_empty());
        // Only the pooled store panics (MySQL has no `panic` rule for this id shape): the pool
        // contains it and the batch is reported failed, never stored.
        let es_only = Driver::<Letters> { sync: Vec::new(), ..d };
        es_only.dispatch(Arc::new(batch(&["panic-2"])), 10, Ticket::new(1, 1, tx)).await.unwrap();
        assert_eq!(rx.recv().await.unwrap(), Completion { batch: 1, ok: false });
    }
}
