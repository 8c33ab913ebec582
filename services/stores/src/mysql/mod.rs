//! MySQL / MariaDB: the system of record, 16 shard tables (`messages_00` … `messages_15`).

mod args;
mod audit;
#[cfg(feature = "fixture")]
mod fixture;
mod insert;
mod limit;
mod store;

pub use args::MysqlArgs;
pub use store::*;
