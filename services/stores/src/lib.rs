//! The four stores behind one trait.
//!
//! A [`Store`] is everything the pipeline does with one store: prepare its schema, write a batch
//! idempotently, and the reconcile side (count, list ids, reset). The writer and reconcile only
//! ever see `Arc<dyn Store>`. Each store is one folder (its connection flags in `args.rs`, its
//! `Store` implementation and error classification in `store.rs`); [`registry`] is where they
//! are all named. The ingest does not depend on this crate, so it links no database driver.

pub mod elastic;
pub mod mongo;
pub mod mysql;
pub mod redis;
pub mod registry;

pub use registry::{connect, StoreArgs};

use async_trait::async_trait;
use pipeline_common::message::Message;
use std::fmt;
use std::time::Duration;

/// Which store. The names are the ones used in flags, metrics labels and reconcile output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Mysql,
    Redis,
    Es,
    Mongo,
}

impl StoreKind {
    pub const ALL: [StoreKind; 4] = [StoreKind::Mysql, StoreKind::Redis, StoreKind::Es, StoreKind::Mongo];

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Mysql => "mysql",
            StoreKind::Redis => "redis",
            StoreKind::Es => "es",
            StoreKind::Mongo => "mongo",
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed store operation. `transient` errors (connection refused, timeout, 429, 5xx) are
/// worth retrying as they are; the others need a person or the dead-letter topic.
#[derive(Debug, thiserror::Error)]
#[error("{store}: {message}")]
pub struct StoreError {
    pub store: StoreKind,
    pub transient: bool,
    pub message: String,
}

impl StoreError {
    pub fn transient(store: StoreKind, e: impl fmt::Display) -> Self {
        Self { store, transient: true, message: e.to_string() }
    }
    pub fn permanent(store: StoreKind, e: impl fmt::Display) -> Self {
        Self { store, transient: false, message: e.to_string() }
    }
    /// A short label for the `errors by kind` metrics.
    pub fn kind_label(&self) -> &'static str {
        if self.transient {
            "transient"
        } else {
            "permanent"
        }
    }
}

/// A record the store refused for good (e.g. an Elasticsearch mapping error): the writer
/// dead-letters it instead of retrying forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub id: String,
    pub reason: String,
}

/// One id as a store holds it; `place` says where when the store has several places (the
/// MySQL shard table), so reconcile can find misplaced and duplicated rows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StoredId {
    pub id: String,
    pub place: Option<String>,
}

#[async_trait]
pub trait Store: Send + Sync {
    fn kind(&self) -> StoreKind;

    /// Creates what writes need (tables, index). Idempotent; safe from several processes.
    async fn prepare(&self) -> Result<(), StoreError>;

    /// Writes a batch so that writing it again changes nothing (keyed by message id). `Ok`
    /// means every record is stored except the returned permanent rejections.
    async fn write(&self, batch: &[Message]) -> Result<Vec<Rejected>, StoreError>;

    /// Exact number of messages held.
    async fn count(&self) -> Result<u64, StoreError>;

    /// Every id held, with its place.
    async fn ids(&self) -> Result<Vec<StoredId>, StoreError>;

    /// Deletes every message and leaves the store prepared and empty.
    async fn reset(&self) -> Result<(), StoreError>;
}

/// How long connecting and each short admin call may take before the store counts as down.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
