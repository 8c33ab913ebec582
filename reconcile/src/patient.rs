//! Reading a store, patiently: a transient refusal (OpenSearch's 429 "circuit breaking" while
//! its heap is full right after a load, a connection reset) is asked again with capped backoff
//! instead of failing the whole reconcile. A permanent error fails at once. Without this, a
//! `scripts/bench` run whose 259,500 records were in all four stores ended "no JSON answer"
//! because one id-listing search got a 429.

use backon::{ExponentialBuilder, Retryable};
use pipeline_stores::{Store, StoreError, StoredId};
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

/// Every id the store holds.
pub async fn ids(store: &dyn Store) -> Result<Vec<StoredId>, StoreError> {
    again(store, "ids", || store.ids()).await
}

/// How many records the store holds.
pub async fn count(store: &dyn Store) -> Result<u64, StoreError> {
    again(store, "count", || store.count()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use pipeline_common::Message;
    use pipeline_stores::{Rejected, StoreKind};
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
    impl Store for Flaky {
        fn kind(&self) -> StoreKind {
            StoreKind::Es
        }
        async fn prepare(&self) -> Result<(), StoreError> {
            Ok(())
        }
        async fn write(&self, _: &[Message]) -> Result<Vec<Rejected>, StoreError> {
            Ok(Vec::new())
        }
        async fn count(&self) -> Result<u64, StoreError> {
            self.read().map(|_| 7)
        }
        async fn ids(&self) -> Result<Vec<StoredId>, StoreError> {
            self.read().map(|_| vec![StoredId { id: "a".into(), place: None }])
        }
        async fn reset(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_transient_refusal_is_asked_again() {
        let s = Flaky { fail: 2, transient: true, calls: AtomicU32::new(0) };
        assert_eq!(ids(&s).await.expect("third time").len(), 1);
        assert_eq!(s.calls.load(Ordering::SeqCst), 3);
        let s = Flaky { fail: 1, transient: true, calls: AtomicU32::new(0) };
        assert_eq!(count(&s).await.expect("second time"), 7);
    }

    #[tokio::test]
    async fn a_permanent_error_fails_at_once() {
        let s = Flaky { fail: 1, transient: false, calls: AtomicU32::new(0) };
        assert!(ids(&s).await.is_err());
        assert_eq!(s.calls.load(Ordering::SeqCst), 1);
    }
}
