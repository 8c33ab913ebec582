//! MongoDB: `insert_many(ordered = false)` into `<db>.<collection>` with `_id` = message id,
//! and a filtered upsert for ids already held (the version rule).

mod args;
mod audit;
#[cfg(feature = "fixture")]
mod fixture;
mod limit;
mod store;

pub use args::MongoArgs;
pub use store::*;
