//! Redis: `msg:<id>` holds the message's JSON (with its version), one script call per batch.
//!
//! The script (`newer.lua`) writes each message only over an older version of its id, which
//! makes a redelivery a no-op and two versions end as the newer one whatever their order. The same
//! script keeps the id index (index.rs) that counting and auditing read.

use super::args::RedisArgs;
use super::index::{Index, INDEX};
use super::limit;
use super::{err, key, KIND};
use crate::Sink;
use crate::{Backend, Overwrite, Rejected, StoreError, StoreKind, CONNECT_TIMEOUT};
use async_trait::async_trait;
use pipeline_common::message::Message;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// Redis's own multiplexed, reconnecting connection: one TCP connection carries every
/// concurrent pipeline, so a pool of connections would add nothing.
pub struct RedisStore {
    pub(super) conn: ConnectionManager,
    /// `newer.lua`, sent by its SHA-1 (EVALSHA) once the server has it.
    newer: redis::Script,
    /// `delete.lua`: messages and their index members deleted together.
    pub(super) delete: redis::Script,
    /// The id index's scripts (`count.lua`, `adopt.lua`).
    pub(super) index: Index,
}

#[async_trait]
impl Backend for RedisStore {
    type Args = RedisArgs;

    async fn connect(args: &RedisArgs) -> Result<Self, StoreError> {
        let url = args.connection_url()?;
        let client = match &args.ca_file {
            // rediss:// with the operator's CA; without one, the system's roots.
            Some(ca) => {
                let pem = std::fs::read(ca).map_err(|e| StoreError::permanent_from(KIND, e).context(ca.display()))?;
                redis::Client::build_with_tls(
                    url.as_str(),
                    redis::TlsCertificates { client_tls: None, root_cert: Some(pem) },
                )
            }
            None => redis::Client::open(url.as_str()),
        }
        .map_err(|e| StoreError::permanent_from(KIND, e))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(CONNECT_TIMEOUT * 2))
            .set_number_of_retries(1);
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, ConnectionManager::new_with_config(client, config))
            .await
            .map_err(|_| StoreError::transient(KIND, "connect timed out"))?
            .map_err(err)?;
        Ok(Self {
            conn,
            newer: redis::Script::new(include_str!("newer.lua")),
            delete: redis::Script::new(include_str!("delete.lua")),
            index: Index::new(),
        })
    }
}

#[async_trait]
impl Sink for RedisStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    /// PING, and the id index rebuilt when it is not trusted (a fresh or flushed Redis: an empty
    /// walk; one written before the index: a walk of every key, once).
    async fn prepare(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING").query_async(&mut conn).await.map_err(err)?;
        if self.index.count(&self.conn).await?.is_none() {
            self.index.rebuild(&self.conn).await?;
        }
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
        call.key(INDEX);
        for m in batch {
            call.key(key(&m.id)).arg(m.version.to_string()).arg(m.to_json());
        }
        let mut conn = self.conn.clone();
        let _written: i64 = call.invoke_async(&mut conn).await.map_err(err)?;
        Ok(Vec::new())
    }

    async fn holds(&self, largest: &[Message]) -> Result<(), StoreError> {
        limit::holds(self.conn.clone(), largest).await
    }

    async fn healthcheck(&self) -> Result<(), StoreError> {
        redis::cmd("PING").query_async::<()>(&mut self.conn.clone()).await.map_err(err)
    }
}
