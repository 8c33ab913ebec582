//! Redis: `SET msg:<id> <message json>`, one pipeline per batch.
//!
//! SET is naturally idempotent. Counting and listing use SCAN, never KEYS, so reconcile does not
//! stall a Redis that the writer is still using.

use super::RedisArgs;
use crate::{Backend, Rejected, Store, StoreError, StoreKind, StoredId, CONNECT_TIMEOUT};
use async_trait::async_trait;
use pipeline_common::message::Message;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// Key prefix of every message; reconcile counts `msg:*`.
pub const KEY_PREFIX: &str = "msg:";
const SCAN_COUNT: usize = 1000;
const KIND: StoreKind = StoreKind::Redis;

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::transient(KIND, e)
}

/// Redis's own multiplexed, reconnecting connection: one TCP connection carries every
/// concurrent pipeline, so a pool of connections would add nothing.
pub struct RedisStore {
    conn: ConnectionManager,
}

#[async_trait]
impl Backend for RedisStore {
    type Args = RedisArgs;

    async fn connect(args: &RedisArgs) -> Result<Self, StoreError> {
        let client = redis::Client::open(args.url.as_str()).map_err(|e| StoreError::permanent(KIND, e))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(CONNECT_TIMEOUT * 2))
            .set_number_of_retries(1);
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, ConnectionManager::new_with_config(client, config))
            .await
            .map_err(|_| err("connect timed out"))?
            .map_err(err)?;
        Ok(Self { conn })
    }
}

impl RedisStore {
    /// Calls `each` with every chunk of `msg:*` keys, via SCAN.
    async fn scan(&self, mut each: impl AsyncChunk) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{KEY_PREFIX}*"))
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

/// What to do with one SCAN chunk (a trait, because async closures borrowing state are awkward).
#[async_trait]
trait AsyncChunk: Send {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError>;
}

struct Collect(Vec<StoredId>);
#[async_trait]
impl AsyncChunk for Collect {
    async fn chunk(&mut self, _: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        self.0.extend(keys.into_iter().map(|k| StoredId { id: k[KEY_PREFIX.len()..].to_string(), place: None }));
        Ok(())
    }
}

struct Delete;
#[async_trait]
impl AsyncChunk for Delete {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        if !keys.is_empty() {
            let _: i64 = redis::cmd("UNLINK").arg(&keys).query_async(conn).await.map_err(err)?;
        }
        Ok(())
    }
}

#[async_trait]
impl Store for RedisStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    async fn prepare(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING").query_async(&mut conn).await.map_err(err)?;
        Ok(())
    }

    async fn write(&self, batch: &[Message]) -> Result<Vec<Rejected>, StoreError> {
        let mut pipe = redis::pipe();
        for m in batch {
            pipe.set(format!("{KEY_PREFIX}{}", m.id), m.to_json()).ignore();
        }
        let mut conn = self.conn.clone();
        let _: () = pipe.query_async(&mut conn).await.map_err(err)?;
        Ok(Vec::new())
    }

    async fn count(&self) -> Result<u64, StoreError> {
        Ok(self.ids().await?.len() as u64)
    }

    async fn ids(&self) -> Result<Vec<StoredId>, StoreError> {
        let mut all = Collect(Vec::new());
        self.scan(&mut all).await?;
        // SCAN may return a key twice while the keyspace is being resized: keep distinct keys.
        all.0.sort_unstable();
        all.0.dedup();
        Ok(all.0)
    }

    async fn reset(&self) -> Result<(), StoreError> {
        self.scan(Delete).await
    }
}

#[async_trait]
impl<T: AsyncChunk> AsyncChunk for &mut T {
    async fn chunk(&mut self, conn: &mut ConnectionManager, keys: Vec<String>) -> Result<(), StoreError> {
        (**self).chunk(conn, keys).await
    }
}
