//! Redis's audit side: counting, auditing, fetching, deleting and resetting. Counting and
//! auditing read the id index (index.rs) when it is trusted; otherwise, and to rebuild it, they
//! walk the keyspace through SCAN (never KEYS), so reconcile does not stall a Redis that the
//! writer is still using.

use super::index::INDEX;
use super::store::{err, key, RedisStore, KEY_PREFIX, SCAN_COUNT};
use crate::{Audit, Audited, StoreError};
use async_trait::async_trait;
use pipeline_common::digest::Digest;
use pipeline_common::message::Message;
use redis::aio::ConnectionManager;

impl RedisStore {
    /// Calls `each` with every chunk of `msg:*` keys, via SCAN.
    async fn scan(&self, each: impl AsyncChunk) -> Result<(), StoreError> {
        self.scan_prefix("", each).await
    }

    /// Calls `each` with every chunk of the keys of ids that start with `prefix`: the server
    /// still walks the whole keyspace, but only matching keys (and their values) cross the wire.
    pub(super) async fn scan_prefix(&self, prefix: &str, mut each: impl AsyncChunk) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
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

/// What to do with one SCAN chunk (a trait, because async closures borrowing state are awkward).
#[async_trait]
pub(super) trait AsyncChunk: Send {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError>;
}

/// Keys of one SCAN chunk, kept.
struct Keys(Vec<String>);
#[async_trait]
impl AsyncChunk for Keys {
    async fn chunk(&mut self, _: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        self.0.extend(keys);
        Ok(())
    }
}

/// Fingerprints of every message of each chunk (one MGET per chunk).
struct Fingerprints(Vec<Audited>);
#[async_trait]
impl AsyncChunk for Fingerprints {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let values: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&keys).query_async(conn).await.map_err(err)?;
        for (key, value) in keys.into_iter().zip(values) {
            // A key deleted between SCAN and MGET is not held any more.
            let Some(value) = value else { continue };
            let digest = serde_json::from_slice::<Message>(&value).ok().map(|m| Digest::of_message(&m));
            self.0.push(Audited { id: key[KEY_PREFIX.len()..].to_string(), place: None, digest });
        }
        Ok(())
    }
}

/// Keys and their index members deleted together (`delete.lua`).
struct Delete<'a>(&'a redis::Script);
#[async_trait]
impl AsyncChunk for Delete<'_> {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        if !keys.is_empty() {
            let mut call = self.0.prepare_invoke();
            call.key(INDEX);
            for k in &keys {
                call.key(k);
            }
            let _: i64 = call.invoke_async(conn).await.map_err(err)?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: AsyncChunk> AsyncChunk for &mut T {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        (**self).chunk(conn, keys).await
    }
}

#[async_trait]
impl Audit for RedisStore {
    async fn count(&self) -> Result<u64, StoreError> {
        if let Some(n) = self.indexed_count().await? {
            return Ok(n);
        }
        let mut keys = Keys(Vec::new());
        self.scan(&mut keys).await?;
        // SCAN may return a key twice while the keyspace is being resized: count distinct keys.
        keys.0.sort_unstable();
        keys.0.dedup();
        Ok(keys.0.len() as u64)
    }

    async fn audit(&self, prefix: &str) -> Result<Vec<Audited>, StoreError> {
        let mut all = Fingerprints(Vec::new());
        if self.indexed_count().await?.is_some() {
            self.walk_index(prefix, &mut all).await?;
            return Ok(all.0);
        }
        self.scan_prefix(prefix, &mut all).await?;
        // SCAN may return a key twice while the keyspace is being resized: keep distinct keys.
        all.0.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        all.0.dedup_by(|a, b| a.id == b.id);
        Ok(all.0)
    }

    async fn fetch(&self, ids: &[String]) -> Result<Vec<Message>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        let mut conn = self.conn.clone();
        for chunk in ids.chunks(SCAN_COUNT) {
            let keys: Vec<String> = chunk.iter().map(|id| key(id)).collect();
            let values: Vec<Option<Vec<u8>>> =
                redis::cmd("MGET").arg(&keys).query_async(&mut conn).await.map_err(err)?;
            // A value that is not a message is left out, like an absent one (audit reports it).
            out.extend(values.into_iter().flatten().filter_map(|v| serde_json::from_slice::<Message>(&v).ok()));
        }
        Ok(out)
    }

    async fn delete(&self, ids: &[String]) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let mut delete = Delete(&self.delete);
        for chunk in ids.chunks(SCAN_COUNT) {
            delete.chunk(&mut conn, chunk.iter().map(|id| key(id)).collect()).await?;
        }
        Ok(())
    }

    /// Every message deleted with its member; the index is trusted afterwards (rebuilt when it
    /// was not), as after `prepare`.
    async fn reset(&self) -> Result<(), StoreError> {
        self.scan(Delete(&self.delete)).await?;
        if self.indexed_count().await?.is_none() {
            self.rebuild_index().await?;
        }
        Ok(())
    }
}
