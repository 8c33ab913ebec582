//! Least privilege in MySQL: the writer's user may only SELECT, INSERT and UPDATE
//! (`pipeline_writer`, made by `scripts/stack up`); the schema and resets go through
//! `--mysql-admin-url`. Without the admin URL such a user cannot migrate (refused by the server);
//! with it, everything works and the user itself still cannot change the schema.

use pipeline_common::message::shard_table;
use pipeline_stores::mysql::{MysqlArgs, MysqlStore};
use pipeline_stores::{Audit, Backend, Overwrite, Sink};
use pipeline_testkit::{exclusive, messages, Namespace};

#[tokio::test]
async fn a_writer_user_without_ddl_writes_and_the_admin_url_changes_the_schema() {
    let _g = exclusive().await;
    let ns = Namespace::new("priv").await;
    let admin = ns.stores.mysql.url.clone();
    let mut dml = url::Url::parse(&admin).expect("url");
    let _ = dml.set_username("pipeline_writer");
    let args = |admin_url: Option<String>| MysqlArgs {
        url: dml.to_string(),
        url_file: None,
        admin_url,
        admin_url_file: None,
        pool: 2,
    };
    let alone = MysqlStore::connect(&args(None)).await.expect("the writer's user connects");
    let e = alone.prepare().await.expect_err("it cannot create the tables").to_string();
    assert!(e.contains("1142") || e.contains("denied"), "refused by the server: {e}");
    let store = MysqlStore::connect(&args(Some(admin))).await.expect("connect");
    store.prepare().await.expect("the admin URL migrates");
    let batch = messages(10, "priv");
    assert!(store.write(&batch, Overwrite::Older).await.unwrap().is_empty(), "the writer's user writes");
    assert!(store.write(&batch, Overwrite::Older).await.unwrap().is_empty(), "and updates (a redelivery)");
    assert_eq!(store.count().await.unwrap(), 10);
    let drop = sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE {}", shard_table(0)))).execute(store.pool()).await;
    assert!(drop.is_err(), "the writer's user cannot drop a table");
    store.reset().await.expect("reset goes through the admin URL");
    assert_eq!(store.count().await.unwrap(), 0);
}

/// The lab's Redis asks for a password (scripts/lib.sh makes it, scripts/stack gives it to
/// redis-server in a config file): the same URL without it is refused.
#[tokio::test]
async fn the_lab_redis_refuses_a_client_without_its_password() {
    let ns = Namespace::new("priv_redis").await;
    let with = ns.stores.redis.connection_url().expect("REDIS_URL");
    let mut without = url::Url::parse(&with).expect("url");
    assert!(without.password().is_some(), "the lab's REDIS_URL carries a password (source scripts/lib.sh)");
    let _ = without.set_password(None);
    let client = redis::Client::open(without.as_str()).expect("a URL");
    let refused = match client.get_multiplexed_async_connection().await {
        Ok(mut c) => redis::cmd("PING").query_async::<String>(&mut c).await.map(|_| ()),
        Err(e) => Err(e),
    };
    let e = refused.expect_err("no password, no PING").to_string();
    assert!(e.contains("NOAUTH") || e.contains("uthentication"), "refused for want of a password: {e}");
    let mut c =
        redis::Client::open(with.as_str()).expect("url").get_multiplexed_async_connection().await.expect("with it");
    assert_eq!(redis::cmd("PING").query_async::<String>(&mut c).await.expect("PING"), "PONG");
}
