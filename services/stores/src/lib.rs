//! The four stores behind one trait: this file is the contract, and only the contract.
//!
//! A [`Store`] is everything the pipeline does with one store: prepare its schema, write a batch
//! idempotently under the version rule ([`Overwrite`]), and the audit side (count, fingerprint
//! every message, fetch and delete by id, reset) that reconcile and its repair use. The writer and
//! reconcile only ever see `Arc<dyn Store>`; a failure is a [`StoreError`], transient or not.
//!
//! Each store is one folder: `mod.rs` (its kind, its error mapping and what its files share),
//! `args.rs` (its connection flags), `store.rs` (its [`Backend`] and [`Sink`], and how a failed
//! write is classified), `limit.rs` ([`Sink::holds`]), `audit.rs` ([`Audit`]) and `fixture.rs`
//! (its test namespace); no two of a folder's files import each other in a circle
//! (`tests/imports.rs`). [`registry`] is the only place that names them all; `flags.rs` is what
//! every store's flags share (a URL read from a file, plaintext links, redirects, a child's
//! environment) and `limits.rs` the verdicts of [`Sink::holds`]. The ingest does not depend on
//! this crate, so it links no database driver.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

pub mod es;
mod flags;
pub mod isolate;
mod limits;
pub mod mongo;
pub mod mysql;
pub mod redis;
mod registry;
mod selection;

#[cfg(feature = "fixture")]
pub use registry::isolate;
pub use registry::{connect, StoreArgs, StoreKind};
pub use selection::{Selection, SelectionError, REQUIRED};

use async_trait::async_trait;
use pipeline_common::digest::Digest;
use pipeline_common::message::Message;
use std::error::Error;
use std::fmt;
use std::time::Duration;

/// A failed store operation. `transient` errors (connection refused, timeout, 429, 5xx) are
/// worth retrying as they are; the others need a person or the dead-letter topic.
///
/// One built from an error ([`StoreError::transient_from`], [`StoreError::permanent_from`]: a
/// driver's, mostly) keeps it ([`StoreError::origin`]) and takes its text as the `message`, so it
/// displays as `mysql: <the driver's text>`. Its [`Error::source`] is therefore not that error,
/// whose text is already said, but the first of *its* causes that says something the message does
/// not: a chain printed whole (`{:#}` through anyhow) does not repeat the message.
#[derive(Debug)]
pub struct StoreError {
    pub store: StoreKind,
    pub transient: bool,
    /// What failed, in words: for an error built from another one, that one's text (after what
    /// was being done, when the store says it).
    pub message: String,
    origin: Option<Box<dyn Error + Send + Sync>>,
}

impl StoreError {
    /// A failure, said in words, worth retrying as it is.
    pub fn transient(store: StoreKind, message: impl Into<String>) -> Self {
        Self { store, transient: true, message: message.into(), origin: None }
    }

    /// A failure, said in words, that the same request meets every time.
    pub fn permanent(store: StoreKind, message: impl Into<String>) -> Self {
        Self { store, transient: false, message: message.into(), origin: None }
    }

    /// `e` (a driver's error) as a failure worth retrying as it is: kept, and its text the message.
    pub fn transient_from(store: StoreKind, e: impl Error + Send + Sync + 'static) -> Self {
        Self { store, transient: true, message: e.to_string(), origin: Some(Box::new(e)) }
    }

    /// `e` (a driver's error) as a failure the same request meets every time: kept, and its text
    /// the message.
    pub fn permanent_from(store: StoreKind, e: impl Error + Send + Sync + 'static) -> Self {
        Self { store, transient: false, message: e.to_string(), origin: Some(Box::new(e)) }
    }

    /// What was being done when it failed (a file's name, a request's), before the message:
    /// `<what>: <message>`.
    pub(crate) fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// The error this one was built from, as the driver gave it (to downcast), if any.
    pub fn origin(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.origin.as_deref()
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

/// `mysql: <message>`, as before the origin was kept: one line, no cause said twice.
impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.store, self.message)
    }
}

impl Error for StoreError {
    /// The first cause below the origin whose text the message does not already hold (the
    /// origin's own text is the message; drivers often repeat a cause's text in their own, as
    /// sqlx's `error communicating with database: <io error>` does).
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        let mut next = self.origin.as_deref()?.source();
        while let Some(e) = next {
            if !self.message.contains(&e.to_string()) {
                return Some(e);
            }
            next = e.source();
        }
        None
    }
}

/// A record the store refused for good (e.g. an Elasticsearch mapping error): the writer
/// dead-letters it instead of retrying forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub id: String,
    pub reason: String,
}

/// Which stored versions of an id a write replaces ([`pipeline_common::version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    /// Only older ones: the writer. A redelivered message finds its own version stored and
    /// changes nothing; an older one finds a newer version and changes nothing either.
    Older,
    /// Older ones and the same version: repair and replay, which copy the reference store's
    /// version over a damaged copy of the same version, and still never over a newer one.
    OlderOrSame,
}

/// One message as a store holds it, for reconcile: its id, where it is when the store has
/// several places (the number of its MySQL shard table), and the fingerprint of its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audited {
    pub id: String,
    pub place: Option<u32>,
    /// `None` when the stored value cannot be read as a message (damaged or foreign data).
    pub digest: Option<Digest>,
}

/// The write side of a store, all the writer needs: create what writes need, and write.
#[async_trait]
pub trait Sink: Send + Sync {
    fn kind(&self) -> StoreKind;

    /// Creates what writes need (tables, index). Idempotent; safe from several processes.
    async fn prepare(&self) -> Result<(), StoreError>;

    /// Writes a batch so that writing it again changes nothing (keyed by message id), replacing
    /// a stored message of the same id only when `overwrite` allows for its version: the one
    /// rule that makes every store end with the same version of an id. `Ok` means every record
    /// is stored (or a version it may not replace is) except the returned permanent rejections.
    async fn write(&self, batch: &[Message], overwrite: Overwrite) -> Result<Vec<Rejected>, StoreError>;

    /// Checks that this server, as it is configured, takes each of `largest` in one write (the
    /// largest messages the edge accepts, [`pipeline_common::largest::messages`]); a permanent
    /// error names the server's setting and what it would need. Each store's `limit.rs` reads
    /// the setting that bounds its writes.
    async fn holds(&self, largest: &[Message]) -> Result<(), StoreError>;

    /// One cheap round trip that says the server answers now (`SELECT 1`, `PING`, `HEAD /`,
    /// `ping`). The writer asks it before it blames the consumer group for a partition that does
    /// not move: a stall that a store explains is the retry driver's to wait out, not a reason to
    /// rebalance.
    async fn healthcheck(&self) -> Result<(), StoreError>;
}

/// How long connecting and each short admin call may take before the store counts as down: each
/// store's connect waits this long, and the writer gives [`Sink::healthcheck`] this long.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The audit side of a store, for reconcile, repair and the tests: what the store holds. Each
/// store implements it in its `audit.rs`, apart from its sink.
#[async_trait]
pub trait Audit: Send + Sync {
    /// Exact number of messages held.
    async fn count(&self) -> Result<u64, StoreError>;

    /// Every message held whose id starts with `prefix` ("" for all): id, place and
    /// fingerprint. The store selects by prefix itself (an index range, a SCAN pattern), so
    /// judging one run's ids in a store that holds millions reads that run's, not the millions.
    async fn audit(&self, prefix: &str) -> Result<Vec<Audited>, StoreError>;

    /// The messages held under `ids`, as stored (ids it does not hold, or not as a message, are
    /// left out).
    async fn fetch(&self, ids: &[String]) -> Result<Vec<Message>, StoreError>;

    /// Deletes the messages held under `ids` (repair's `--delete-extra`).
    async fn delete(&self, ids: &[String]) -> Result<(), StoreError>;

    /// Deletes every message and leaves the store prepared and empty.
    async fn reset(&self) -> Result<(), StoreError>;
}

/// A whole store: both sides, what the registry connects and reconcile holds.
pub trait Store: Sink + Audit {}

impl<T: Sink + Audit> Store for T {}

/// A store's flags (its `args.rs`).
///
/// Its fields serialize (serde, kebab-case) to the flag ids without the store's prefix, which is
/// how [`StoreArgs::env`] gives a child process the same flags.
pub trait StoreFlags: clap::Args + clap::FromArgMatches + serde::Serialize + Clone + fmt::Debug + Send + Sync {
    /// `Some(host)` when the store's link would carry data in plaintext to another machine
    /// (refused at start without `--allow-plaintext`).
    fn plaintext_host(&self) -> Option<String>;

    /// The connection URL, inline and as a file: what [`StoreArgs::redirect`] rewrites.
    fn url_mut(&mut self) -> (&mut String, &mut Option<std::path::PathBuf>);
}

/// What the registry needs of a store besides [`Store`]: its flags and how to connect with them.
#[async_trait]
pub trait Backend: Store + Sized + 'static {
    /// The store's flags (`--<store>-url` and the like), flattened into every service's CLI.
    type Args: StoreFlags;

    /// Connects (a pool, a multiplexed connection or a client, whatever the driver offers).
    /// Does not create schema: that is [`Sink::prepare`].
    async fn connect(args: &Self::Args) -> Result<Self, StoreError>;
}

/// The fixture of a store: how a test, or a chaos run, gets a namespace of its own on the shared
/// server.
#[cfg(feature = "fixture")]
#[async_trait]
pub trait Fixture: Backend {
    /// Points `args` at a private namespace called `namespace`, creating what it needs (a
    /// namespace that exists already is reused). A store whose namespaces are numbered, not
    /// named (Redis databases), takes number `slot` and empties it: each kind of caller owns one
    /// slot ([`Slot`]) and runs one at a time in it.
    async fn isolate(args: &mut Self::Args, namespace: &str, slot: Slot) -> Result<(), StoreError>;
}

/// Which numbered namespace a caller owns in stores that cannot name one (Redis: the database
/// number). The fixed numbers are apart from the leased ones so that two callers never share one.
#[cfg(feature = "fixture")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The store examples' one-off runs (`store_batches`, `store_audit`; the bench runs them
    /// under its load lock).
    Examples,
    /// `experiment chaos` (one run per machine, under the load lock).
    Chaos,
    /// `experiment ab` (under the load lock; each run resets it first).
    Bench,
    /// A number one test namespace leased for its life (the test kit's lease), from
    /// [`Slot::LEASED`]: test binaries run side by side, each test in a database of its own.
    Leased(u8),
}

#[cfg(feature = "fixture")]
impl Slot {
    /// The numbers tests lease: above the fixed ones and the experiment tests' own (6-8), below
    /// the `databases 64` scripts/stack gives Redis.
    pub const LEASED: std::ops::Range<u8> = 16..64;

    /// The database number.
    pub fn number(self) -> u8 {
        match self {
            Slot::Examples => 1,
            Slot::Chaos => 2,
            Slot::Bench => 3,
            Slot::Leased(n) => n,
        }
    }
}
