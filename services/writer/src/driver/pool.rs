//! A bounded, observable worker pool for asynchronous store writes, with the semantics of the
//! reference experiment's Java `ThreadPoolExecutor`: `core` workers, then a bounded queue, then extra workers up
//! to `max`, then the rejection policy.
//!
//! The reference experiment's lesson (docs/seed.md) is that `CallerRunsPolicy` silently turns "async" into "sync". Here every
//! rejection is an event with a counter (`writer_pool_rejected_total`,
//! `writer_pool_caller_runs_total`) next to the queue depth and active worker gauges, so the
//! degradation shows on a dashboard the moment it starts.
//!
//! Workers are tokio tasks, not threads: a worker that waits on a store's I/O costs nothing, which
//! is exactly why a pool of them is bounded by count rather than by CPU. The queue is bounded by
//! jobs AND by bytes (a job carries its batch's size): 1,000 queued batches of 500 large messages
//! would otherwise be gigabytes. A job that panics is contained here: its worker carries on, the
//! panic is counted (`writer_pool_panics_total`), and the job's own guard fails its batch.

use super::spec::{Policy, PoolSpec};
use futures::future::BoxFuture;
use futures::FutureExt;
use metrics::{counter, gauge, Counter, Gauge};
use pipeline_common::catalog;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// A unit of work: one store write of one batch, and the bytes it holds while queued.
pub struct Job {
    fut: BoxFuture<'static, ()>,
    bytes: usize,
}

impl Job {
    pub fn new(bytes: usize, fut: impl std::future::Future<Output = ()> + Send + 'static) -> Job {
        Job { fut: Box::pin(fut), bytes }
    }
}

/// The submission was refused (policy `reject`); the job is handed back.
pub struct SubmitRefused(pub Job);

struct State {
    active: usize,
    queue: VecDeque<Job>,
    queue_bytes: usize,
    /// Highest queue depth and active count since start (the "queue peak / active peak" the reference experiment reported).
    peak_queue: usize,
    peak_active: usize,
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
pub struct Pool(Arc<Inner>);

impl Pool {
    /// A pool of shape `spec` whose queue also holds at most `max_queue_bytes` of batches.
    pub fn new(name: &str, spec: PoolSpec, max_queue_bytes: usize) -> Pool {
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
        };
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
            }),
            room: Notify::new(),
            m,
        }))
    }

    /// Submits a job. Returns when the job is running, queued, or (caller-runs) done.
    pub async fn submit(&self, job: Job) -> Result<(), SubmitRefused> {
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
        match std::panic::AssertUnwindSafe(job.fut).catch_unwind().await {
            Ok(()) => self.0.m.completed.increment(1),
            Err(panic) => {
                self.0.m.panics.increment(1);
                counter!(catalog::WRITER_PANICS_TOTAL, "where" => "pool_job").increment(1);
                tracing::error!(pool = %self.0.name, panic = %super::retry::panic_message(&*panic), "pool job panicked");
            }
        }
    }

    /// Starts the job on a worker or queues it; hands it back when neither is possible.
    fn try_place(&self, job: Job) -> Result<(), Job> {
        let mut st = self.state();
        let spec = self.0.spec;
        // A queue holding nothing always takes one job, so a batch larger than the byte bound
        // still gets written (one at a time) instead of being refused forever.
        let queue_full = st.queue.len() >= spec.queue
            || (st.queue_bytes + job.bytes > self.0.max_queue_bytes && !st.queue.is_empty());
        if st.active < spec.core || (queue_full && st.active < spec.max) {
            st.active += 1;
            self.0.m.active.set(st.active as f64);
            if st.active > st.peak_active {
                st.peak_active = st.active;
                self.0.m.active_peak.set(st.active as f64);
            }
            drop(st);
            let pool = self.clone();
            tokio::spawn(async move { pool.worker(job).await });
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

    /// Runs its first job, then keeps taking queued ones; exits when the queue is empty.
    async fn worker(self, first: Job) {
        let mut job = first;
        loop {
            self.run_contained(job).await;
            let mut st = self.state();
            match st.queue.pop_front() {
                Some(next) => {
                    st.queue_bytes -= next.bytes;
                    self.0.m.queue_depth.set(st.queue.len() as f64);
                    self.0.m.queue_bytes.set(st.queue_bytes as f64);
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
    pub fn load(&self) -> (usize, usize) {
        let st = self.state();
        (st.active, st.queue.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio::sync::Semaphore;

    /// A job that waits for a permit from `gate`, then counts itself done.
    fn gated(gate: &Arc<Semaphore>, done: &Arc<AtomicUsize>) -> Job {
        let (gate, done) = (gate.clone(), done.clone());
        Job::new(1, async move {
            gate.acquire().await.expect("open").forget();
            done.fetch_add(1, Ordering::SeqCst);
        })
    }

    const NO_BYTE_BOUND: usize = usize::MAX / 2;

    fn spec(s: &str) -> PoolSpec {
        s.parse().unwrap()
    }

    #[tokio::test]
    async fn core_then_queue_then_max_then_policy() {
        let pool = Pool::new("t1", spec("1/2/1/reject"), NO_BYTE_BOUND);
        let gate = Arc::new(Semaphore::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        assert!(pool.submit(gated(&gate, &done)).await.is_ok()); // core worker
        assert_eq!(pool.load(), (1, 0));
        assert!(pool.submit(gated(&gate, &done)).await.is_ok()); // queued
        assert_eq!(pool.load(), (1, 1));
        assert!(pool.submit(gated(&gate, &done)).await.is_ok()); // extra worker up to max
        assert_eq!(pool.load(), (2, 1));
        assert!(pool.submit(gated(&gate, &done)).await.is_err()); // rejected
        gate.add_permits(3);
        while done.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(pool.load(), (0, 0), "workers exit when idle");
    }

    #[tokio::test]
    async fn caller_runs_executes_on_the_submitter() {
        let pool = Pool::new("t2", spec("1/1/0/caller-runs"), NO_BYTE_BOUND);
        let gate = Arc::new(Semaphore::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        pool.submit(gated(&gate, &done)).await.ok(); // holds the only worker until the gate opens
        let inline = Arc::new(AtomicUsize::new(0));
        let i2 = inline.clone();
        pool.submit(Job::new(1, async move {
            i2.fetch_add(1, Ordering::SeqCst);
        }))
        .await
        .ok();
        assert_eq!(inline.load(Ordering::SeqCst), 1, "the full pool ran the job on the caller, before submit returned");
        gate.add_permits(1);
    }

    #[tokio::test]
    async fn block_waits_for_room() {
        let pool = Pool::new("t3", spec("1/1/1/block"), NO_BYTE_BOUND);
        let gate = Arc::new(Semaphore::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        pool.submit(gated(&gate, &done)).await.ok();
        pool.submit(gated(&gate, &done)).await.ok();
        let p2 = pool.clone();
        let (g2, d2) = (gate.clone(), done.clone());
        let third = tokio::spawn(async move { p2.submit(gated(&g2, &d2)).await.is_ok() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!third.is_finished(), "a full pool blocks the submitter");
        gate.add_permits(3);
        assert!(third.await.unwrap());
        while done.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn a_panicking_job_frees_its_worker() {
        let pool = Pool::new("t4", spec("1/1/10/block"), NO_BYTE_BOUND);
        pool.submit(Job::new(1, async { panic!("a bug in a store adapter") })).await.ok();
        let done = Arc::new(AtomicUsize::new(0));
        let d2 = done.clone();
        pool.submit(Job::new(1, async move {
            d2.fetch_add(1, Ordering::SeqCst);
        }))
        .await
        .ok();
        for _ in 0..200 {
            if done.load(Ordering::SeqCst) == 1 && pool.load() == (0, 0) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the pool's only worker died with the panicking job: load {:?}", pool.load());
    }

    #[tokio::test]
    async fn the_queue_is_bounded_in_bytes_too() {
        let pool = Pool::new("t5", spec("1/1/100/reject"), 1000);
        let gate = Arc::new(Semaphore::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let sized = |bytes: usize| {
            let (gate, done) = (gate.clone(), done.clone());
            Job::new(bytes, async move {
                gate.acquire().await.expect("open").forget();
                done.fetch_add(1, Ordering::SeqCst);
            })
        };
        assert!(pool.submit(sized(600)).await.is_ok(), "runs on the core worker");
        assert!(pool.submit(sized(1500)).await.is_ok(), "an empty queue takes one job of any size");
        assert!(pool.submit(sized(10)).await.is_err(), "1,510 bytes would pass the 1,000-byte bound");
        gate.add_permits(2);
        while done.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(pool.submit(sized(900)).await.is_ok());
        assert!(pool.submit(sized(900)).await.is_ok(), "queue empty again");
        gate.add_permits(2);
    }
}
