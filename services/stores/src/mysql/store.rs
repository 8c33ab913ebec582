//! MySQL / MariaDB: the system of record, 16 shard tables (`messages_00` … `messages_15`).
//!
//! A batch is one transaction with one multi-row INSERT per shard table present, sent as one
//! multi-statement request ([`super::insert`]). A row already there is replaced only by a newer
//! version, in `ON DUPLICATE KEY UPDATE` rather than `INSERT IGNORE`: IGNORE would also turn
//! real errors (a truncated value) into warnings and store damaged rows silently. The audit side
//! (fingerprints, fetch and delete by id) is in [`super::audit`].

use super::args::MysqlArgs;
use super::{datetime, err, per_table, KIND};
use super::{insert, limit};
use crate::Sink;
use crate::{Backend, Overwrite, Rejected, StoreError, StoreKind, CONNECT_TIMEOUT};
use async_trait::async_trait;
use pipeline_common::message::{shard_table, Message, SENT_AT_YEARS, SHARDS};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, MySql};

/// MySQL errors that the same rows will hit on every attempt: the data does not fit the schema.
/// Everything else (connection loss, 1213 deadlock, 1205 lock wait timeout, 1040 too many
/// connections, a server restarting) is transient. The list is short on purpose: an error
/// wrongly called permanent dead-letters a record that a retry would have stored, which breaks
/// the 202 promise, while one wrongly called transient only stalls a partition, visibly.
const PERMANENT_ERRORS: [u16; 10] = [
    1048, // column cannot be null
    1153, // packet bigger than max_allowed_packet (a smaller batch fits)
    1264, // out of range value
    1265, // data truncated
    1292, // incorrect datetime value
    1300, // invalid utf8 character string
    1366, // incorrect string value
    1367, // illegal value
    1406, // data too long for column
    3140, // invalid JSON text
];

/// Classifies a failed write.
fn write_err(e: sqlx::Error) -> StoreError {
    let permanent = match &e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|m| PERMANENT_ERRORS.contains(&m.number())),
        sqlx::Error::Encode(_) => true,
        _ => false,
    };
    if permanent {
        StoreError::permanent_from(KIND, e)
    } else {
        StoreError::transient_from(KIND, e)
    }
}

/// A pooled connection that may be inside a write's transaction until `committed` is set:
/// dropped before that, it is closed instead of going back to the pool.
struct Uncommitted {
    conn: PoolConnection<MySql>,
    committed: bool,
}

impl Drop for Uncommitted {
    fn drop(&mut self) {
        if !self.committed {
            self.conn.close_on_drop();
        }
    }
}

pub struct MysqlStore {
    pool: MySqlPool,
    /// The admin user's pool (`--mysql-admin-url`), for the migrations and resets; without one,
    /// the main pool does them.
    admin: Option<MySqlPool>,
    /// The server's `max_allowed_packet`, read once at connect.
    packet: u64,
}

#[async_trait]
impl Backend for MysqlStore {
    type Args = MysqlArgs;

    async fn connect(args: &MysqlArgs) -> Result<Self, StoreError> {
        let pool = MySqlPoolOptions::new()
            .max_connections(args.pool)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect(&args.connection_url()?)
            .await
            .map_err(err)?;
        // Connected on first use: a writer whose schema is in place never opens it.
        let admin = match args.admin_connection_url()? {
            Some(url) => Some(
                MySqlPoolOptions::new()
                    .max_connections(1)
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .connect_lazy(&url)
                    .map_err(err)?,
            ),
            None => None,
        };
        let packet = limit::max_allowed_packet(&pool).await?;
        Ok(Self { pool, admin, packet })
    }
}

impl MysqlStore {
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// The pool that may change the schema.
    pub(super) fn admin(&self) -> &MySqlPool {
        self.admin.as_ref().unwrap_or(&self.pool)
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

/// How long a process waits for another one's migrations before it gives up.
const MIGRATION_LOCK_WAIT_S: u32 = 120;

/// Runs the migrations in `migrations/` (idempotent), one process at a time per database.
/// sqlx's own lock asks for `GET_LOCK(name, -1)`, which MariaDB answers at once with NULL
/// instead of waiting: writers started together on a new database ran the same migration
/// together, and all but one stopped on a duplicate row or a migration "partially applied"
/// (stores/tests/servers.rs). This lock waits, on the connection the migrations run on.
pub async fn migrate(pool: &MySqlPool) -> Result<(), StoreError> {
    const NAME: &str = "CONCAT('pipeline_migrations_', COALESCE(DATABASE(), ''))";
    let mut conn = pool.acquire().await.map_err(err)?;
    let got: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT GET_LOCK({NAME}, ?)")))
        .bind(MIGRATION_LOCK_WAIT_S)
        .fetch_one(&mut *conn)
        .await
        .map_err(err)?;
    if got != Some(1) {
        return Err(StoreError::transient(
            KIND,
            format!("another process has been migrating this database for {MIGRATION_LOCK_WAIT_S} s"),
        ));
    }
    let ran = sqlx::migrate!("../../migrations").run_direct(None, &mut *conn, false).await.map_err(err);
    // Released with the connection too, if this fails: the lock is the session's.
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT RELEASE_LOCK({NAME})"))).execute(&mut *conn).await;
    ran
}

#[async_trait]
impl Sink for MysqlStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    async fn prepare(&self) -> Result<(), StoreError> {
        migrate(self.admin()).await
    }

    async fn write(&self, batch: &[Message], overwrite: Overwrite) -> Result<Vec<Rejected>, StoreError> {
        let mut by_shard = insert::ByShard::new();
        let mut rejected = Vec::new();
        for m in batch {
            match datetime(m) {
                Some(at) => by_shard.entry(m.shard()).or_default().push((m, at)),
                None => rejected.push(Rejected {
                    id: m.id.clone(),
                    reason: format!("sent_at {} is outside DATETIME's years {SENT_AT_YEARS:?}", m.sent_at),
                }),
            }
        }
        if by_shard.is_empty() {
            return Ok(rejected);
        }
        // One request in the usual case (see insert.rs). If anything fails or this future is
        // dropped midway, the connection may be inside the transaction: it is closed, never
        // returned to the pool, and the server rolls the transaction back.
        let mut tx = Uncommitted { conn: self.pool.acquire().await.map_err(write_err)?, committed: false };
        for sql in insert::requests(&by_shard, limit::request_bytes(self.packet), overwrite) {
            sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *tx.conn).await.map_err(write_err)?;
        }
        tx.committed = true;
        Ok(rejected)
    }

    async fn holds(&self, largest: &[Message]) -> Result<(), StoreError> {
        limit::holds(self.packet, largest)
    }

    async fn healthcheck(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map(drop).map_err(err)
    }
}
