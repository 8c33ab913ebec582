//! MySQL / MariaDB: the system of record, 16 shard tables (`messages_00` … `messages_15`).
//!
//! Here is what the folder's files share: the store's kind, its error mapping, and the two shapes
//! every statement uses (a shard table's name in a statement, `sent_at` as the column holds it).
//! `store.rs` (the sink) uses `insert.rs` (a batch as SQL) and `limit.rs` (`max_allowed_packet`);
//! `audit.rs` uses `store.rs`; none imports another in a circle (`tests/imports.rs`).

mod args;
mod audit;
#[cfg(feature = "fixture")]
mod fixture;
mod insert;
mod limit;
mod store;

pub use args::MysqlArgs;
pub use store::{migrate, MysqlStore};

use crate::{StoreError, StoreKind};
use pipeline_common::message::{Message, SENT_AT_YEARS};
use sqlx::AssertSqlSafe;

const KIND: StoreKind = StoreKind::Mysql;

/// A failed statement, kept as the error's origin: transient. (What a write meets every time,
/// the data not fitting the schema, is `store.rs`'s classification.)
fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::transient_from(KIND, e)
}

/// `sent_at` as the UTC `DATETIME(6)` value MySQL stores, or `None` outside the range the column
/// holds (such a value would make sqlx panic while encoding, or MariaDB refuse it in strict mode).
fn datetime(m: &Message) -> Option<time::PrimitiveDateTime> {
    let utc = m.sent_at.to_offset(time::UtcOffset::UTC);
    SENT_AT_YEARS.contains(&utc.year()).then(|| time::PrimitiveDateTime::new(utc.date(), utc.time()))
}

/// A statement on one shard table. Table names come only from
/// [`shard_table`](pipeline_common::message::shard_table) (digits), never from input, which is
/// what makes this dynamic SQL safe.
fn per_table(template: &str, table: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(template.replace("{}", table))
}
