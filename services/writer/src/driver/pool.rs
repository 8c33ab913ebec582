//! A bounded, observable worker pool for asynchronous store writes, with the semantics of the
//! reference experiment's Java `ThreadPoolExecutor`: `core` workers, then a bounded queue, then extra workers up
//! to `max`, then the rejection policy.
//!
//! The reference experiment's lesson (docs/explanation/experiment.md) is that `CallerRunsPolicy` silently turns "async" into "sync". Here every
//! rejection is an event with a counter (`writer_pool_rejected_total`,
//! `writer_pool_caller_runs_total`) next to the queue depth and active worker gauges, so the
//! degradation shows on a dashboard the moment it starts.
//!
//! Workers are tokio tasks, not threads: a worker that waits on a store's I/O costs nothing, which
//! is exactly why a pool of them is bounded by count rather than by CPU. The queue is bounded by
//! jobs AND by bytes (a job carries its batch's size): 1,000 queued batches of 500 large messages
//! would otherwise be gigabytes. A job that panics is contained here: its worker carries on, the
//! panic is counted (`writer_pool_panics_total`), and the job's own guard fails its batch.
//!
//! With `--pool-adaptive` ([`super::adaptive`]) the worker count is not fixed: up to the
//! controller's limit (1..=`max`, from `core`) workers run before anything is queued, and the
//! limit follows every job's duration.

use super::adaptive::Controller;
use crate::pool_spec::{Policy, PoolSpec};
use futures::future::BoxFuture;
use futures::FutureExt;
use metrics::{counter, gauge, Counter, Gauge};
use pipeline_common::catalog;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// A unit of work: one store write of one batch, and the bytes it holds while queued.
pub(crate) struct Job {
    fut: BoxFuture<'static, Outcome>,
    bytes: usize,
}

/// How a job ended, as an adaptive pool's controller reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The batch is written: the round trip says how loaded the store is.
    Written,
    /// The store refused some records for good (data it cannot hold, dead-lettered). Its round
    /// trip says nothing about load: a whole batch refused at once comes back in a fraction of
    /// a write's time, and isolating one bad record takes several writes. Left out of the
    /// controller's windows, so neither drags the learnt round trip.
    Refused,
    /// The job could not finish (a panic): read as a slowdown.
    Failed,
}

impl Job {
    /// A job whose every end counts as written (the pool's own tests).
    #[cfg(test)]
    pub(crate) fn new(bytes: usize, fut: impl std::future::Future<Output = ()> + Send + 'static) -> Job {
        use futures::FutureExt;
        Job { fut: Box::pin(fut.map(|()| Outcome::Written)), bytes }
    }

    /// A job that tells how it ended.
    pub(crate) fn reporting(bytes: usize, fut: impl std::future::Future<Output = Outcome> + Send + 'static) -> Job {
        Job { fut: Box::pin(fut), bytes }
    }
}

/// The submission was refused (policy `reject`); the job is handed back.
pub(crate) struct SubmitRefused(pub Job);

struct State {
    active: usize,
    queue: VecDeque<Job>,
    queue_bytes: usize,
    /// Highest queue depth and active count since start (the "queue peak / active peak" the reference experiment reported).
    peak_queue: usize,
    peak_active: usize,
    /// With `--pool-adaptive`: the limit of writes in flight, moved after every job; workers up
    /// to it run at once, before anything is queued.
    controller: Option<Controller>,
}

impl State {
    /// An adaptive pool's limit now.
    fn limit(&self) -> Option<usize> {
        self.controller.as_ref().map(Controller::limit)
    }
}

struct Metrics {
    queue_depth: Gauge,
    queue_peak: Gauge,
    active: Gauge,
    active_peak: Gauge,
    queue_bytes: Gauge,
    completed: Counter,
    rejected: Counter,
    caller_runs: Counter,
    panics: Counter,
    limit: Gauge,
    job_seconds: Gauge,
}

struct Inner {
    name: String,
    spec: PoolSpec,
    max_queue_bytes: usize,
    state: Mutex<State>,
    room: Notify,
    m: Metrics,
}

/// Cheap to clone; all clones are the same pool.
#[derive(Clone)]
pub(crate) struct Pool(Arc<Inner>);

impl Pool {
    /// A pool of shape `spec` whose queue also holds at most `max_queue_bytes` of batches.
    #[cfg(test)]
    pub(crate) fn new(name: &str, spec: PoolSpec, max_queue_bytes: usize) -> Pool {
        Pool::with(name, spec, max_queue_bytes, false)
    }

    /// The same, its concurrency moved by an adaptive controller between 1 and `spec.max`
    /// (starting at `spec.core`) when `adaptive`.
    pub(crate) fn with(name: &str, spec: PoolSpec, max_queue_bytes: usize, adaptive: bool) -> Pool {
        let l = [("pool", name.to_string())];
        gauge!(catalog::WRITER_POOL_QUEUE_CAPACITY, &l).set(spec.queue as f64);
        gauge!(catalog::WRITER_POOL_QUEUE_CAPACITY_BYTES, &l).set(max_queue_bytes as f64);
        gauge!(catalog::WRITER_POOL_MAX_WORKERS, &l).set(spec.max as f64);
        let m = Metrics {
            queue_depth: gauge!(catalog::WRITER_POOL_QUEUE_DEPTH, &l),
            queue_peak: gauge!(catalog::WRITER_POOL_QUEUE_DEPTH_PEAK, &l),
            active: gauge!(catalog::WRITER_POOL_ACTIVE_WORKERS, &l),
            active_peak: gauge!(catalog::WRITER_POOL_ACTIVE_WORKERS_PEAK, &l),
            queue_bytes: gauge!(catalog::WRITER_POOL_QUEUE_BYTES, &l),
            completed: counter!(catalog::WRITER_POOL_COMPLETED_TOTAL, &l),
            rejected: counter!(catalog::WRITER_POOL_REJECTED_TOTAL, &l),
            caller_runs: counter!(catalog::WRITER_POOL_CALLER_RUNS_TOTAL, &l),
            panics: counter!(catalog::WRITER_POOL_PANICS_TOTAL, &l),
            limit: gauge!(catalog::WRITER_POOL_CONCURRENCY_LIMIT, &l),
            job_seconds: gauge!(catalog::WRITER_POOL_JOB_SECONDS, &l),
        };
        let controller = adaptive.then(|| Controller::new(spec.core, spec.max));
        if let Some(c) = &controller {
            m.limit.set(c.limit() as f64);
        }
        Pool(Arc::new(Inner {
            name: name.to_string(),
            spec,
            max_queue_bytes,
            state: Mutex::new(State {
                active: 0,
                queue: VecDeque::new(),
                queue_bytes: 0,
                peak_queue: 0,
                peak_active: 0,
                controller,
            }),
            room: Notify::new(),
            m,
        }))
    }

    /// Submits a job. Returns when the job is running, queued, or (caller-runs) done.
    pub(crate) async fn submit(&self, job: Job) -> Result<(), SubmitRefused> {
        let mut job = job;
        loop {
            match self.try_place(job) {
                Ok(()) => return Ok(()),
                Err(back) => job = back,
            }
            match self.0.spec.policy {
                Policy::CallerRuns => {
                    self.0.m.caller_runs.increment(1);
                    self.run_contained(job).await;
                    return Ok(());
                }
                Policy::Reject => {
                    self.0.m.rejected.increment(1);
                    return Err(SubmitRefused(job));
                }
                Policy::Block => {
                    let room = self.0.room.notified();
                    // Re-check after registering interest, so a wake-up between the two is not lost.
                    match self.try_place(job) {
                        Ok(()) => return Ok(()),
                        Err(back) => job = back,
                    }
                    room.await;
                }
            }
        }
    }

    /// The pool's state. Jobs never run under this lock, so it is never poisoned in practice;
    /// if it were, the counts inside are still consistent, so keep going rather than panic.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs one job, containing a panic: the worker (or the submitting consumer, for
    /// caller-runs) survives it, and the job's guard has already failed its batch.
    async fn run_contained(&self, job: Job) {
        let started = std::time::Instant::now();
        let outcome = match std::panic::AssertUnwindSafe(job.fut).catch_unwind().await {
            Ok(outcome) => {
                self.0.m.completed.increment(1);
                outcome
            }
            Err(panic) => {
                self.0.m.panics.increment(1);
                counter!(catalog::WRITER_PANICS_TOTAL, "where" => "pool_job").increment(1);
                tracing::error!(pool = %self.0.name, panic = %super::retry::panic_message(&*panic), "pool job panicked");
                Outcome::Failed
            }
        };
        match outcome {
            Outcome::Written => self.adapt(started.elapsed(), false),
            Outcome::Failed => self.adapt(started.elapsed(), true),
            Outcome::Refused => {}
        }
    }

    /// Moves an adaptive pool's limit by one job's outcome, and starts workers for queued jobs
    /// when it grew.
    fn adapt(&self, took: std::time::Duration, failed: bool) {
        let mut st = self.state();
        let inflight = st.active;
        let Some(c) = st.controller.as_mut() else { return };
        let limit = c.observe(took, inflight, failed);
        self.0.m.job_seconds.set(c.round_trip());
        self.0.m.limit.set(limit as f64);
        let mut moved = false;
        while st.active < limit {
            let Some(job) = self.pop_queued(&mut st) else { break };
            self.start_worker(&mut st, job);
            moved = true;
        }
        drop(st);
        if moved {
            // The queue has room again: a blocked submitter may go on.
            self.0.room.notify_waiters();
        }
    }

    /// Takes the next queued job, if any.
    fn pop_queued(&self, st: &mut State) -> Option<Job> {
        let job = st.queue.pop_front()?;
        st.queue_bytes -= job.bytes;
        self.0.m.queue_depth.set(st.queue.len() as f64);
        self.0.m.queue_bytes.set(st.queue_bytes as f64);
        Some(job)
    }

    /// Counts a new worker in and spawns it with its first job.
    fn start_worker(&self, st: &mut State, job: Job) {
        st.active += 1;
        self.0.m.active.set(st.active as f64);
        if st.active > st.peak_active {
            st.peak_active = st.active;
            self.0.m.active_peak.set(st.active as f64);
        }
        let pool = self.clone();
        tokio::spawn(async move { pool.worker(job).await });
    }

    /// Starts the job on a worker or queues it; hands it back when neither is possible.
    fn try_place(&self, job: Job) -> Result<(), Job> {
        let mut st = self.state();
        let spec = self.0.spec;
        // A queue holding nothing always takes one job, so a batch larger than the byte bound
        // still gets written (one at a time) instead of being refused forever.
        let queue_full = st.queue.len() >= spec.queue
            || (st.queue_bytes + job.bytes > self.0.max_queue_bytes && !st.queue.is_empty());
        // An adaptive pool runs up to its limit before it queues; a fixed one is Java's.
        let (core, max) = st.limit().map_or((spec.core, spec.max), |l| (l, l));
        if st.active < core || (queue_full && st.active < max) {
            self.start_worker(&mut st, job);
            Ok(())
        } else if !queue_full {
            st.queue_bytes += job.bytes;
            st.queue.push_back(job);
            self.0.m.queue_depth.set(st.queue.len() as f64);
            self.0.m.queue_bytes.set(st.queue_bytes as f64);
            if st.queue.len() > st.peak_queue {
                st.peak_queue = st.queue.len();
                self.0.m.queue_peak.set(st.queue.len() as f64);
            }
            Ok(())
        } else {
            Err(job)
        }
    }

    /// Runs its first job, then keeps taking queued ones; exits when the queue is empty, or
    /// when an adaptive pool's limit fell below the workers it has.
    async fn worker(self, first: Job) {
        let mut job = first;
        loop {
            self.run_contained(job).await;
            let mut st = self.state();
            let over = st.limit().is_some_and(|l| st.active > l);
            match if over { None } else { self.pop_queued(&mut st) } {
                Some(next) => {
                    drop(st);
                    self.0.room.notify_waiters();
                    job = next;
                }
                None => {
                    st.active -= 1;
                    self.0.m.active.set(st.active as f64);
                    drop(st);
                    self.0.room.notify_waiters();
                    return;
                }
            }
        }
    }

    /// (active workers, queued jobs), for the tests.
    #[cfg(test)]
    pub(crate) fn load(&self) -> (usize, usize) {
        let st = self.state();
        (st.active, st.queue.len())
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
