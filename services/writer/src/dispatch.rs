//! The write policy: which stores a batch is written to on the consumer task, which go through
//! pools, and how the consumer learns that the whole batch is stored (or that it never will be).
//!
//! This is the one place the seed's A/B/C experiment lives, as data (`--sync-stores`, `--pool`)
//! instead of three code variants. How one write is retried, split and contained is
//! [`crate::retry`]'s business.

use crate::config::{PoolMode, WriterConfig};
use crate::dlq::Dlq;
use crate::pool::{Job, Pool};
use crate::retry::{self, Backoff, Panicked};
use pipeline_common::Message;
use pipeline_stores::Store;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// What the consumer hears about one batch: all its writes are done (`ok`), or one of them
/// failed in a way that must stop the consumer (a panic): never both, and exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub batch: u64,
    pub ok: bool,
}

/// Counts down the asynchronous writes of one batch.
pub struct Ticket {
    batch: u64,
    remaining: AtomicUsize,
    reported: AtomicBool,
    done: mpsc::UnboundedSender<Completion>,
}

impl Ticket {
    pub fn new(batch: u64, writes: usize, done: mpsc::UnboundedSender<Completion>) -> Arc<Ticket> {
        let t = Arc::new(Ticket { batch, remaining: AtomicUsize::new(writes), reported: AtomicBool::new(false), done });
        if writes == 0 {
            t.report(true);
        }
        t
    }

    fn finish_one(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.report(true);
        }
    }

    /// The batch can never be reported stored.
    fn fail(&self) {
        self.report(false);
    }

    fn report(&self, ok: bool) {
        if !self.reported.swap(true, Ordering::AcqRel) {
            // The consumer may have stopped listening (shutdown after the grace): nothing to do.
            let _ = self.done.send(Completion { batch: self.batch, ok });
        }
    }
}

/// Held by a pool job: unless the job marks it finished, dropping it (a panic unwinding the job,
/// or the job being dropped unrun at exit) fails the batch, so a lost job can never look like a
/// slow one and stall commits in silence.
struct JobGuard {
    ticket: Arc<Ticket>,
    finished: bool,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        if self.finished {
            self.ticket.finish_one();
        } else {
            self.ticket.fail();
        }
    }
}

pub struct Dispatcher {
    sync: Vec<Arc<dyn Store>>,
    pooled: Vec<(Arc<dyn Store>, Pool)>,
    dlq: Dlq,
    backoff: Backoff,
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
                    PoolMode::Shared => shared
                        .get_or_insert_with(|| Pool::new("shared", cfg.pool_shared, cfg.pool_queue_max_bytes))
                        .clone(),
                    PoolMode::PerStore => Pool::new(s.kind().name(), cfg.pool_spec(s.kind()), cfg.pool_queue_max_bytes),
                };
                pooled.push((s, pool));
            }
        }
        let backoff =
            Backoff { min: Duration::from_millis(cfg.retry_min_ms), max: Duration::from_millis(cfg.retry_max_ms) };
        Dispatcher { sync, pooled, dlq, backoff }
    }

    /// Number of pooled writes per batch, i.e. the count a [`Ticket`] starts from.
    pub fn pooled_writes(&self) -> usize {
        self.pooled.len()
    }

    /// Writes the synchronous stores now, then submits one job per pooled store; `ticket`
    /// reports when the pooled writes are all done. Returns once every job is accepted, or
    /// `Err` when a synchronous write panicked (nothing of this batch may be committed).
    pub async fn dispatch(&self, batch: Arc<Vec<Message>>, bytes: usize, ticket: Arc<Ticket>) -> Result<(), Panicked> {
        for store in &self.sync {
            write_and_dead_letter(store.as_ref(), &batch, &self.dlq, self.backoff).await?;
        }
        for (store, pool) in &self.pooled {
            let mut job = self.job(store.clone(), batch.clone(), bytes, ticket.clone());
            // Policy `reject`: the submission failed and was counted; try again after a pause.
            while let Err(rejected) = pool.submit(job).await {
                job = rejected.0;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }

    fn job(&self, store: Arc<dyn Store>, batch: Arc<Vec<Message>>, bytes: usize, ticket: Arc<Ticket>) -> Job {
        let (dlq, backoff) = (self.dlq.clone(), self.backoff);
        let guard = JobGuard { ticket, finished: false };
        Job::new(bytes, async move {
            // Move the whole guard in (a closure would otherwise capture only the `bool` field,
            // and the guard would fire as soon as the job is built).
            let mut guard = guard;
            guard.finished = write_and_dead_letter(store.as_ref(), &batch, &dlq, backoff).await.is_ok();
        })
    }
}

/// One store write of one batch, with the records it refuses for good dead-lettered (and
/// acknowledged by the dead-letter topic) before it returns.
async fn write_and_dead_letter(
    store: &dyn Store,
    batch: &[Message],
    dlq: &Dlq,
    backoff: Backoff,
) -> Result<(), Panicked> {
    let name = store.kind().name();
    for r in retry::store_batch(store, batch, backoff).await? {
        match batch.iter().find(|m| m.id == r.id) {
            Some(msg) => dlq.send_refused(name, msg, &r.reason).await,
            // An adapter naming an id that is not in the batch is a bug: nothing to dead-letter.
            None => tracing::error!(store = name, id = %r.id, "store refused an id that is not in the batch"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_job_fails_its_batch_exactly_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let ticket = Ticket::new(7, 2, tx);
        drop(JobGuard { ticket: ticket.clone(), finished: true });
        assert!(rx.try_recv().is_err(), "one of two writes done: nothing yet");
        drop(JobGuard { ticket: ticket.clone(), finished: false });
        assert_eq!(rx.try_recv().unwrap(), Completion { batch: 7, ok: false });
        ticket.finish_one();
        assert!(rx.try_recv().is_err(), "reported once");
    }

    #[tokio::test]
    async fn all_writes_done_reports_ok() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let ticket = Ticket::new(3, 2, tx.clone());
        ticket.finish_one();
        ticket.finish_one();
        assert_eq!(rx.try_recv().unwrap(), Completion { batch: 3, ok: true });
        let _none = Ticket::new(4, 0, tx);
        assert_eq!(rx.try_recv().unwrap(), Completion { batch: 4, ok: true }, "no pooled write: done at once");
    }
}
