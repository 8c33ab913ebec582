//! A test's (or a chaos run's) own MySQL database, next to the configured one (the stack grants
//! `pipeline%`); a chaos run reuses its database from one run to the next.

use super::args::MysqlArgs;
use super::store::MysqlStore;
use super::KIND;
use crate::{Fixture, StoreError};
use async_trait::async_trait;

fn fail(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::permanent_from(KIND, e)
}

#[async_trait]
impl Fixture for MysqlStore {
    async fn isolate(args: &mut MysqlArgs, namespace: &str, _slot: crate::Slot) -> Result<(), StoreError> {
        let mut url = url::Url::parse(&args.url).map_err(fail)?;
        let db = format!("{}_{namespace}", url.path().trim_start_matches('/'));
        let admin =
            sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(url.as_str()).await.map_err(fail)?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE IF NOT EXISTS `{db}`")))
            .execute(&admin)
            .await
            .map_err(fail)?;
        admin.close().await;
        url.set_path(&format!("/{db}"));
        args.url = url.to_string();
        Ok(())
    }
}
