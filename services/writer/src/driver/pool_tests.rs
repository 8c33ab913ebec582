//! The pool's unit tests: Java's semantics, the policies, panics, the byte bound, adaptive limits.

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

/// An adaptive pool starts at `core` in flight and queues the rest (no Java "queue first"
/// past core); fast jobs then raise its limit, and queued jobs get the new workers.
#[tokio::test]
async fn an_adaptive_pool_runs_up_to_its_limit_and_raises_it() {
    let pool = Pool::with("t6", spec("2/16/1000/block"), NO_BYTE_BOUND, true);
    let gate = Arc::new(Semaphore::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        pool.submit(gated(&gate, &done)).await.ok();
    }
    assert_eq!(pool.load(), (2, 1), "core 2 in flight, the third queued");
    gate.add_permits(3);
    for _ in 0..400 {
        pool.submit(gated(&gate, &done)).await.ok();
        gate.add_permits(1);
    }
    while done.load(Ordering::SeqCst) < 403 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let limit = pool.state().limit().unwrap_or(0);
    assert!(limit > 2, "jobs that never slow down raised the limit: {limit}");
}

/// A store refusing whole batches for good answers in a fraction of a write's time; those
/// answers must not teach an adaptive pool that the store got fast (or, once it writes again,
/// that every normal write is a slowdown).
#[tokio::test]
async fn refused_batches_do_not_teach_an_adaptive_pool_its_round_trip() {
    let pool = Pool::with("t7", spec("1/4/1000/block"), NO_BYTE_BOUND, true);
    let done = Arc::new(AtomicUsize::new(0));
    let job = |ms: u64, outcome: Outcome| {
        let done = done.clone();
        Job::reporting(1, async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            done.fetch_add(1, Ordering::SeqCst);
            outcome
        })
    };
    let settle = |n: usize| {
        let done = done.clone();
        async move {
            while done.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    };
    let learnt = |pool: &Pool| pool.state().controller.as_ref().map_or(0.0, Controller::round_trip);
    for _ in 0..20 {
        pool.submit(job(5, Outcome::Written)).await.ok();
    }
    settle(20).await;
    let before = learnt(&pool);
    assert!(before >= 0.004, "20 writes of 5 ms taught {before} s");
    for _ in 0..200 {
        pool.submit(job(0, Outcome::Refused)).await.ok();
    }
    settle(220).await;
    let after = learnt(&pool);
    assert!(after >= 0.004, "refused batches dragged the learnt round trip from {before} s to {after} s");
}
