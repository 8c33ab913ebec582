//! Redis: `SET msg:<id> <message json>`, one script call per batch, and the id index `msg-ids`.
//!
//! Here is what the folder's files share: the store's kind, its error mapping and the message
//! keys. `scan.rs` walks the keyspace; `index.rs` (the id index and its scripts) uses it; `store.rs`
//! (the sink) uses `index.rs` and `limit.rs`; `audit.rs` uses all three; none imports another in
//! a circle (`tests/imports.rs`).

mod args;
mod audit;
#[cfg(feature = "fixture")]
mod fixture;
mod index;
mod limit;
mod scan;
mod store;

pub use args::RedisArgs;
pub use store::RedisStore;

use crate::{StoreError, StoreKind};

const KIND: StoreKind = StoreKind::Redis;

/// Key prefix of every message; reconcile counts `msg:*`.
pub const KEY_PREFIX: &str = "msg:";

/// Keys per SCAN step, MGET and UNLINK (the audit side).
const SCAN_COUNT: usize = 1000;

/// A failed command, kept as the error's origin: transient.
fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::transient_from(KIND, e)
}

/// The key of message `id`.
fn key(id: &str) -> String {
    format!("{KEY_PREFIX}{id}")
}
