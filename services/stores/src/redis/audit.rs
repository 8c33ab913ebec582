//! Redis's audit side: counting, auditing, fetching, deleting and resetting. Counting and
//! auditing read the id index (index.rs) when it is trusted; otherwise they walk the keyspace
//! through SCAN (scan.rs).

use super::index::{walk, INDEX};
use super::scan::{scan, AsyncChunk};
use super::store::RedisStore;
use super::{err, key, KEY_PREFIX, SCAN_COUNT};
use crate::{Audit, Audited, StoreError};
use async_trait::async_trait;
use pipeline_common::digest::Digest;
use pipeline_common::message::Message;
use redis::aio::ConnectionManager;

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
impl Audit for RedisStore {
    async fn count(&self) -> Result<u64, StoreError> {
        if let Some(n) = self.index.count(&self.conn).await? {
            return Ok(n);
        }
        let mut keys = Keys(Vec::new());
        scan(&self.conn, "", &mut keys).await?;
        // SCAN may return a key twice while the keyspace is being resized: count distinct keys.
        keys.0.sort_unstable();
        keys.0.dedup();
        Ok(keys.0.len() as u64)
    }

    async fn audit(&self, prefix: &str) -> Result<Vec<Audited>, StoreError> {
        let mut all = Fingerprints(Vec::new());
        if self.index.count(&self.conn).await?.is_some() {
            walk(&self.conn, prefix, &mut all).await?;
            return Ok(all.0);
        }
        scan(&self.conn, prefix, &mut all).await?;
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
        scan(&self.conn, "", Delete(&self.delete)).await?;
        if self.index.count(&self.conn).await?.is_none() {
            self.index.rebuild(&self.conn).await?;
        }
        Ok(())
    }
}
