//! Elasticsearch / OpenSearch: `_bulk` index into one index with `_id` = message id.

mod args;
mod audit;
#[cfg(feature = "fixture")]
mod fixture;
mod limit;
mod store;

pub use args::EsArgs;
pub use store::*;
