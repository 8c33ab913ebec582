//! Redis: `SET msg:<id> <message json>`, one script call per batch, and the id index `msg-ids`.

mod args;
mod audit;
#[cfg(feature = "fixture")]
mod fixture;
mod index;
mod limit;
mod store;

pub use args::RedisArgs;
pub use store::*;
