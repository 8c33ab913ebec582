//! The four stores behind one trait.
//!
//! A [`Store`] is everything the pipeline does with one store: prepare its schema, write a batch
//! idempotently under the version rule ([`Overwrite`]), and the audit side (count, fingerprint
//! every message, fetch and delete by id, reset) that reconcile and its repair use. The writer and reconcile only
//! ever see `Arc<dyn Store>`. Each store is one folder (its connection flags in `args.rs`, its
//! [`Backend`] and `Store` implementations and error classification in `store.rs`, its test
//! fixture in `fixture.rs`); [`registry`] is the only place that names them all. The ingest does not depend on this crate, so it links no database driver.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

pub mod es;
pub mod isolate;
pub mod mongo;
pub mod mysql;
pub mod redis;
mod registry;

#[cfg(feature = "fixture")]
pub use registry::isolate;
pub use registry::{connect, StoreArgs, StoreKind};

use async_trait::async_trait;
use pipeline_common::digest::Digest;
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

/// The verdict of [`Sink::holds`], from each largest message's size in the store's encoding
/// (`needs`) and the server's `setting`: a refusal names the setting and the most any of them
/// needs, so that one change is enough.
pub(crate) fn fits(
    kind: StoreKind,
    setting: &str,
    allows: u64,
    needs: impl IntoIterator<Item = Result<u64, StoreError>>,
) -> Result<(), StoreError> {
    let mut most = 0;
    for n in needs {
        most = most.max(n?);
    }
    if most <= allows {
        return Ok(());
    }
    Err(StoreError::permanent(
        kind,
        format!(
            "{setting} is {allows} bytes on this server, and the largest message MAX_BODY_BYTES allows needs {most}: \
             raise {setting} or lower MAX_BODY_BYTES"
        ),
    ))
}

/// The other verdict of [`Sink::holds`]: the server would not say what `setting` is (a user
/// without the right to read it, a compatible server without it, a value this cannot read).
/// Logged and passed, never a refusal: where it is allowed, the check stays undone rather than
/// stopping a writer the server may well serve.
pub(crate) fn unchecked(kind: StoreKind, setting: &str, why: impl fmt::Display) -> Result<(), StoreError> {
    tracing::warn!(store = kind.name(), setting, reason = %why, "cannot read the server's limit; the largest message is not checked");
    Ok(())
}

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

/// A store URL's value: the file's content when a `--<store>-url-file` names one. A file that
/// cannot be read is a permanent error (nothing will change by asking again).
pub(crate) fn resolve_url(kind: StoreKind, url: &str, file: Option<&std::path::Path>) -> Result<String, StoreError> {
    pipeline_common::secret::read_or(url, file).map_err(|e| StoreError::permanent(kind, e))
}

/// The environment that gives a child process the same flags as `flags`, derived from clap's
/// own description of them, so a new flag cannot be forgotten: each flag's `env` name with its
/// value. A flag's id is `STORE-FIELD` (`mysql-url` is `MysqlArgs::url`, kebab-cased by serde);
/// an unset optional flag is left out, and so is a flag whose `-file` twin is set, so a secret
/// read from a file travels as the file's name, never in an environment variable.
pub(crate) fn flags_env<T: clap::Args + serde::Serialize>(store: &str, flags: &T) -> Vec<(String, String)> {
    let values = match serde_json::to_value(flags) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => return Vec::new(),
    };
    let value = |id: &str| -> Option<String> {
        match values.get(id.strip_prefix(store)?.strip_prefix('-')?)? {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    };
    let cmd = T::augment_args(clap::Command::new(store.to_string()));
    cmd.get_arguments()
        .filter(|arg| value(&format!("{}-file", arg.get_id())).is_none())
        .filter_map(|arg| Some((arg.get_env()?.to_string_lossy().into_owned(), value(arg.get_id().as_str())?)))
        .collect()
}

/// How long connecting and each short admin call may take before the store counts as down.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Points a store's connection URL at `to` (`host:port`) instead of its server; returns the
/// server's `host:port`. A URL read from a file is written, rewritten, to a new file in
/// `secret_dir` (mode 0600), so that no password travels in an environment variable.
pub(crate) fn redirect_url(
    kind: StoreKind,
    (url, file): (&mut String, &mut Option<std::path::PathBuf>),
    to: &str,
    secret_dir: &std::path::Path,
) -> Result<String, StoreError> {
    let bad = |e: &dyn std::fmt::Display| StoreError::permanent(kind, e);
    let mut u = url::Url::parse(&resolve_url(kind, url, file.as_deref())?).map_err(|e| bad(&e))?;
    let (host, port) = match (u.host_str(), u.port_or_known_default()) {
        (Some(h), Some(p)) => (h.to_string(), p),
        _ => return Err(bad(&"the URL names no host and port to redirect (give the port explicitly)")),
    };
    let (to_host, to_port) = to.rsplit_once(':').ok_or_else(|| bad(&format!("{to} is not host:port")))?;
    u.set_host(Some(to_host)).map_err(|e| bad(&e))?;
    u.set_port(Some(to_port.parse().map_err(|e| bad(&e))?)).map_err(|()| bad(&"this URL cannot have a port"))?;
    if file.is_some() {
        use std::os::unix::fs::OpenOptionsExt;
        let path = secret_dir.join(format!("{kind}.url"));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| bad(&e))?;
        std::io::Write::write_all(&mut f, u.as_str().as_bytes()).map_err(|e| bad(&e))?;
        *file = Some(path);
    } else {
        *url = u.to_string();
    }
    Ok(format!("{host}:{port}"))
}

/// The host of `url` when it is not this machine and `encrypted` says the URL asks for no TLS.
pub(crate) fn remote_plaintext(url: &str, encrypted: impl Fn(&url::Url) -> bool) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    let host = u.host_str()?.to_string();
    (!encrypted(&u) && !pipeline_common::secret::is_loopback(&host)).then_some(host)
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

/// Which numbered namespace a kind of caller owns in stores that cannot name one (Redis: the
/// database number). The values are fixed so that two kinds never share one.
#[cfg(feature = "fixture")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The workspace's tests (they hold the test kit's `exclusive()` guard).
    Tests = 1,
    /// `experiment chaos` (one run per machine, under the load lock).
    Chaos = 2,
    /// `experiment ab` (under the load lock; each run resets it first).
    Bench = 3,
}
