//! Redis: `SET msg:<id> <message json>`, one pipeline per batch.

mod args;
mod audit;
#[cfg(feature = "fixture")]
mod fixture;
mod store;

pub use args::RedisArgs;
pub use store::*;
