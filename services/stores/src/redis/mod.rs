//! Redis: `SET msg:<id> <message json>`, one pipeline per batch.

mod args;
#[cfg(feature = "fixture")]
mod fixture;
mod store;

pub use args::RedisArgs;
pub use store::*;
