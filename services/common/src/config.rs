//! Connection settings shared by ingest, writer, reconcile and the tests.
//!
//! Every address and credential is a flag with an environment variable behind it; the defaults
//! are the native stack's (`scripts/stack`) and `.env.example` documents them all. Services
//! `#[command(flatten)]` the groups they need, so one variable means the same thing everywhere.

use clap::Args;
use std::time::Duration;

/// Kafka (tansu here, Apache Kafka under compose).
#[derive(Debug, Clone, Args)]
pub struct KafkaArgs {
    /// Bootstrap brokers, comma separated.
    #[arg(id = "kafka-brokers", long = "kafka-brokers", env = "KAFKA_BROKERS", default_value = "localhost:9092")]
    pub brokers: String,
    /// Topic carrying the messages.
    #[arg(id = "kafka-topic", long = "kafka-topic", env = "KAFKA_TOPIC", default_value = "messages")]
    pub topic: String,
    /// Partitions the topic is created with when missing (the seed used 4).
    #[arg(id = "kafka-partitions", long = "kafka-partitions", env = "KAFKA_PARTITIONS", default_value_t = 4)]
    pub partitions: i32,
    /// Consumer group of the writers; reconcile reads its lag.
    #[arg(id = "kafka-group", long = "kafka-group", env = "KAFKA_GROUP", default_value = "writers")]
    pub group: String,
}

/// MySQL / MariaDB, the system of record.
#[derive(Debug, Clone, Args)]
pub struct MysqlArgs {
    /// Connection URL (database included).
    #[arg(
        id = "mysql-url",
        long = "mysql-url",
        env = "MYSQL_URL",
        default_value = "mysql://pipeline:pipeline@127.0.0.1:3306/pipeline"
    )]
    pub url: String,
    /// Connections in the pool.
    #[arg(id = "mysql-pool", long = "mysql-pool", env = "MYSQL_POOL", default_value_t = 8)]
    pub pool: u32,
}

#[derive(Debug, Clone, Args)]
pub struct RedisArgs {
    /// Connection URL (database number as the path).
    #[arg(id = "redis-url", long = "redis-url", env = "REDIS_URL", default_value = "redis://127.0.0.1:6379/0")]
    pub url: String,
}

/// Elasticsearch or OpenSearch (ES 7.10 API and later).
#[derive(Debug, Clone, Args)]
pub struct EsArgs {
    /// Base URL of the Elasticsearch / OpenSearch HTTP API.
    #[arg(id = "es-url", long = "es-url", env = "ES_URL", default_value = "http://127.0.0.1:9200")]
    pub url: String,
    /// Index holding the messages (created with its mapping when missing).
    #[arg(id = "es-index", long = "es-index", env = "ES_INDEX", default_value = "messages")]
    pub index: String,
    /// Per-request timeout, in milliseconds.
    #[arg(id = "es-timeout-ms", long = "es-timeout-ms", env = "ES_TIMEOUT_MS", default_value_t = 30_000)]
    pub timeout_ms: u64,
}

impl EsArgs {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

#[derive(Debug, Clone, Args)]
pub struct MongoArgs {
    /// Connection URL.
    #[arg(id = "mongo-url", long = "mongo-url", env = "MONGO_URL", default_value = "mongodb://127.0.0.1:27017")]
    pub url: String,
    /// Database holding the messages.
    #[arg(id = "mongo-db", long = "mongo-db", env = "MONGO_DB", default_value = "pipeline")]
    pub database: String,
    /// Collection holding the messages.
    #[arg(id = "mongo-collection", long = "mongo-collection", env = "MONGO_COLLECTION", default_value = "messages")]
    pub collection: String,
}

/// All four stores, for the services that talk to every one of them.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub mysql: MysqlArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub es: EsArgs,
    #[command(flatten)]
    pub mongo: MongoArgs,
}

impl StoreArgs {
    /// The defaults, as a service would see them with no flags (environment still applies).
    pub fn from_env() -> Self {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            s: StoreArgs,
        }
        <P as clap::Parser>::parse_from(["env"]).s
    }
}

impl KafkaArgs {
    /// The defaults, as a service would see them with no flags (environment still applies).
    pub fn from_env() -> Self {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            k: KafkaArgs,
        }
        <P as clap::Parser>::parse_from(["env"]).k
    }
}
