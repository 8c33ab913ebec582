//! The four stores behind one trait.
//!
//! A [`Store`] is everything the pipeline does with one store: prepare its schema, write a batch
//! idempotently, and the reconcile side (count, list ids, reset). The writer and reconcile only
//! ever see `Arc<dyn Store>`. Each store is one folder (its connection flags in `args.rs`, its
//! [`Backend`] and `Store` implementations and error classification in `store.rs`, its test
//! fixture in `fixture.rs`); [`registry`] is the only place that names them all. The ingest does not depend on this crate, so it links no database driver.

pub mod es;
pub mod mongo;
pub mod mysql;
pub mod redis;
pub mod registry;

#[cfg(feature = "fixture")]
pub use registry::isolate;
pub use registry::{connect, StoreArgs, StoreKind};

use async_trait::async_trait;
use pipeline_common::message::Message;
use std::fmt;
use std::time::Duration;

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

/// A store's flags (its `args.rs`).
pub trait StoreFlags: clap::Args + clap::FromArgMatches + Clone + fmt::Debug + Send + Sync {
    /// The environment that gives a child process these same flags (each flag's `env` name and
    /// value), so tests and the experiment runner can start services against the same stores.
    fn env(&self) -> Vec<(&'static str, String)>;
}

/// What the registry needs of a store besides [`Store`]: its flags and how to connect with them.
#[async_trait]
pub trait Backend: Store + Sized + 'static {
    /// The store's flags (`--<store>-url` and the like), flattened into every service's CLI.
    type Args: StoreFlags;

    /// Connects (a pool, a multiplexed connection or a client, whatever the driver offers).
    /// Does not create schema: that is [`Store::prepare`].
    async fn connect(args: &Self::Args) -> Result<Self, StoreError>;
}

/// The test fixture of a store: how one test gets a namespace of its own on the shared server.
#[cfg(feature = "fixture")]
#[async_trait]
pub trait Fixture: Backend {
    /// Points `args` at a private namespace called `namespace`, creating what it needs.
    async fn isolate(args: &mut Self::Args, namespace: &str) -> Result<(), StoreError>;
}
