//! Helpers for the integration tests of every crate (feature `testkit`).
//!
//! The tests talk to the real servers that `scripts/stack up` starts. A missing server is a
//! failed test with the server's name in the message, never a skipped one.

use crate::config::{KafkaArgs, StoreArgs};
use crate::stores::{self, Store, StoreKind};
use std::sync::{Arc, Mutex, MutexGuard};

static EXCLUSIVE: Mutex<()> = Mutex::new(());

/// Serialises the tests of one test binary that share Redis (its keyspace cannot be namespaced
/// without changing the `msg:` key format). Hold the guard for the whole test.
pub fn exclusive() -> MutexGuard<'static, ()> {
    EXCLUSIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Checks that every server answers a real request; panics naming each one that does not.
pub async fn require_servers() -> (StoreArgs, KafkaArgs) {
    let stores = StoreArgs::from_env();
    let kafka = KafkaArgs::from_env();
    let mut missing = Vec::new();
    match stores::connect(&stores, &StoreKind::ALL).await {
        Ok(all) => {
            for s in all {
                if let Err(e) = s.prepare().await {
                    missing.push(format!("{} ({e})", s.kind()));
                }
            }
        }
        Err(e) => missing.push(format!("{} ({e})", e.store)),
    }
    let k = kafka.clone();
    let meta = tokio::task::spawn_blocking(move || crate::kafka::partition_count(&k, "__probe")).await.expect("join");
    if let Err(e) = meta {
        missing.push(format!("kafka at {} ({e})", kafka.brokers));
    }
    if !missing.is_empty() {
        panic!(
            "integration servers not answering: {}. Start them with `scripts/stack up` \
             (addresses come from the environment, see .env.example).",
            missing.join("; ")
        );
    }
    (stores, kafka)
}

/// A private namespace for one test: its own MySQL database, ES index, Mongo database and Kafka
/// topic and group, so tests and earlier runs never see each other's data. Redis uses database 1,
/// flushed here (callers hold [`exclusive`]).
pub struct Namespace {
    pub stores: StoreArgs,
    pub kafka: KafkaArgs,
    pub name: String,
}

impl Namespace {
    pub async fn new(label: &str) -> Namespace {
        let (mut stores, mut kafka) = require_servers().await;
        let name = format!("t_{label}_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
        // MySQL: a fresh database next to the configured one (the stack grants `pipeline%`).
        let base = url::Url::parse(&stores.mysql.url).expect("MYSQL_URL is a URL");
        let db = format!("{}_{name}", base.path().trim_start_matches('/'));
        let admin = sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(base.as_str()).await.expect("mysql");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{db}`"))).execute(&admin).await.expect("create db");
        let mut url = base.clone();
        url.set_path(&format!("/{db}"));
        stores.mysql.url = url.to_string();
        // Redis: database 1, empty.
        let mut rurl = url::Url::parse(&stores.redis.url).expect("REDIS_URL is a URL");
        rurl.set_path("/1");
        stores.redis.url = rurl.to_string();
        let client = redis::Client::open(stores.redis.url.as_str()).expect("redis url");
        let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
        let _: () = redis::cmd("FLUSHDB").query_async(&mut conn).await.expect("flushdb");
        stores.es.index = name.clone();
        stores.mongo.database = name.clone();
        kafka.topic = name.clone();
        kafka.group = format!("{name}_group");
        Namespace { stores, kafka, name }
    }

    /// Connects to all four stores of this namespace and prepares them.
    pub async fn stores(&self) -> Vec<Arc<dyn Store>> {
        let all = stores::connect(&self.stores, &StoreKind::ALL).await.expect("connect stores");
        for s in &all {
            s.prepare().await.expect("prepare store");
        }
        all
    }
}
