//! MySQL / MariaDB: the system of record, 16 shard tables (`messages_00` … `messages_15`).
//!
//! A batch is one transaction with one multi-row INSERT per shard table present. Duplicates are
//! absorbed by `ON DUPLICATE KEY UPDATE id = id` rather than `INSERT IGNORE`: IGNORE would also
//! turn real errors (a truncated value) into warnings and store damaged rows silently.

use super::{Rejected, Store, StoreError, StoreKind, StoredId, CONNECT_TIMEOUT};
use crate::config::MysqlArgs;
use crate::message::{shard_table, Message, SHARDS};
use async_trait::async_trait;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, MySql, QueryBuilder};
use std::collections::BTreeMap;

/// Rows per INSERT statement: keeps a statement far below MySQL's 65,535 placeholders.
const ROWS_PER_STATEMENT: usize = 1000;

const KIND: StoreKind = StoreKind::Mysql;

fn err(e: impl std::fmt::Display) -> StoreError {
    // Connection loss, deadlocks and timeouts are all worth a retry; a message that passed
    // validation fits the schema, so there is no per-record permanent failure to single out.
    StoreError::transient(KIND, e)
}

/// A statement on one shard table. Table names come only from [`shard_table`] (digits), never
/// from input, which is what makes this dynamic SQL safe.
fn per_table(template: &str, table: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(template.replace("{}", table))
}

pub struct MysqlStore {
    pool: MySqlPool,
}

impl MysqlStore {
    pub async fn connect(args: &MysqlArgs) -> Result<Self, StoreError> {
        let pool = MySqlPoolOptions::new()
            .max_connections(args.pool)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect(&args.url)
            .await
            .map_err(err)?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Count per shard table, in table order.
    pub async fn count_per_table(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut out = Vec::with_capacity(SHARDS as usize);
        for shard in 0..SHARDS {
            let table = shard_table(shard);
            let (n,): (i64,) = sqlx::query_as(per_table("SELECT COUNT(*) FROM {}", &table))
                .fetch_one(&self.pool)
                .await
                .map_err(err)?;
            out.push((table, n as u64));
        }
        Ok(out)
    }
}

/// Runs the migrations in `migrations/` (idempotent; sqlx serialises concurrent runs with a lock).
pub async fn migrate(pool: &MySqlPool) -> Result<(), StoreError> {
    sqlx::migrate!("../../migrations").run(pool).await.map_err(err)
}

#[async_trait]
impl Store for MysqlStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    async fn prepare(&self) -> Result<(), StoreError> {
        migrate(&self.pool).await
    }

    async fn write(&self, batch: &[Message]) -> Result<Vec<Rejected>, StoreError> {
        let mut by_shard: BTreeMap<u32, Vec<&Message>> = BTreeMap::new();
        for m in batch {
            by_shard.entry(m.shard()).or_default().push(m);
        }
        let mut tx = self.pool.begin().await.map_err(err)?;
        for (shard, rows) in by_shard {
            for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                let mut q: QueryBuilder<MySql> = QueryBuilder::new(format!(
                    "INSERT INTO {} (id, sender, recipient, body, sent_at) ",
                    shard_table(shard)
                ));
                q.push_values(chunk, |mut b, m| {
                    b.push_bind(&m.id).push_bind(&m.sender).push_bind(&m.recipient).push_bind(&m.body).push_bind(
                        time::PrimitiveDateTime::new(
                            m.sent_at.to_offset(time::UtcOffset::UTC).date(),
                            m.sent_at.to_offset(time::UtcOffset::UTC).time(),
                        ),
                    );
                });
                q.push(" ON DUPLICATE KEY UPDATE id = id");
                q.build().execute(&mut *tx).await.map_err(err)?;
            }
        }
        tx.commit().await.map_err(err)?;
        Ok(Vec::new())
    }

    async fn count(&self) -> Result<u64, StoreError> {
        Ok(self.count_per_table().await?.iter().map(|(_, n)| n).sum())
    }

    async fn ids(&self) -> Result<Vec<StoredId>, StoreError> {
        let mut out = Vec::new();
        for shard in 0..SHARDS {
            let table = shard_table(shard);
            let rows: Vec<(String,)> =
                sqlx::query_as(per_table("SELECT id FROM {}", &table)).fetch_all(&self.pool).await.map_err(err)?;
            out.extend(rows.into_iter().map(|(id,)| StoredId { id, place: Some(table.clone()) }));
        }
        Ok(out)
    }

    async fn reset(&self) -> Result<(), StoreError> {
        self.prepare().await?;
        for shard in 0..SHARDS {
            sqlx::query(per_table("TRUNCATE TABLE {}", &shard_table(shard))).execute(&self.pool).await.map_err(err)?;
        }
        Ok(())
    }
}
