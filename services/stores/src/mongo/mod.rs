//! MongoDB: `insert_many(ordered = false)` into `<db>.<collection>` with `_id` = message id,
//! and a filtered upsert for ids already held (the version rule).
//!
//! Here is what the folder's files share: the store's kind and its error mapping. `codec.rs` is
//! the document both sides write and read; `store.rs` (the sink) uses it and `limit.rs`;
//! `audit.rs` uses `codec.rs` and `store.rs`; none imports another in a circle
//! (`tests/imports.rs`).

mod args;
mod audit;
mod codec;
#[cfg(feature = "fixture")]
mod fixture;
mod limit;
mod store;

pub use args::MongoArgs;
pub use store::MongoStore;

use crate::{StoreError, StoreKind};

const KIND: StoreKind = StoreKind::Mongo;

/// A failed command, kept as the error's origin: transient. (Which write errors are the
/// document's own, and permanent, is `store.rs`'s classification.)
fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::transient_from(KIND, e)
}
