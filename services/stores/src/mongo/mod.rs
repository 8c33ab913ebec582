//! MongoDB: `insert_many(ordered = false)` into `<db>.<collection>` with `_id` = message id.

mod args;
mod store;

pub use args::MongoArgs;
pub use store::*;
