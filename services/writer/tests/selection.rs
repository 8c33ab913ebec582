//! `--stores`: a deployment without some optional stores. A writer and a reconcile given MySQL,
//! Redis and Elasticsearch store and judge exactly those three, with MongoDB's address pointing
//! at a port nothing listens on (so a single connection attempt would stop them); a list naming
//! a store the registry lacks, or leaving MySQL out, stops the writer and reconcile at startup
//! with the reason.

mod support;

use pipeline_stores::{Store, StoreKind};
use pipeline_testkit::{assert_exact_ids, assert_same_content, exclusive, free_port, wait_for_counts, Service};
use std::sync::Arc;
use std::time::Duration;
use support::{Run, DRAIN};

/// The selection as a user writes it: labels or names, any case.
const THREE: &str = "mysql,Redis,elasticsearch";

#[tokio::test]
async fn three_stores_are_written_and_reconciled_exactly_without_the_fourth() {
    let _g = exclusive().await;
    let mut run = Run::new("sel3").await;
    // MongoDB is left out: its address is a closed port, so any attempt to reach it fails.
    run.ns.stores.mongo.url = format!("mongodb://127.0.0.1:{}/?connectTimeoutMS=500", free_port());
    let mongo = run.stores.iter().find(|s| s.kind() == StoreKind::Mongo).cloned().expect("the namespace's MongoDB");
    let three: Vec<Arc<dyn Store>> = run.stores.iter().filter(|s| s.kind() != StoreKind::Mongo).cloned().collect();

    let ids = run.produce(3_000, "sel3").await;
    let mut w = run.writer(&["--stores", THREE]).ready(run.metrics_port, "/healthz").await;
    let counts = wait_for_counts(&three, ids.len() as u64, DRAIN).await;
    assert!(counts.iter().all(|(_, c)| *c == ids.len() as u64), "counts {counts:?}, want {}", ids.len());
    run.wait_committed(ids.len() as i64).await;
    assert_exact_ids(&three, &ids).await;
    assert_same_content(&three).await;
    assert_eq!(mongo.count().await.expect("count the namespace's MongoDB"), 0, "the writer wrote the left-out store");
    assert_eq!(run.metric("writer_pool_completed_total{pool=\"mongo\"}").await, 0.0);

    // reconcile with the same selection: exact at id level, and no judgement about MongoDB.
    let file = std::env::temp_dir().join(format!("{}.ids", run.ns.name));
    std::fs::write(&file, ids.join("\n") + "\n").expect("write the ids");
    let file = file.to_string_lossy().into_owned();
    let (code, answer) = run.ns.reconcile(60, &["--stores", THREE, "diff", "--ids", &file]);
    let report = answer.check().unwrap_or_else(|| panic!("an id-level check: {answer:?}"));
    assert_eq!((code, report.clean), (0, true), "exact with three stores: {report:?}");
    let counted: Vec<&str> = report.stores.iter().flatten().map(|s| s.store.as_str()).collect();
    assert_eq!(counted, ["mysql", "redis", "es"], "{report:?}");
    let judged_mongo: Vec<&String> = report.classes.keys().filter(|k| k.contains("mongo")).collect();
    assert!(judged_mongo.is_empty(), "reconcile judged the left-out store: {judged_mongo:?}");
    let n = ids.len().to_string();
    let (code, totals) = run.ns.reconcile(60, &["--stores", THREE, "count", "--expect", &n]);
    assert_eq!(code, 0, "{totals:?}");
    // The writer's list is the selection, in the registry's order.
    let listed = std::process::Command::new(pipeline_testkit::bin_path("writer"))
        .args(["--stores", THREE, "--list-stores"])
        .output()
        .expect("writer --list-stores");
    assert_eq!(String::from_utf8_lossy(&listed.stdout), "mysql\nredis\nes\n");
    let _ = std::fs::remove_file(&file);

    w.signal("TERM");
    let st = w.wait_exit(Duration::from_secs(30)).expect("writer exits on SIGTERM");
    assert!(st.success(), "clean exit, got {st:?}");
}

/// Runs `bin ARGS` with `STORES` unset; its exit code and everything it wrote.
fn refused(bin: &str, args: &[&str], env: &[(&str, String)]) -> (Option<i32>, String) {
    let mut s = Service::launch(bin, args, env);
    let status = s.wait_exit(Duration::from_secs(30)).unwrap_or_else(|| panic!("{bin} {args:?} kept running"));
    (status.code(), s.logs())
}

/// No server is needed: the list is refused before anything is contacted.
#[tokio::test]
async fn an_unknown_store_or_a_list_without_mysql_stops_at_startup() {
    let port = free_port().to_string();
    let env = [("WRITER_METRICS_ADDR", format!("127.0.0.1:{port}"))];
    for bin in ["writer", "reconcile"] {
        let tail: &[&str] = if bin == "reconcile" { &["count"] } else { &[] };
        let (code, log) = refused(bin, &[&["--stores", "mysql,postgres"], tail].concat(), &env);
        assert_eq!(code, Some(2), "{bin}: {log}");
        assert!(log.contains("unknown store `postgres`"), "{bin}: {log}");
        for k in StoreKind::ALL {
            assert!(log.contains(k.name()), "{bin}'s message names the registry's stores: {log}");
        }
        let (code, log) = refused(bin, &[&["--stores", "redis,es"], tail].concat(), &env);
        assert_eq!(code, Some(2), "{bin}: {log}");
        assert!(log.contains("leaves out mysql, the system of record"), "{bin}: {log}");
        // The same from the environment.
        let with_env = [env[0].clone(), ("STORES", "mysql,cassandra".into())];
        let (code, log) = refused(bin, tail, &with_env);
        assert_eq!(code, Some(2), "{bin}: {log}");
        assert!(log.contains("unknown store `cassandra`"), "{bin}: {log}");
    }
    // A synchronous store the selection leaves out is refused before any store is contacted.
    let (code, log) = refused("writer", &["--stores", "mysql,redis", "--sync-stores", "mongo"], &env);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("--sync-stores names mongo, which --stores (mysql,redis) leaves out"), "{log}");
}
