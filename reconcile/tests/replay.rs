//! Dead letters are not a dead end: MySQL refuses some messages for good (its `body` column
//! narrowed in this namespace), the writer dead-letters them and stores the rest; `dlq list`
//! shows them; a replay before the cause is fixed is refused again and leaves them on the topic
//! with the new error; after the column is widened, a replay writes them into MySQL only, a
//! second replay has nothing to do, and reconcile is exact at id level and content.

use pipeline_common::digest::{hex, Digest};
use pipeline_common::reconcile_report::{names, Answer, DlqCount, DlqList};
use pipeline_testkit::{exclusive, free_port, messages, produce, wait_for_counts, Namespace};
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
    assert_eq!(dead_lettered(&report), Some(20), "{report}");
    // Dead letters are at least once (a rebalance at the writer's start repeats some): count ids.
    let (_, list) = ns.reconcile(120, &["dlq", "list", "--limit", "1000"]);
    let first = dlq_list(&list).records;
    assert_eq!(distinct_ids(&list), 20, "{list}");
    assert_eq!(dlq_list(&list).counts[0].store, "mysql", "{list}");
    assert_eq!(dlq_list(&list).counts[0].pending, first, "{list}");

    // Before the fix: refused again, dead-lettered again with the new error, nothing lost.
    let (code, again) = ns.reconcile(120, &["dlq", "replay"]);
    assert_eq!(code, 1, "{again}");
    assert_eq!(again.dlq_replay().map(|r| r.refused_again_by("mysql")), Some(20), "{again}");
    let (_, list) = ns.reconcile(120, &["dlq", "list", "--limit", "1000"]);
    assert_eq!(dlq_list(&list).records, first + 20, "the refused ones are on the topic again, once each: {list}");
    let sum = |k: fn(&DlqCount) -> u64| dlq_list(&list).counts.iter().map(k).sum::<u64>();
    assert_eq!((sum(|c| c.replayed), sum(|c| c.pending)), (first, 20), "{list}");
    let (code, report) = ns.reconcile(120, &["count", "--expect-from", &ids]);
    assert_eq!((code, dead_lettered(&report)), (1, Some(20)), "{report}");

    // The cause fixed: replayed into MySQL, once.
    body_column(&ns, "MEDIUMTEXT").await;
    let (dry_code, dry) = ns.reconcile(120, &["dlq", "replay", "--dry-run"]);
    assert_eq!((dry_code, dry.dlq_replay().map(|r| r.written_to("mysql"))), (0, Some(20)), "{dry}");
    let (code, done) = ns.reconcile(120, &["dlq", "replay"]);
    assert_eq!(code, 0, "{done}");
    assert_eq!(done.dlq_replay().map(|r| r.written_to("mysql")), Some(20), "{done}");
    let (code, none) = ns.reconcile(120, &["dlq", "replay"]);
    assert_eq!(code, 0, "{none}");
    assert!(none.dlq_replay().is_some_and(|r| r.written.is_empty()), "a second replay has nothing to do: {none}");
    let (code, report) = ns.reconcile(120, &["count", "--expect-from", &ids]);
    assert_eq!(code, 0, "exact at id level and content after the replay: {report}");
    assert_eq!(report.check().map(|r| r.dead_letters.replayed), Some(first + 20), "{report}");
}

fn distinct_ids(list: &Answer) -> usize {
    let ids: std::collections::BTreeSet<&str> = dlq_list(list).shown.iter().filter_map(|r| r.id.as_deref()).collect();
    ids.len()
}

fn dlq_list(answer: &Answer) -> &DlqList {
    answer.dlq_list().unwrap_or_else(|| panic!("a dead-letter list: {answer}"))
}

/// The check's count of accepted ids that were dead-lettered.
fn dead_lettered(answer: &Answer) -> Option<u64> {
    answer.check().and_then(|r| r.class(names::DL_ACCEPTED)).map(|c| c.total)
}
