//! MySQL's audit side: every row's fingerprint, and rows fetched or deleted by id, table by
//! table. Rows are streamed, so a table of millions costs one fingerprint per row, not its text.

use super::store::MysqlStore;
use super::{err, per_table};
use crate::{Audit, Sink};
use crate::{Audited, StoreError};
use async_trait::async_trait;
use futures::TryStreamExt;
use pipeline_common::digest::{Digest, Stored};
use pipeline_common::message::{shard_of, shard_table, Message, SHARDS};
use sqlx::mysql::MySqlPool;
use sqlx::AssertSqlSafe;
use std::collections::BTreeMap;
use time::PrimitiveDateTime;

/// Ids per `IN (...)` list: far below `max_allowed_packet` with ids of 64 characters.
const IDS_PER_QUERY: usize = 1000;

type Row = (String, String, String, String, PrimitiveDateTime, u64);
const SELECT: &str = "SELECT id, sender, recipient, body, sent_at, version FROM {}";

fn message((id, sender, recipient, body, sent_at, version): Row) -> Message {
    Message { id, sender, recipient, body, sent_at: sent_at.assume_utc(), version }
}

/// `prefix` as a LIKE pattern's start, its wildcards escaped (a backslash is LIKE's default escape).
fn like_prefix(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

pub(super) async fn audit(pool: &MySqlPool, prefix: &str) -> Result<Vec<Audited>, StoreError> {
    let mut out = Vec::new();
    if !prefix.is_ascii() {
        // Ids are ASCII (the column's character set): none starts with this.
        return Ok(out);
    }
    let pattern = like_prefix(prefix);
    for shard in 0..SHARDS {
        // LIKE 'prefix%' is a range of the primary key (ascii_bin: exact, case and all).
        let sql = per_table(&format!("{SELECT} WHERE id LIKE ?"), &shard_table(shard));
        let mut rows = sqlx::query_as::<_, Row>(sql).bind(&pattern).fetch(pool);
        while let Some(row) = rows.try_next().await.map_err(err)? {
            let (id, sender, recipient, body, sent_at, version) = &row;
            let stored = Stored { sender, recipient, body, sent_at: sent_at.assume_utc(), version: *version };
            out.push(Audited { id: id.clone(), place: Some(shard), digest: Some(Digest::of(stored)) });
        }
    }
    Ok(out)
}

/// The ids by shard table, in chunks of at most [`IDS_PER_QUERY`].
fn by_table(ids: &[String]) -> BTreeMap<u32, Vec<&str>> {
    let mut tables: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for id in ids {
        tables.entry(shard_of(id)).or_default().push(id);
    }
    tables
}

/// `template` with `{}` the table and `{in}` a list of `n` placeholders.
fn with_ids(template: &str, table: &str, n: usize) -> AssertSqlSafe<String> {
    let marks = vec!["?"; n].join(",");
    per_table(&template.replace("{in}", &marks), table)
}

pub(super) async fn fetch(pool: &MySqlPool, ids: &[String]) -> Result<Vec<Message>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for (shard, ids) in by_table(ids) {
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let sql = with_ids(&format!("{SELECT} WHERE id IN ({{in}})"), &shard_table(shard), chunk.len());
            let mut q = sqlx::query_as::<_, Row>(sql);
            for id in chunk {
                q = q.bind(*id);
            }
            out.extend(q.fetch_all(pool).await.map_err(err)?.into_iter().map(message));
        }
    }
    Ok(out)
}

pub(super) async fn delete(pool: &MySqlPool, ids: &[String]) -> Result<(), StoreError> {
    for (shard, ids) in by_table(ids) {
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let sql = with_ids("DELETE FROM {} WHERE id IN ({in})", &shard_table(shard), chunk.len());
            let mut q = sqlx::query(sql);
            for id in chunk {
                q = q.bind(*id);
            }
            q.execute(pool).await.map_err(err)?;
        }
    }
    Ok(())
}

#[async_trait]
impl Audit for MysqlStore {
    async fn count(&self) -> Result<u64, StoreError> {
        Ok(self.count_per_table().await?.iter().map(|(_, n)| n).sum())
    }

    async fn audit(&self, prefix: &str) -> Result<Vec<Audited>, StoreError> {
        audit(self.pool(), prefix).await
    }

    async fn fetch(&self, ids: &[String]) -> Result<Vec<Message>, StoreError> {
        fetch(self.pool(), ids).await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), StoreError> {
        delete(self.pool(), ids).await
    }

    async fn reset(&self) -> Result<(), StoreError> {
        self.prepare().await?;
        for shard in 0..SHARDS {
            sqlx::query(per_table("TRUNCATE TABLE {}", &shard_table(shard)))
                .execute(self.admin())
                .await
                .map_err(err)?;
        }
        Ok(())
    }
}
