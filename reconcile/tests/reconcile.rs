//! reconcile against the real stores (seeded gaps it must report exactly), and the whole
//! pipeline end to end: k6 → ingest → tansu → writer → four stores → reconcile.

use pipeline_common::message::{shard_of, shard_table};
use pipeline_common::reconcile_report::{names, ErrorKind, Level, TotalsReport};
use pipeline_stores::StoreKind;
use pipeline_testkit::{exclusive, free_port, messages, Child, Namespace};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

fn dlq_topic(ns: &Namespace) -> String {
    format!("{}.dlq", ns.name)
}

fn count_of(report: &TotalsReport, store: &str) -> u64 {
    report.store(store).unwrap().count
}

#[tokio::test]
async fn seeded_gaps_are_reported_exactly_and_reset_empties_everything() {
    let _g = exclusive().await;
    let ns = Namespace::new("recon").await;
    let stores = ns.stores().await;
    let batch = messages(100, "g");
    for s in &stores {
        let part = if s.kind() == StoreKind::Es { &batch[..99] } else { &batch[..] };
        s.write(part, pipeline_stores::Overwrite::Older).await.unwrap();
    }
    // An extra Redis key nobody injected.
    let extra = messages(1, "extra");
    stores
        .iter()
        .find(|s| s.kind() == StoreKind::Redis)
        .unwrap()
        .write(&extra, pipeline_stores::Overwrite::Older)
        .await
        .unwrap();
    // One id copied into a second, wrong, shard table.
    let dup = &batch[0];
    let wrong = shard_table((shard_of(&dup.id) + 1) % 16);
    pipeline_testkit::copy_into_wrong_shard(&ns, &dup.id).await;

    let (code, report) = ns.reconcile(60, &["count", "--expect", "100"]);
    assert_eq!(code, 1, "{report}");
    let report = report.totals().unwrap_or_else(|| panic!("a totals report: {report}"));
    assert!(!report.ok);
    assert_eq!(
        [count_of(report, "mysql"), count_of(report, "redis"), count_of(report, "es"), count_of(report, "mongo")],
        [101, 101, 99, 100]
    );

    let ids = std::env::temp_dir().join(format!("{}.ids", ns.name));
    std::fs::write(&ids, batch.iter().map(|m| format!("{}\n", m.id)).collect::<String>()).unwrap();
    let (code, diff) = ns.reconcile(60, &["diff", "--ids", ids.to_str().unwrap()]);
    assert_eq!(code, 1);
    let diff = diff.check().unwrap_or_else(|| panic!("a check report: {diff}"));
    let classes = &diff.classes;
    let nonzero: Vec<(&str, u64)> =
        classes.iter().map(|(k, v)| (k.as_str(), v.total)).filter(|(_, n)| *n > 0).collect();
    assert_eq!(
        nonzero,
        [("duplicated (mysql)", 1), ("extra in redis", 1), ("missing from es", 1), ("wrong shard (mysql)", 1)],
        "{diff}"
    );
    let first = |name: String| diff.class(&name).unwrap().examples[0].clone();
    assert_eq!(first(names::missing("es")), batch[99].id.as_str());
    assert_eq!(first(names::extra("redis")), extra[0].id.as_str());
    assert_eq!(first(names::duplicated("mysql")), dup.id.as_str());
    assert_eq!(first(names::wrong_shard("mysql")), format!("{} in {wrong}", dup.id).as_str());

    let (code, refused) = ns.reconcile(60, &["reset"]);
    assert_eq!(
        (code, refused.error().map(|e| e.error)),
        (2, Some(ErrorKind::BadInput)),
        "no reset without --yes: {refused}"
    );
    let (code, reset) = ns.reconcile(60, &["reset", "--yes"]);
    assert_eq!(code, 0, "{reset}");
    let (code, report) = ns.reconcile(60, &["count", "--expect", "0"]);
    assert_eq!(code, 0, "{report}");
    let (code, _) = ns.reconcile(60, &["count", "--expect-from", "/nonexistent/summary.json"]);
    assert_eq!(code, 2, "bad input has its own exit code");
}

async fn wait_ready(url: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = reqwest::get(url).await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(child.0.try_wait().unwrap().is_none(), "service exited before {url} answered");
        assert!(Instant::now() < deadline, "{url} not ready in 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn end_to_end_k6_closed_loop_reconciles() {
    let _g = exclusive().await;
    let ns = Namespace::new("e2e").await;
    let (ingest_port, metrics_port) = (free_port(), free_port());
    let mut writer = ns.spawn(
        "writer",
        &[],
        &[("WRITER_METRICS_ADDR", format!("127.0.0.1:{metrics_port}")), ("WRITER_DLQ_TOPIC", dlq_topic(&ns))],
    );
    let mut ingest = ns.spawn("ingest", &[], &[("INGEST_LISTEN", format!("127.0.0.1:{ingest_port}"))]);
    wait_ready(&format!("http://127.0.0.1:{ingest_port}/readyz"), &mut ingest).await;
    wait_ready(&format!("http://127.0.0.1:{metrics_port}/healthz"), &mut writer).await;

    let summary = std::env::temp_dir().join(format!("{}.summary.json", ns.name));
    let id_log = std::env::temp_dir().join(format!("{}.summary.ids", ns.name));
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let k6 = Command::new(pipeline_testkit::k6_bin())
        .current_dir(root)
        .args(["run", "-q", "k6/closed-loop.js"])
        .env("INGEST_URL", format!("http://127.0.0.1:{ingest_port}"))
        .env("SUMMARY_FILE", &summary)
        .env("K6_CONSOLE_OUTPUT", &id_log)
        .env("K6_LOG_FORMAT", "raw")
        .env("VUS", "20")
        .env("DURATION", "10s")
        .env("WARMUP_ROUNDS", "1")
        .env("WARMUP", "3s")
        .env("K6_NO_USAGE_REPORT", "true")
        .env("INGEST_KEY_FILE", &pipeline_testkit::api_key().token_file)
        .output()
        .expect("run k6");
    assert!(
        k6.status.success(),
        "k6 failed: {}{}",
        String::from_utf8_lossy(&k6.stdout),
        String::from_utf8_lossy(&k6.stderr)
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["ok"], true, "{s}");
    assert!(s["accepted"].as_u64().unwrap() > 1000, "a real load was injected: {s}");

    let (code, report) = ns.reconcile(60, &["count", "--expect-from", summary.to_str().unwrap()]);
    assert_eq!(code, 0, "every 202 is in every store exactly once: {report}");
    assert_eq!(report.level(), Some(Level::Ids), "checked id by id, not by totals: {report}");
    let (code, diff) = ns.reconcile(60, &["diff", "--expect-from", summary.to_str().unwrap()]);
    assert_eq!(code, 0, "{diff}");
}

/// A drain timeout no clock can hold is bad input (exit 2, the flag named), not a panic: it was
/// accepted, the stores connected, and the deadline's `Instant + Duration` overflowed (exit 101).
#[tokio::test]
async fn a_drain_timeout_beyond_any_clock_is_refused_as_bad_input() {
    let ns = Namespace::new("drainmax").await;
    let out = Command::new(pipeline_testkit::bin_path("reconcile"))
        .args(["--drain-timeout", &u64::MAX.to_string(), "count", "--expect", "0"])
        .envs(ns.env())
        .output()
        .expect("run reconcile");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--drain-timeout"), "{stderr}");
}
