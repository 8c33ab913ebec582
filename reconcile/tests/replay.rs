//! Dead letters are not a dead end: MySQL refuses some messages for good (its `body` column
//! narrowed in this namespace), the writer dead-letters them and stores the rest; `dlq list`
//! shows them; a replay before the cause is fixed is refused again and leaves them on the topic
//! with the new error; after the column is widened, a replay writes them into MySQL only, a
//! second replay has nothing to do, and reconcile is exact at id level and content.

use pipeline_common::digest::{hex, Digest};
use pipeline_testkit::{exclusive, free_port, messages, produce, wait_for_counts, Namespace};
use serde_json::Value;
use std::time::Duration;

async fn body_column(ns: &Namespace, ty: &str) {
    let pool = sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(&ns.stores.mysql.url).await.unwrap();
    for shard in 0..16 {
        let sql = format!("ALTER TABLE messages_{shard:02} MODIFY body {ty} NOT NULL");
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await.unwrap();
    }
}

#[tokio::test]
async fn dead_letters_are_replayed_into_the_store_that_refused_them_once_fixed() {
    let _g = exclusive().await;
    let ns = Namespace::new("replay").await;
    let stores = ns.stores().await;
    body_column(&ns, "VARCHAR(8)").await;
    let mut msgs = messages(30, "rp");
    for (i, m) in msgs.iter_mut().enumerate().take(10) {
        m.body = format!("short{i}");
    }
    let ids = std::env::temp_dir().join(format!("{}.ids", ns.name));
    let lines: String = msgs.iter().map(|m| format!("{}:{}\n", m.id, hex(Digest::of_message(m).sent))).collect();
    std::fs::write(&ids, lines).unwrap();
    let ids = ids.to_string_lossy().into_owned();
    produce(&ns.kafka, &msgs).await;
    let port = free_port();
    let _writer = ns.spawn(
        "writer",
        &[],
        &[("WRITER_METRICS_ADDR", format!("127.0.0.1:{port}")), ("WRITER_DLQ_TOPIC", format!("{}.dlq", ns.name))],
    );
    let counts = wait_for_counts(&stores[1..], 30, Duration::from_secs(120)).await;
    assert!(counts.iter().all(|(_, n)| *n == 30), "{counts:?}");

    let (code, report) = ns.reconcile(120, &["count", "--expect-from", &ids]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["classes"]["dead-lettered (accepted)"]["total"], 20, "{report}");
    // Dead letters are at least once (a rebalance at the writer's start repeats some): count ids.
    let (_, list) = ns.reconcile(120, &["dlq", "list", "--limit", "1000"]);
    let first = list["records"].as_u64().unwrap_or(0);
    assert_eq!(distinct_ids(&list), 20, "{list}");
    assert_eq!(list["counts"][0]["store"], "mysql", "{list}");
    assert_eq!(list["counts"][0]["pending"].as_u64(), Some(first), "{list}");

    // Before the fix: refused again, dead-lettered again with the new error, nothing lost.
    let (code, again) = ns.reconcile(120, &["dlq", "replay"]);
    assert_eq!(code, 1, "{again}");
    assert_eq!(again["refused_again"]["mysql"]["total"], 20, "{again}");
    let (_, list) = ns.reconcile(120, &["dlq", "list", "--limit", "1000"]);
    assert_eq!(
        list["records"].as_u64(),
        Some(first + 20),
        "the refused ones are on the topic again, once each: {list}"
    );
    let sum = |k: &str| list["counts"].as_array().unwrap().iter().map(|c| c[k].as_u64().unwrap_or(0)).sum::<u64>();
    assert_eq!((sum("replayed"), sum("pending")), (first, 20), "{list}");
    let (code, report) = ns.reconcile(120, &["count", "--expect-from", &ids]);
    assert_eq!((code, &report["classes"]["dead-lettered (accepted)"]["total"]), (1, &Value::from(20)), "{report}");

    // The cause fixed: replayed into MySQL, once.
    body_column(&ns, "MEDIUMTEXT").await;
    let (dry_code, dry) = ns.reconcile(120, &["dlq", "replay", "--dry-run"]);
    assert_eq!((dry_code, &dry["written"]["mysql"]), (0, &Value::from(20)), "{dry}");
    let (code, done) = ns.reconcile(120, &["dlq", "replay"]);
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["written"]["mysql"], 20, "{done}");
    let (code, none) = ns.reconcile(120, &["dlq", "replay"]);
    assert_eq!(code, 0, "{none}");
    assert!(none["written"].as_object().is_some_and(|w| w.is_empty()), "a second replay has nothing to do: {none}");
    let (code, report) = ns.reconcile(120, &["count", "--expect-from", &ids]);
    assert_eq!(code, 0, "exact at id level and content after the replay: {report}");
    assert_eq!(report["dead_letters"]["replayed"].as_u64(), Some(first + 20), "{report}");
}

fn distinct_ids(list: &Value) -> usize {
    let ids: std::collections::BTreeSet<&str> =
        list["shown"].as_array().unwrap().iter().filter_map(|r| r["id"].as_str()).collect();
    ids.len()
}
