//! MongoDB: `insert_many(ordered = false)` into `<db>.<collection>` with `_id` = message id.

mod args;
#[cfg(feature = "fixture")]
mod fixture;
mod store;

pub use args::MongoArgs;
pub use store::*;
