//! Getting one batch into one store, whatever the store says: the retry and isolation policy,
//! kept apart from the stores (which only classify their errors) and from the dispatcher (which
//! only decides where and when a batch is written).
//!
//! - A **transient** error (connection lost, timeout, 429, 5xx, deadlock) is retried with capped,
//!   jittered exponential backoff, without limit: giving up would mean committing past a record
//!   that is not stored. The partition waits, and the wait shows in
//!   `writer_store_errors_total{kind="transient"}` and `writer_store_retries_total`.
//! - A **permanent** error (the store refuses the data itself: MySQL 1292/1406, an Elasticsearch
//!   400 or 413 for the whole request, a Mongo validation error) would fail the same way forever.
//!   The batch is split in halves until the records that cause it are alone; each of those is
//!   returned as [`Rejected`] (the caller dead-letters it) and the rest of the batch is written.
//! - A **panic** inside a store adapter is a bug, not a property of the data: it is caught so it
//!   cannot unwind through the consumer, counted in `writer_panics_total`, and reported as
//!   [`Panicked`] so the consumer stops without committing past the batch.

use backon::{ExponentialBuilder, Retryable};
use futures::FutureExt;
use metrics::{counter, histogram};
use pipeline_common::catalog;
use pipeline_common::Message;
use pipeline_stores::isolate::{write_isolating, PartError};
use pipeline_stores::{Overwrite, Rejected, Sink, StoreError};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

/// Bounds of the backoff between two attempts of a transient failure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub min: Duration,
    pub max: Duration,
}

/// A store adapter panicked while writing; the batch is not stored.
#[derive(Debug, thiserror::Error)]
#[error("{store} write panicked: {message}")]
pub(crate) struct Panicked {
    pub store: &'static str,
    pub message: String,
}

enum Failure {
    Store(StoreError),
    Panic(String),
}

/// Writes `batch` to `store` until every record is either stored or refused for good. Returns
/// the refused records (to be dead-lettered), or [`Panicked`].
pub(crate) async fn store_batch<'a>(
    store: &'a dyn Sink,
    batch: &'a [Message],
    backoff: Backoff,
) -> Result<Vec<Rejected>, Panicked> {
    let name = store.kind().name();
    histogram!(catalog::WRITER_STORE_BATCH_RECORDS, "store" => name).record(batch.len() as f64);
    let attempt = |part: &'a [Message]| async move {
        match write_retrying(store, part, backoff).await {
            Ok(rejected) => {
                counter!(catalog::WRITER_STORE_RECORDS_TOTAL, "store" => name)
                    .increment(part.len().saturating_sub(rejected.len()) as u64);
                Ok(rejected)
            }
            Err(Failure::Panic(message)) => {
                counter!(catalog::WRITER_PANICS_TOTAL, "where" => "store_write").increment(1);
                tracing::error!(store = name, panic = %message, "store write panicked");
                Err(PartError::Fatal(Panicked { store: name, message }))
            }
            Err(Failure::Store(e)) => {
                if let [one] = part {
                    tracing::warn!(store = name, id = %one.id, error = %e, "record refused for good");
                }
                Err(PartError::Refused(e.message))
            }
        }
    };
    let split = || counter!(catalog::WRITER_STORE_SPLITS_TOTAL, "store" => name).increment(1);
    write_isolating(batch, attempt, split).await
}

/// One part, retried while the failure is transient. Returns the store's own per-record
/// rejections on success, or the first permanent failure (or panic).
async fn write_retrying(store: &dyn Sink, part: &[Message], backoff: Backoff) -> Result<Vec<Rejected>, Failure> {
    let name = store.kind().name();
    let attempt = || async {
        let started = Instant::now();
        let r = match AssertUnwindSafe(store.write(part, Overwrite::Older)).catch_unwind().await {
            Ok(r) => r.map_err(Failure::Store),
            Err(panic) => Err(Failure::Panic(panic_message(&*panic))),
        };
        match &r {
            Ok(_) => {
                histogram!(catalog::WRITER_STORE_WRITE_SECONDS, "store" => name).record(started.elapsed().as_secs_f64())
            }
            Err(Failure::Store(e)) => {
                counter!(catalog::WRITER_STORE_ERRORS_TOTAL, "store" => name, "kind" => e.kind_label()).increment(1)
            }
            Err(Failure::Panic(_)) => {}
        }
        r
    };
    let policy = ExponentialBuilder::default()
        .with_min_delay(backoff.min)
        .with_max_delay(backoff.max)
        .with_jitter()
        .without_max_times();
    attempt
        .retry(policy)
        .sleep(tokio::time::sleep)
        .when(|f| matches!(f, Failure::Store(e) if e.transient))
        .notify(|f, wait| {
            if let Failure::Store(e) = f {
                counter!(catalog::WRITER_STORE_RETRIES_TOTAL, "store" => name).increment(1);
                tracing::warn!(store = name, error = %e, retry_in_ms = wait.as_millis() as u64, "store write failed; retrying");
            }
        })
        .await
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text panic payload".into())
}

#[cfg(test)]
mod tests {
    use super::super::fake::{batch, Fake};
    use super::*;
    use std::sync::Mutex;

    use super::super::fake::FAST;

    #[tokio::test]
    async fn a_permanent_error_is_isolated_to_the_records_that_cause_it() {
        let store = Fake::default();
        let mut ids: Vec<String> = (0..100).map(|i| format!("ok-{i}")).collect();
        ids[37] = "poison-a".into();
        ids[80] = "poison-b".into();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let refused = store_batch(&store, &batch(&refs), FAST).await.unwrap();
        let mut refused_ids: Vec<_> = refused.iter().map(|r| r.id.as_str()).collect();
        refused_ids.sort();
        assert_eq!(refused_ids, ["poison-a", "poison-b"]);
        assert!(refused[0].reason.contains("1406"));
        let mut stored = store.stored.lock().unwrap().clone();
        stored.sort();
        stored.dedup();
        assert_eq!(stored.len(), 98, "every other record of the batch is written");
        assert!(*store.calls.lock().unwrap() < 40, "bisection, not one call per record");
    }

    #[tokio::test]
    async fn transient_errors_are_retried_until_stored() {
        let store = Fake { flaky: Mutex::new(5), ..Default::default() };
        let refused = store_batch(&store, &batch(&["a", "b"]), FAST).await.unwrap();
        assert!(refused.is_empty());
        assert_eq!(*store.calls.lock().unwrap(), 6);
        assert_eq!(store.stored.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_panicking_adapter_is_contained_and_reported() {
        let store = Fake::default();
        let err = store_batch(&store, &batch(&["a", "panic-1"]), FAST).await.unwrap_err();
        assert!(err.message.contains("adapter bug"), "{err}");
        assert!(store.stored.lock().unwrap().is_empty(), "nothing claimed as stored");
    }
}
