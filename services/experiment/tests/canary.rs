//! No secret in any output: the main job (one experiment round: writer, ingest, k6, reconcile,
//! the report) runs with a distinctive MySQL password, a canary, given inline in `MYSQL_URL` and
//! as a Kafka option; afterwards the canary must appear in no evidence file, no process log, no
//! `--help` of any binary and no error text. The lab Redis's password (in `REDIS_URL`, from
//! scripts/lib.sh) is held to the same rule.
//!
//! The canary user (`pipeline_canary`, a lab-only account with this fixed password) is made by
//! `scripts/stack up`.

mod support;

use pipeline_testkit::{bin_path, free_port};
use std::path::Path;
use std::process::Command;
use support::{experiment, RunNamespace};

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
    // A private namespace; its database is made by the stack's usual user, and the canary user
    // may use it.
    let ns = RunNamespace::new("t_canary", 7).await;
    let mut mysql = ns.mysql.clone();
    let _ = mysql.set_username("pipeline_canary");
    let _ = mysql.set_password(Some(CANARY));
    let mut secrets = vec![CANARY.to_string()];
    secrets.extend(ns.redis.password().filter(|p| p.len() >= 8).map(str::to_string));
    let mut env = ns.env();
    env.retain(|(k, _)| k != "MYSQL_URL");
    env.push(("MYSQL_URL".into(), mysql.to_string()));
    // A secret-looking option the client accepts (and ignores without SASL).
    env.push(("KAFKA_OPTIONS".into(), format!("sasl.password={CANARY}")));
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
    let run = experiment(&[], &out_dir)
        .args(["--policies", "C", "--rounds", "1", "--vus", "4", "--duration", "3s", "--warmup", "0"])
        .args(["--drain-timeout", "60"])
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
