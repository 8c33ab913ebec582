//! Reading a store, patiently: a transient refusal (OpenSearch's 429 "circuit breaking" while
//! its heap is full right after a load, a connection reset) is asked again with capped backoff
//! instead of failing the whole reconcile. A permanent error fails at once. Without this, a
//! `scripts/bench` run whose 259,500 records were in all four stores ended "no JSON answer"
//! because one id-listing search got a 429.

use backon::{ExponentialBuilder, Retryable};
use pipeline_common::Message;
use pipeline_stores::isolate::{write_isolating, PartError};
use pipeline_stores::{Audited, Overwrite, Rejected, Store, StoreError};
use std::future::Future;
use std::time::Duration;

fn policy() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(8))
        .with_max_times(8)
}

async fn again<T, F, Fut>(store: &dyn Store, what: &str, f: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    f.retry(policy())
        .when(|e: &StoreError| e.transient)
        .notify(|e: &StoreError, wait: Duration| {
            eprintln!("reconcile: {} {what}: {e}; asking again in {:.1} s", store.kind(), wait.as_secs_f64())
        })
        .await
}

/// Every message the store holds whose id starts with `prefix` ("" for all), fingerprinted.
pub(crate) async fn audit(store: &dyn Store, prefix: &str) -> Result<Vec<Audited>, StoreError> {
    again(store, "audit", || store.audit(prefix)).await
}

/// Writes `msgs` under the version rule `overwrite`, asking again while the store's errors are
/// transient and isolating the records it refuses for good (returned, with the reason), the
/// writer's own rule (`pipeline_stores::isolate`). A store that stays down fails the write.
pub(crate) async fn write(
    store: &dyn Store,
    msgs: &[Message],
    overwrite: Overwrite,
) -> Result<Vec<Rejected>, StoreError> {
    let attempt = |part: &[Message]| {
        let part = part.to_vec();
        async move {
            match again(store, "write", || store.write(&part, overwrite)).await {
                Ok(rejected) => Ok(rejected),
                Err(e) if e.transient => Err(PartError::Fatal(e)),
                Err(e) => Err(PartError::Refused(e.message)),
            }
        }
    };
    write_isolating(msgs, attempt, || {}).await
}

/// The messages the store holds under `ids`.
pub(crate) async fn fetch(store: &dyn Store, ids: &[String]) -> Result<Vec<Message>, StoreError> {
    again(store, "fetch", || store.fetch(ids)).await
}

/// How many records the store holds.
pub(crate) async fn count(store: &dyn Store) -> Result<u64, StoreError> {
    again(store, "count", || store.count()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use pipeline_stores::{Audit, Sink, StoreKind};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails its first `fail` reads with the given kind of error, then answers.
    struct Flaky {
        fail: u32,
        transient: bool,
        calls: AtomicU32,
    }

    impl Flaky {
        fn read(&self) -> Result<(), StoreError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            match (n < self.fail, self.transient) {
                (false, _) => Ok(()),
                (true, true) => Err(StoreError::transient(StoreKind::Es, "HTTP 429: circuit_breaking_exception")),
                (true, false) => Err(StoreError::permanent(StoreKind::Es, "HTTP 400: bad query")),
            }
        }
    }

    #[async_trait]
    impl Sink for Flaky {
        fn kind(&self) -> StoreKind {
            StoreKind::Es
        }
        async fn prepare(&self) -> Result<(), StoreError> {
            Ok(())
        }
        async fn write(&self, _: &[Message], _: Overwrite) -> Result<Vec<Rejected>, StoreError> {
            Ok(Vec::new())
        }
        async fn holds(&self, _: &[Message]) -> Result<(), StoreError> {
            Ok(())
        }
        async fn healthcheck(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[async_trait]
    impl Audit for Flaky {
        async fn count(&self) -> Result<u64, StoreError> {
            self.read().map(|_| 7)
        }
        async fn audit(&self, _: &str) -> Result<Vec<Audited>, StoreError> {
            self.read().map(|_| vec![Audited { id: "a".into(), place: None, digest: None }])
        }
        async fn fetch(&self, _: &[String]) -> Result<Vec<Message>, StoreError> {
            Ok(Vec::new())
        }
        async fn delete(&self, _: &[String]) -> Result<(), StoreError> {
            Ok(())
        }
        async fn reset(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_transient_refusal_is_asked_again() {
        let s = Flaky { fail: 2, transient: true, calls: AtomicU32::new(0) };
        assert_eq!(audit(&s, "").await.expect("third time").len(), 1);
        assert_eq!(s.calls.load(Ordering::SeqCst), 3);
        let s = Flaky { fail: 1, transient: true, calls: AtomicU32::new(0) };
        assert_eq!(count(&s).await.expect("second time"), 7);
    }

    #[tokio::test]
    async fn a_permanent_error_fails_at_once() {
        let s = Flaky { fail: 1, transient: false, calls: AtomicU32::new(0) };
        assert!(audit(&s, "").await.is_err());
        assert_eq!(s.calls.load(Ordering::SeqCst), 1);
    }
}
