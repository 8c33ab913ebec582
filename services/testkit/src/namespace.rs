//! A private namespace per test on the shared servers, and the environment that points a
//! service at it.

use crate::{api_key, require_servers, RedisDb};
use pipeline_common::config::KafkaArgs;
use pipeline_common::reconcile_report::Answer;
use pipeline_stores::{Store, StoreArgs, StoreKind};
use std::sync::Arc;

/// A private namespace for one test: in every store what its fixture provides (its own MySQL
/// database, ES index, Mongo database; a Redis database leased for the namespace's life,
/// emptied), and its own Kafka topic and group, so tests, test binaries running side by side and
/// earlier runs never see each other's data.
pub struct Namespace {
    pub stores: StoreArgs,
    pub kafka: KafkaArgs,
    pub name: String,
    /// Held, not read: the Redis database stays this namespace's until it is dropped.
    _redis_db: RedisDb,
}

impl Namespace {
    pub async fn new(label: &str) -> Namespace {
        let (mut stores, mut kafka) = require_servers().await;
        let name = format!("t_{label}_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
        let redis_db = RedisDb::lease(&stores.redis.url);
        // Each store's fixture (services/stores/src/<store>/fixture.rs) makes its part private.
        pipeline_stores::isolate(&mut stores, &name, redis_db.slot()).await.unwrap_or_else(|e| {
            panic!("a private namespace in every store: {e} (Redis needs `databases 64`: scripts/stack up restarts an older one)")
        });
        kafka.topic = name.clone();
        kafka.group = format!("{name}_group");
        pipeline_common::kafka::ensure_topic(&kafka, &kafka.topic, kafka.partitions).await.expect("create topic");
        Namespace { stores, kafka, name, _redis_db: redis_db }
    }

    /// Connects to all four stores of this namespace without preparing them (a test that runs an
    /// older build's binaries lets them create the schema they know first).
    pub async fn connect_stores(&self) -> Vec<Arc<dyn Store>> {
        pipeline_stores::connect(&self.stores, &StoreKind::ALL).await.expect("connect stores")
    }

    /// Connects to all four stores of this namespace and prepares them.
    pub async fn stores(&self) -> Vec<Arc<dyn Store>> {
        let all = pipeline_stores::connect(&self.stores, &StoreKind::ALL).await.expect("connect stores");
        for s in &all {
            s.prepare().await.expect("prepare store");
        }
        all
    }
}

/// The environment that points a service at this namespace.
impl Namespace {
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("KAFKA_BROKERS", self.kafka.brokers.clone()),
            ("KAFKA_TOPIC", self.kafka.topic.clone()),
            ("KAFKA_GROUP", self.kafka.group.clone()),
            ("KAFKA_PARTITIONS", self.kafka.partitions.to_string()),
            ("INGEST_AUTH", "keys".to_string()),
            ("INGEST_AUTH_KEYS", api_key().keys_file.display().to_string()),
            ("INGEST_KEY_FILE", api_key().token_file.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain(self.stores.env())
        .collect()
    }

    /// Runs `reconcile --json --drain-timeout SECS ARGS` in this namespace (its dead-letter topic
    /// is `<namespace>.dlq`); returns (exit code, its answer as reconcile's report types).
    pub fn reconcile(&self, drain_secs: u64, args: &[&str]) -> (i32, Answer) {
        let out = std::process::Command::new(crate::bin_path("reconcile"))
            .arg("--json")
            .args(["--drain-timeout", &drain_secs.to_string()])
            .args(args)
            .envs(self.env())
            .env("WRITER_DLQ_TOPIC", format!("{}.dlq", self.name))
            .output()
            .expect("run reconcile");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json = Answer::parse(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout} / {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().expect("exit code"), json)
    }
}
