//! No secret in any output: the main job (one experiment round: writer, ingest, k6, reconcile,
//! the report) runs with a distinctive MySQL password, a canary, given inline in `MYSQL_URL` and
//! as a Kafka option; afterwards the canary must appear in no evidence file, no process log, no
//! `--help` of any binary and no error text. The lab Redis's password (in `REDIS_URL`, from
//! scripts/lib.sh) is held to the same rule.
//!
//! The canary user (`pipeline_canary`, a lab-only account with this fixed password) is made by
//! `scripts/stack up`.

use pipeline_testkit::{bin_path, free_port, k6_bin, require_servers};
use std::path::Path;
use std::process::Command;

const CANARY: &str = "canary-Zq7vX3kP9w";

/// Whether `text` holds one of `secrets`.
fn leaks(text: &[u8], secrets: &[String]) -> bool {
    let text = String::from_utf8_lossy(text);
    secrets.iter().any(|s| text.contains(s.as_str()))
}

fn scan(dir: &Path, secrets: &[String], hits: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            scan(&p, secrets, hits);
        } else if let Ok(bytes) = std::fs::read(&p) {
            if leaks(&bytes, secrets) {
                hits.push(p.display().to_string());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_canary_password_appears_in_no_output() {
    let (stores, kafka) = require_servers().await;
    let name = format!("t_canary_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    // A private database, made by the stack's usual user; the canary user may use it.
    let base = url::Url::parse(&stores.mysql.url).expect("MYSQL_URL");
    let db = format!("{}_{name}", base.path().trim_start_matches('/'));
    let admin = sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(base.as_str()).await.expect("mysql");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{db}`"))).execute(&admin).await.expect("create db");
    let mut mysql = base.clone();
    mysql.set_path(&format!("/{db}"));
    let _ = mysql.set_username("pipeline_canary");
    let _ = mysql.set_password(Some(CANARY));
    let mut redis = url::Url::parse(&stores.redis.url).expect("REDIS_URL");
    redis.set_path("/7");
    let mut secrets = vec![CANARY.to_string()];
    secrets.extend(redis.password().filter(|p| p.len() >= 8).map(str::to_string));
    let key = pipeline_testkit::api_key();
    let env: Vec<(&str, String)> = vec![
        ("MYSQL_URL", mysql.to_string()),
        ("REDIS_URL", redis.to_string()),
        ("ES_INDEX", name.clone()),
        ("MONGO_DB", name.clone()),
        ("KAFKA_BROKERS", kafka.brokers.clone()),
        ("KAFKA_TOPIC", name.clone()),
        ("KAFKA_GROUP", format!("{name}_group")),
        ("WRITER_DLQ_TOPIC", format!("{name}.dlq")),
        // A secret-looking option the client accepts (and ignores without SASL).
        ("KAFKA_OPTIONS", format!("sasl.password={CANARY}")),
        ("INGEST_AUTH_KEYS", key.keys_file.display().to_string()),
        ("INGEST_KEY_FILE", key.token_file.display().to_string()),
    ];
    let mut hits = Vec::new();
    // --help of every binary, with the canary in its environment.
    for bin in ["writer", "ingest", "reconcile", "experiment"] {
        let out = Command::new(bin_path(bin)).arg("--help").envs(env.iter().cloned()).output().expect("--help");
        if leaks(&out.stdout, &secrets) {
            hits.push(format!("{bin} --help"));
        }
    }
    // Error text: a store that does not answer.
    let mut dead = mysql.clone();
    let _ = dead.set_port(Some(free_port()));
    let out = Command::new(bin_path("reconcile"))
        .args(["--drain-timeout", "1", "count"])
        .envs(env.iter().cloned())
        .env("MYSQL_URL", dead.to_string())
        .output()
        .expect("reconcile");
    assert!(!out.status.success(), "reconcile against a dead MySQL fails");
    if leaks(&out.stderr, &secrets) || leaks(&out.stdout, &secrets) {
        hits.push("reconcile's error text".into());
    }
    // The main job: one round, its evidence and every process's log.
    let out_dir = std::env::temp_dir().join(format!("canary-{}", uuid::Uuid::now_v7().simple()));
    let bins = bin_path("writer").parent().expect("bin dir").to_path_buf();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("root").to_path_buf();
    let cache = std::env::var("PIPELINE_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/pipeline", std::env::var("HOME").unwrap_or_default()));
    let run = Command::new(env!("CARGO_BIN_EXE_experiment"))
        .args(["--policies", "C", "--rounds", "1", "--vus", "4", "--duration", "3s", "--warmup", "0"])
        .args(["--profile", "debug", "--no-build", "--no-stack", "--drain-timeout", "60"])
        .arg("--bin-dir")
        .arg(&bins)
        .arg("--k6")
        .arg(k6_bin())
        .arg("--root")
        .arg(&root)
        .arg("--out")
        .arg(&out_dir)
        .args(["--ingest-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--writer-metrics-addr", &format!("127.0.0.1:{}", free_port())])
        .arg("--lock")
        .arg(format!("{cache}/experiment-test.lock"))
        .envs(env.iter().cloned())
        .env("RUST_LOG", "debug")
        .output()
        .expect("experiment runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "the round is valid: {}", &stderr[stderr.len().saturating_sub(2000)..]);
    if leaks(&run.stdout, &secrets) || leaks(&run.stderr, &secrets) {
        hits.push("the experiment's own output".into());
    }
    scan(&out_dir, &secrets, &mut hits);
    assert!(hits.is_empty(), "a password ({} checked) appears in: {hits:#?}", secrets.len());
}
