//! What the experiment's black-box tests share: a store namespace of their own and the
//! `experiment` command with the flags every test run needs (debug binaries, no build, no
//! stack start, private ports, a private lock).

use pipeline_testkit::{bin_path, free_port, k6_bin, require_servers};
use std::path::Path;
use std::process::Command;

/// One test's namespace on the shared servers: a MySQL database, ES index, Mongo database, Kafka
/// topic, group and dead-letter topic named for this run, and a Redis database no other suite
/// uses (the private lock of [`experiment`] keeps two copies of one test from sharing it).
pub struct RunNamespace {
    pub name: String,
    /// The stack's MySQL URL, pointed at this run's database (made here).
    pub mysql: url::Url,
    pub redis: url::Url,
    pub brokers: String,
}

impl RunNamespace {
    pub async fn new(prefix: &str, redis_db: u8) -> RunNamespace {
        let (stores, kafka) = require_servers().await;
        let name = format!("{prefix}_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
        let mut mysql = url::Url::parse(&stores.mysql.url).expect("MYSQL_URL is a URL");
        let db = format!("{}_{name}", mysql.path().trim_start_matches('/'));
        let admin =
            sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(mysql.as_str()).await.expect("mysql");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{db}`"))).execute(&admin).await.expect("create db");
        mysql.set_path(&format!("/{db}"));
        let mut redis = url::Url::parse(&stores.redis.url).expect("REDIS_URL is a URL");
        redis.set_path(&format!("/{redis_db}"));
        RunNamespace { name, mysql, redis, brokers: kafka.brokers }
    }

    /// The environment that points the experiment (and every process it starts) here.
    pub fn env(&self) -> Vec<(String, String)> {
        let name = &self.name;
        let key = pipeline_testkit::api_key();
        [
            ("KAFKA_BROKERS", self.brokers.clone()),
            ("KAFKA_TOPIC", name.clone()),
            ("KAFKA_GROUP", format!("{name}_group")),
            ("WRITER_DLQ_TOPIC", format!("{name}.dlq")),
            ("INGEST_AUTH_KEYS", key.keys_file.display().to_string()),
            ("INGEST_KEY_FILE", key.token_file.display().to_string()),
            ("MYSQL_URL", self.mysql.to_string()),
            ("REDIS_URL", self.redis.to_string()),
            ("ES_INDEX", name.clone()),
            ("MONGO_DB", name.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// `experiment` with the flags every test run needs, its evidence in `out`. Its lock is not the
/// machine-wide load lock (CI runs these tests beside other suites): it only keeps two copies of
/// one test off the same Redis database.
/// `sub` is the subcommand (`["soak"]`, or none for a plan run): it comes before the flags.
pub fn experiment(sub: &[&str], out: &Path) -> Command {
    let bins = bin_path("writer").parent().expect("bin dir").to_path_buf();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("workspace root").to_path_buf();
    let cache = std::env::var("PIPELINE_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/pipeline", std::env::var("HOME").unwrap_or_default()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_experiment"));
    cmd.args(sub);
    cmd.args(["--profile", "debug", "--no-build", "--no-stack"])
        .arg("--bin-dir")
        .arg(bins)
        .arg("--k6")
        .arg(k6_bin())
        .arg("--root")
        .arg(root)
        .arg("--out")
        .arg(out)
        .args(["--ingest-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--writer-metrics-addr", &format!("127.0.0.1:{}", free_port())])
        .arg("--lock")
        .arg(format!("{cache}/experiment-test.lock"));
    cmd
}
