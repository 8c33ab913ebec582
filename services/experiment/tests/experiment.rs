//! A short experiment end to end against the real servers: 2 policies × 2 rounds of a few
//! seconds, debug binaries, a private store namespace and private ports. Round 3 is broken on
//! purpose (the writer SIGKILLed halfway and not restarted): the gates must mark exactly that
//! round invalid, for the right reasons, and `experiment report` must judge the evidence alone the
//! same way.

use pipeline_testkit::{bin_path, free_port, k6_bin, require_servers};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The test's own store namespace: a MySQL database, ES index, Mongo database, Kafka topic, group
/// and dead-letter topic named for this run, and a Redis database no other suite uses (6; the
/// lock below keeps two copies of this test from sharing it).
async fn namespace() -> Vec<(String, String)> {
    let (stores, kafka) = require_servers().await;
    let name = format!("t_exp_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    let base = url::Url::parse(&stores.mysql.url).expect("MYSQL_URL is a URL");
    let db = format!("{}_{name}", base.path().trim_start_matches('/'));
    let admin = sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(base.as_str()).await.expect("mysql");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{db}`"))).execute(&admin).await.expect("create db");
    let mut mysql = base.clone();
    mysql.set_path(&format!("/{db}"));
    let mut redis = url::Url::parse(&stores.redis.url).expect("REDIS_URL is a URL");
    redis.set_path("/6");
    [
        ("KAFKA_BROKERS", kafka.brokers.clone()),
        ("KAFKA_TOPIC", name.clone()),
        ("KAFKA_GROUP", format!("{name}_group")),
        ("WRITER_DLQ_TOPIC", format!("{name}.dlq")),
        ("INGEST_AUTH_KEYS", pipeline_testkit::api_key().keys_file.display().to_string()),
        ("INGEST_KEY_FILE", pipeline_testkit::api_key().token_file.display().to_string()),
        ("MYSQL_URL", mysql.to_string()),
        ("REDIS_URL", redis.to_string()),
        ("ES_INDEX", name.clone()),
        ("MONGO_DB", name.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("workspace root").to_path_buf()
}

fn verdicts(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("verdicts.json")).expect("verdicts.json written");
    serde_json::from_str::<Value>(&text).expect("verdicts.json is JSON").as_array().cloned().expect("an array")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_experiment_marks_the_broken_round_invalid_and_only_that_one() {
    let env = namespace().await;
    let bins = bin_path("writer").parent().expect("bin dir").to_path_buf();
    let out = std::env::temp_dir().join(format!("experiment-test-{}", uuid::Uuid::now_v7().simple()));
    let cache = std::env::var("PIPELINE_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/pipeline", std::env::var("HOME").unwrap_or_default()));
    let started = std::time::Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_experiment"))
        .args(["--policies", "A,C", "--rounds", "2", "--vus", "4", "--duration", "3s", "--warmup", "0"])
        .args(["--fault", "3:kill-writer", "--drain-timeout", "15"])
        .args(["--profile", "debug", "--no-build", "--no-stack"])
        .arg("--bin-dir")
        .arg(&bins)
        .arg("--k6")
        .arg(k6_bin())
        .arg("--root")
        .arg(workspace_root())
        .arg("--out")
        .arg(&out)
        .args(["--ingest-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--writer-metrics-addr", &format!("127.0.0.1:{}", free_port())])
        // Not the machine-wide load lock: CI runs this beside other suites; this lock only keeps
        // two copies of this test off the same Redis database.
        .arg("--lock")
        .arg(format!("{cache}/experiment-test.lock"))
        .envs(env)
        .env("RUST_LOG", "info")
        .status()
        .expect("experiment runs");
    eprintln!("experiment took {:.0} s; evidence in {}", started.elapsed().as_secs_f64(), out.display());
    assert_eq!(status.code(), Some(1), "exit 1: a round is invalid");

    let v = verdicts(&out);
    assert_eq!(v.len(), 4, "four rounds: {v:#?}");
    for r in &v {
        let name = r["round"].as_str().unwrap_or_default();
        let reasons = r["reasons"].as_str().unwrap_or_default();
        if name.starts_with("03-") {
            assert_eq!(r["valid"], false, "the broken round is invalid: {r:#}");
            assert!(reasons.contains("reconcile: not drained"), "reconcile names the lag: {reasons}");
            assert!(reasons.contains("boot-ids: writer"), "the dead writer is seen: {reasons}");
        } else {
            assert_eq!(r["valid"], true, "round {name} is valid: {reasons}");
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(report.contains("**3 of 4 rounds valid.**"), "{report}");
    assert!(report.contains("| A | 4 | 1/2 |"), "A's median uses its one valid round: {report}");
    if Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        for chart in ["throughput.png", "latency.png", "cpu.png", "pool-A.png", "pool-C.png"] {
            assert!(out.join(chart).exists(), "{chart} drawn");
        }
    }

    // The evidence alone gives the same judgement.
    std::fs::remove_file(out.join("verdicts.json")).expect("remove verdicts.json");
    let st = Command::new(env!("CARGO_BIN_EXE_experiment")).arg("report").arg(&out).status().expect("report runs");
    assert_eq!(st.code(), Some(1), "report exits 1 too");
    let again: Vec<(Value, Value)> = verdicts(&out).iter().map(|r| (r["round"].clone(), r["valid"].clone())).collect();
    let first: Vec<(Value, Value)> = v.iter().map(|r| (r["round"].clone(), r["valid"].clone())).collect();
    assert_eq!(again, first);
    let _ = std::fs::remove_dir_all(&out);
}
