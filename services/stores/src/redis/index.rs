//! The id index: `msg-ids`, a sorted set of every message key, all at score 0, so that counting
//! is ZCARD and the ids of a prefix are a ZRANGEBYLEX range, O(log N + M), where a SCAN walks the
//! whole keyspace on the server (9.4 s for a round's prefix at five million messages, 5.4 s to
//! count 1.74 million; docs/results/performance-log.md, "As the stores grow").
//!
//! The index is trusted only while its marker, the empty member `""`, is in it and the database
//! holds one key per member (`count.lua`). Only a rebuild adds the marker, after it has adopted
//! every message key, and everything that changes keys afterwards changes the index in the same
//! script (`newer.lua` adds, `delete.lua` removes). FLUSHDB takes the marker with the keys; a
//! Redis written by a writer from before the index has none, and one written beside such a
//! writer (an upgrade while the old one still runs) loses it at the next count. Without it count
//! and audit SCAN as before, and the next `prepare` rebuilds.
//! A rebuild never deletes the index, so two at once, or one beside a writer, cannot lose a
//! member: each step adds keys that exist and removes members whose key is gone, atomically.

use super::scan::{scan, AsyncChunk};
use super::{err, KEY_PREFIX, SCAN_COUNT};
use crate::StoreError;
use async_trait::async_trait;
use redis::aio::ConnectionManager;

/// The sorted set of message keys (not itself a `msg:` key, so no SCAN of messages returns it).
pub(super) const INDEX: &str = "msg-ids";
/// The member that says the index holds every message key.
const MARKER: &str = "";

/// The index's own scripts, sent by their SHA-1 (EVALSHA) once the server has them.
pub(super) struct Index {
    /// `count.lua`: the count from the index, when it can be trusted.
    count: redis::Script,
    /// `adopt.lua`: one step of a rebuild.
    adopt: redis::Script,
}

impl Index {
    pub(super) fn new() -> Self {
        Self {
            count: redis::Script::new(include_str!("count.lua")),
            adopt: redis::Script::new(include_str!("adopt.lua")),
        }
    }

    /// The number of messages from the index when it can be trusted (`count.lua`: its marker is
    /// in it and the database holds a key per member), `None` when counts and audits must SCAN.
    /// One script, so a FLUSHDB cannot fall between the check and the count.
    pub(super) async fn count(&self, conn: &ConnectionManager) -> Result<Option<u64>, StoreError> {
        let mut conn = conn.clone();
        let n: i64 = self.count.key(INDEX).invoke_async(&mut conn).await.map_err(err)?;
        Ok(u64::try_from(n).ok())
    }

    /// Makes the index hold exactly the message keys, then marks it trusted: every key SCAN finds
    /// is adopted, every member whose key is gone removed (`adopt.lua`).
    pub(super) async fn rebuild(&self, conn: &ConnectionManager) -> Result<(), StoreError> {
        let adopt = Adopt(self.adopt.clone());
        scan(conn, "", adopt.clone()).await?;
        walk(conn, "", adopt).await?;
        let mut conn = conn.clone();
        let _: i64 = redis::cmd("ZADD").arg(INDEX).arg(0).arg(MARKER).query_async(&mut conn).await.map_err(err)?;
        Ok(())
    }
}

/// Calls `each` with every chunk of the index's message keys for ids that start with `prefix`,
/// in key order, paging from the last key seen (an offset would walk from the start).
pub(super) async fn walk(conn: &ConnectionManager, prefix: &str, mut each: impl AsyncChunk) -> Result<(), StoreError> {
    let mut conn = conn.clone();
    let first = format!("{KEY_PREFIX}{prefix}").into_bytes();
    // Every member that starts with `first` sorts below `first` + 0xFF: ids are ASCII.
    let mut last = first.clone();
    last.push(0xFF);
    let mut min = [b"[".as_slice(), &first].concat();
    let max = [b"[".as_slice(), &last].concat();
    loop {
        let keys: Vec<String> = redis::cmd("ZRANGEBYLEX")
            .arg(INDEX)
            .arg(&min)
            .arg(&max)
            .arg("LIMIT")
            .arg(0)
            .arg(SCAN_COUNT)
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        let Some(next) = keys.last().map(|k| [b"(".as_slice(), k.as_bytes()].concat()) else {
            return Ok(());
        };
        let full = keys.len() == SCAN_COUNT;
        each.chunk(&mut conn, keys).await?;
        if !full {
            return Ok(());
        }
        min = next;
    }
}

/// One rebuild step per chunk of keys (`adopt.lua`).
#[derive(Clone)]
struct Adopt(redis::Script);

#[async_trait]
impl AsyncChunk for Adopt {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut call = self.0.prepare_invoke();
        call.key(INDEX);
        for k in &keys {
            call.key(k);
        }
        let _: i64 = call.invoke_async(conn).await.map_err(err)?;
        Ok(())
    }
}
