//! Elasticsearch / OpenSearch: `_bulk` index into one index with `_id` = message id.

mod args;
mod store;

pub use args::EsArgs;
pub use store::*;
