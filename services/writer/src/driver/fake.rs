//! In-process stand-ins for the driver's unit tests: a store with scripted failures and a
//! dead-letter list. The integration tests (`tests/`) use the real servers.

use super::DeadLetters;
use async_trait::async_trait;
use pipeline_common::Message;
use pipeline_stores::{Overwrite, Rejected, Sink, StoreError, StoreKind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) const FAST: super::Backoff = super::Backoff { min: Duration::from_millis(1), max: Duration::from_millis(4) };

/// A store that refuses batches holding a `poison` id (permanently), fails the first `flaky`
/// calls transiently, and panics on a `panic` id. Records every successful write.
pub(super) struct Fake {
    pub kind: StoreKind,
    pub flaky: Mutex<usize>,
    pub calls: Mutex<usize>,
    pub stored: Mutex<Vec<String>>,
}

impl Default for Fake {
    fn default() -> Self {
        Fake::of(StoreKind::Mysql)
    }
}

impl Fake {
    pub(super) fn of(kind: StoreKind) -> Fake {
        Fake { kind, flaky: Mutex::new(0), calls: Mutex::new(0), stored: Mutex::new(Vec::new()) }
    }
}

#[async_trait]
impl Sink for Fake {
    fn kind(&self) -> StoreKind {
        self.kind
    }
    async fn prepare(&self) -> Result<(), StoreError> {
        Ok(())
    }
    async fn write(&self, batch: &[Message], _: Overwrite) -> Result<Vec<Rejected>, StoreError> {
        *self.calls.lock().unwrap() += 1;
        if batch.iter().any(|m| m.id.starts_with("panic")) {
            panic!("adapter bug on {}", batch[0].id);
        }
        {
            let mut f = self.flaky.lock().unwrap();
            if *f > 0 {
                *f -= 1;
                return Err(StoreError::transient(self.kind, "connection reset"));
            }
        }
        if batch.iter().any(|m| m.id.starts_with("poison")) {
            return Err(StoreError::permanent(self.kind, "1406 Data too long"));
        }
        self.stored.lock().unwrap().extend(batch.iter().map(|m| m.id.clone()));
        Ok(Vec::new())
    }
    async fn holds(&self, _: &[Message]) -> Result<(), StoreError> {
        Ok(())
    }
    async fn healthcheck(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Dead letters kept in memory as (store, id).
#[derive(Clone, Default)]
pub(super) struct Letters(pub Arc<Mutex<Vec<(String, String)>>>);

#[async_trait]
impl DeadLetters for Letters {
    async fn refused(&self, store: &'static str, msg: &Message, _reason: &str) {
        self.0.lock().unwrap().push((store.to_string(), msg.id.clone()));
    }
}

/// Messages with exactly these ids.
pub(super) fn batch(ids: &[&str]) -> Vec<Message> {
    let mut msgs = pipeline_testkit::messages(ids.len(), "t");
    for (m, id) in msgs.iter_mut().zip(ids) {
        m.id = id.to_string();
    }
    msgs
}
