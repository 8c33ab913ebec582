//! Redis: `msg:<id>` holds the message's JSON (with its version), one script call per batch.
//!
//! The script (`newer.lua`) writes each message only over an older version of its id, which
//! makes a redelivery a no-op and two versions end as the newer one whatever their order.
//! Counting, auditing and resetting use SCAN, never KEYS, so reconcile does not stall a Redis
//! that the writer is still using.

use super::RedisArgs;
use crate::{Audited, Backend, Overwrite, Rejected, Store, StoreError, StoreKind, CONNECT_TIMEOUT};
use async_trait::async_trait;
use pipeline_common::digest::Digest;
use pipeline_common::message::Message;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// Key prefix of every message; reconcile counts `msg:*`.
pub const KEY_PREFIX: &str = "msg:";
const SCAN_COUNT: usize = 1000;
const KIND: StoreKind = StoreKind::Redis;

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::transient(KIND, e)
}

fn key(id: &str) -> String {
    format!("{KEY_PREFIX}{id}")
}

/// Redis's own multiplexed, reconnecting connection: one TCP connection carries every
/// concurrent pipeline, so a pool of connections would add nothing.
pub struct RedisStore {
    conn: ConnectionManager,
    /// `newer.lua`, sent by its SHA-1 (EVALSHA) once the server has it.
    newer: redis::Script,
}

#[async_trait]
impl Backend for RedisStore {
    type Args = RedisArgs;

    async fn connect(args: &RedisArgs) -> Result<Self, StoreError> {
        let url = args.connection_url()?;
        let client = match &args.ca_file {
            // rediss:// with the operator's CA; without one, the system's roots.
            Some(ca) => {
                let pem =
                    std::fs::read(ca).map_err(|e| StoreError::permanent(KIND, format!("{}: {e}", ca.display())))?;
                redis::Client::build_with_tls(
                    url.as_str(),
                    redis::TlsCertificates { client_tls: None, root_cert: Some(pem) },
                )
            }
            None => redis::Client::open(url.as_str()),
        }
        .map_err(|e| StoreError::permanent(KIND, e))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(CONNECT_TIMEOUT * 2))
            .set_number_of_retries(1);
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, ConnectionManager::new_with_config(client, config))
            .await
            .map_err(|_| err("connect timed out"))?
            .map_err(err)?;
        Ok(Self { conn, newer: redis::Script::new(include_str!("newer.lua")) })
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

    async fn write(&self, batch: &[Message], overwrite: Overwrite) -> Result<Vec<Rejected>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = self.newer.prepare_invoke();
        call.arg(match overwrite {
            Overwrite::Older => "gt",
            Overwrite::OlderOrSame => "ge",
        });
        for m in batch {
            call.key(key(&m.id)).arg(m.version.to_string()).arg(m.to_json());
        }
        let mut conn = self.conn.clone();
        let _written: i64 = call.invoke_async(&mut conn).await.map_err(err)?;
        Ok(Vec::new())
    }

    async fn count(&self) -> Result<u64, StoreError> {
        let mut keys = Keys(Vec::new());
        self.scan(&mut keys).await?;
        // SCAN may return a key twice while the keyspace is being resized: count distinct keys.
        keys.0.sort_unstable();
        keys.0.dedup();
        Ok(keys.0.len() as u64)
    }

    async fn audit(&self) -> Result<Vec<Audited>, StoreError> {
        let mut all = Fingerprints(Vec::new());
        self.scan(&mut all).await?;
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
        for chunk in ids.chunks(SCAN_COUNT) {
            let keys: Vec<String> = chunk.iter().map(|id| key(id)).collect();
            let _: i64 = redis::cmd("UNLINK").arg(&keys).query_async(&mut conn).await.map_err(err)?;
        }
        Ok(())
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
