//! A test's (or a chaos run's) own MySQL database, next to the configured one (the stack grants
//! `pipeline%`); a chaos run reuses its database from one run to the next.

use super::{MysqlArgs, MysqlStore};
use crate::{Fixture, StoreError, StoreKind};
use async_trait::async_trait;

#[async_trait]
impl Fixture for MysqlStore {
    async fn isolate(args: &mut MysqlArgs, namespace: &str, _slot: crate::Slot) -> Result<(), StoreError> {
        let fail = |e: &dyn std::fmt::Display| StoreError::permanent(StoreKind::Mysql, e);
        let mut url = url::Url::parse(&args.url).map_err(|e| fail(&e))?;
        let db = format!("{}_{namespace}", url.path().trim_start_matches('/'));
        let admin = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(1)
            .connect(url.as_str())
            .await
            .map_err(|e| fail(&e))?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE IF NOT EXISTS `{db}`")))
            .execute(&admin)
            .await
            .map_err(|e| fail(&e))?;
        admin.close().await;
        url.set_path(&format!("/{db}"));
        args.url = url.to_string();
        Ok(())
    }
}
