//! Elasticsearch / OpenSearch: `_bulk` index into one index with `_id` = message id.
//!
//! Here is what the folder's files share: the store's kind and its error mapping (a failed
//! request, and `json_of`, which reads every answer and classifies its HTTP status). `codec.rs`
//! is the document both sides read and write; `store.rs` (the sink) uses it and `limit.rs`;
//! `audit.rs` uses `codec.rs` and `store.rs`; none imports another in a circle
//! (`tests/imports.rs`).

mod args;
mod audit;
mod codec;
#[cfg(feature = "fixture")]
mod fixture;
mod limit;
mod store;

pub use args::EsArgs;
pub use store::EsStore;

use crate::{StoreError, StoreKind};
use elasticsearch::http::response::Response;
use serde_json::Value;

const KIND: StoreKind = StoreKind::Es;

/// A request that failed (no answer, or one that could not be read), kept as the error's origin:
/// transient.
fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::transient_from(KIND, e)
}

/// Reads a response body as JSON, turning an HTTP error status into a [`StoreError`]. Only 400
/// (the request's content is invalid) and 413 (too large: a smaller batch fits) are permanent,
/// and the writer answers them by splitting the batch. 401/403/404 mean a misconfigured client
/// or a missing index, not bad data: retried (and visible) rather than dead-lettering every
/// record; 429 and 5xx are the server being busy or down.
async fn json_of(resp: Response, what: &str) -> Result<Value, StoreError> {
    let status = resp.status_code().as_u16();
    let text = resp.text().await.map_err(err)?;
    match status {
        200..=299 => serde_json::from_str(&text).map_err(|e| err(e).context(format!("{what}: unreadable answer"))),
        400 | 413 => Err(StoreError::permanent(KIND, format!("{what}: HTTP {status}: {text}"))),
        _ => Err(StoreError::transient(KIND, format!("{what}: HTTP {status}: {text}"))),
    }
}
