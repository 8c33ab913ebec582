//! The write policy: which stores a batch is written to on the consumer task, which go through
//! pools, and how the consumer learns that the whole batch is stored.
//!
//! This is the one place the seed's A/B/C experiment lives, as data (`--sync-stores`, `--pool`)
//! instead of three code variants.

use crate::config::{PoolMode, WriterConfig};
use crate::dlq::Dlq;
use crate::pool::{Job, Pool};
use metrics::{counter, histogram};
use pipeline_common::stores::{Store, StoreKind};
use pipeline_common::Message;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Counts down the asynchronous writes of one batch and reports the batch id when all are done.
pub struct Ticket {
    batch: u64,
    remaining: AtomicUsize,
    done: mpsc::UnboundedSender<u64>,
}

impl Ticket {
    pub fn new(batch: u64, writes: usize, done: mpsc::UnboundedSender<u64>) -> Arc<Ticket> {
        let t = Arc::new(Ticket { batch, remaining: AtomicUsize::new(writes), done });
        if writes == 0 {
            t.fire();
        }
        t
    }

    fn finish_one(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.fire();
        }
    }

    fn fire(&self) {
        // The consumer may have stopped listening (shutdown after a hard timeout): nothing to do.
        let _ = self.done.send(self.batch);
    }
}

pub struct Dispatcher {
    sync: Vec<Arc<dyn Store>>,
    pooled: Vec<(Arc<dyn Store>, Pool)>,
    dlq: Dlq,
    retry_max: Duration,
}

impl Dispatcher {
    pub fn new(cfg: &WriterConfig, stores: Vec<Arc<dyn Store>>, dlq: Dlq) -> Dispatcher {
        // Created on first use, so per-store mode exports no idle `shared` pool.
        let mut shared: Option<Pool> = None;
        let (mut sync, mut pooled) = (Vec::new(), Vec::new());
        for s in stores {
            if cfg.sync_stores.0.contains(&s.kind()) {
                sync.push(s);
            } else {
                let pool = match cfg.pool {
                    PoolMode::Shared => shared.get_or_insert_with(|| Pool::new("shared", cfg.pool_shared)).clone(),
                    PoolMode::PerStore => Pool::new(s.kind().name(), cfg.pool_spec(s.kind())),
                };
                pooled.push((s, pool));
            }
        }
        Dispatcher { sync, pooled, dlq, retry_max: Duration::from_millis(cfg.retry_max_ms) }
    }

    /// Number of pooled writes per batch, i.e. the count a [`Ticket`] starts from.
    pub fn pooled_writes(&self) -> usize {
        self.pooled.len()
    }

    /// Writes the synchronous stores now, then submits one job per pooled store; `ticket`
    /// fires when the pooled writes are all done. Returns once every job is accepted.
    pub async fn dispatch(&self, batch: Arc<Vec<Message>>, ticket: Arc<Ticket>) {
        for store in &self.sync {
            write_until_stored(store.as_ref(), &batch, &self.dlq, self.retry_max).await;
        }
        for (store, pool) in &self.pooled {
            let mut job = self.job(store.clone(), batch.clone(), ticket.clone());
            // Policy `reject`: the submission failed and was counted; try again after a pause.
            while let Err(rejected) = pool.submit(job).await {
                job = rejected.0;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    fn job(&self, store: Arc<dyn Store>, batch: Arc<Vec<Message>>, ticket: Arc<Ticket>) -> Job {
        let (dlq, retry_max) = (self.dlq.clone(), self.retry_max);
        Box::pin(async move {
            write_until_stored(store.as_ref(), &batch, &dlq, retry_max).await;
            ticket.finish_one();
        })
    }
}

/// Writes a batch to one store, retrying with capped exponential backoff until it is stored.
/// Records the store refuses for good are dead-lettered. Never gives up: giving up would mean
/// committing past a record that is not stored, or stalling silently; instead every failed
/// attempt shows in `writer_store_errors_total` and the log.
pub async fn write_until_stored(store: &dyn Store, batch: &[Message], dlq: &Dlq, retry_max: Duration) {
    let kind: StoreKind = store.kind();
    let name = kind.name();
    histogram!("writer_store_batch_records", "store" => name).record(batch.len() as f64);
    let mut backoff = Duration::from_millis(10);
    loop {
        let started = Instant::now();
        match store.write(batch).await {
            Ok(rejected) => {
                histogram!("writer_store_write_seconds", "store" => name).record(started.elapsed().as_secs_f64());
                counter!("writer_store_records_total", "store" => name).increment(batch.len() as u64);
                for r in rejected {
                    let msg = batch.iter().find(|m| m.id == r.id).expect("rejected ids come from the batch");
                    dlq.send(msg.id.as_bytes(), msg.to_json().as_bytes(), &format!("{name}: {}", r.reason)).await;
                }
                return;
            }
            Err(e) => {
                counter!("writer_store_errors_total", "store" => name, "kind" => e.kind_label()).increment(1);
                counter!("writer_store_retries_total", "store" => name).increment(1);
                tracing::warn!(store = name, error = %e, retry_in_ms = backoff.as_millis() as u64, "store write failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(retry_max);
            }
        }
    }
}
