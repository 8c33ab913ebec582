//! Walking the keyspace through SCAN (never KEYS), chunk by chunk, so reconcile does not stall a
//! Redis that the writer is still using: what the audit side reads when the id index is not
//! trusted, and what a rebuild of the index adopts.

use super::{err, KEY_PREFIX, SCAN_COUNT};
use crate::StoreError;
use async_trait::async_trait;
use redis::aio::ConnectionManager;

/// What to do with one chunk of keys (a trait, because async closures borrowing state are awkward).
#[async_trait]
pub(super) trait AsyncChunk: Send {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError>;
}

#[async_trait]
impl<T: AsyncChunk> AsyncChunk for &mut T {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        (**self).chunk(conn, keys).await
    }
}

/// Calls `each` with every chunk of the keys of ids that start with `prefix` ("" for every
/// message key), via SCAN: the server still walks the whole keyspace, but only matching keys
/// (and their values) cross the wire.
pub(super) async fn scan(conn: &ConnectionManager, prefix: &str, mut each: impl AsyncChunk) -> Result<(), StoreError> {
    let mut conn = conn.clone();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{KEY_PREFIX}{}*", glob_escaped(prefix)))
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        each.chunk(&mut conn, keys).await?;
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// `s` matched literally in a SCAN pattern (glob: `*`, `?`, `[`, `]` and a backslash escaped).
fn glob_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
