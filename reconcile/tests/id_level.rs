//! The id-level checks against the real stores: what totals cannot see (a lost id hidden by an
//! extra one), uncertain and refused ids, duplicates, and dead letters. Each test seeds its own
//! namespace directly (no pipeline) and writes a k6-style summary and id log by hand.

use pipeline_common::reconcile_report::{names, Answer, ErrorKind, ExpectedIds, Level};
use pipeline_common::Message;
use pipeline_stores::{Store, StoreKind};
use pipeline_testkit::{exclusive, messages, Namespace};
use std::path::PathBuf;
use std::sync::Arc;

fn ids(msgs: &[Message]) -> Vec<&str> {
    msgs.iter().map(|m| m.id.as_str()).collect()
}

/// Writes a summary and id log as k6/lib/summary.js and k6/lib/ids.js do; returns the summary.
fn k6_run(ns: &Namespace, accepted: &[&str], uncertain: &[&str], refused: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir();
    let (summary, log) = (dir.join(format!("{}.json", ns.name)), dir.join(format!("{}.ids", ns.name)));
    let mut text = "k6ids RUN r1\n".to_string();
    for (tag, list) in [("A", accepted), ("U", uncertain), ("R", refused)] {
        for id in list {
            text.push_str(&format!("k6ids {tag} {id}\n"));
        }
    }
    text.push_str(&format!("k6ids END r1 A={} U={} R={}\n", accepted.len(), uncertain.len(), refused.len()));
    std::fs::write(&log, text).unwrap();
    let s = serde_json::json!({
        "accepted": accepted.len(), "uncertain": uncertain.len(), "refused": refused.len(),
        "ids": { "file": log, "run": "r1" },
    });
    std::fs::write(&summary, s.to_string()).unwrap();
    summary
}

async fn write_all(stores: &[Arc<dyn Store>], msgs: &[Message], only: impl Fn(StoreKind) -> bool) {
    for s in stores.iter().filter(|s| only(s.kind())) {
        s.write(msgs, pipeline_stores::Overwrite::Older).await.unwrap();
    }
}

fn class<'a>(report: &'a Answer, name: &str) -> (u64, Vec<&'a str>) {
    let c = report.check().and_then(|r| r.class(name)).unwrap_or_else(|| panic!("no class {name}: {report}"));
    (c.total, c.examples.iter().map(String::as_str).collect())
}

/// Failing classes with a non-zero total.
fn failures(report: &Answer) -> Vec<(String, u64)> {
    let report = report.check().unwrap_or_else(|| panic!("a check report: {report}"));
    report.failing().map(|(k, c)| (k.to_string(), c.total)).collect()
}

fn bad_input(answer: &Answer) -> bool {
    answer.error().is_some_and(|e| e.error == ErrorKind::BadInput)
}

#[tokio::test]
async fn equal_totals_hide_a_lost_id_that_the_id_check_names() {
    let _g = exclusive().await;
    let ns = Namespace::new("blind").await;
    let stores = ns.stores().await;
    let (batch, stray) = (messages(10, "t"), messages(1, "stray"));
    // t-9 is in no store, "stray" (never accepted) is in every store: 10 accepted, 10 everywhere.
    write_all(&stores, &batch[..9], |_| true).await;
    write_all(&stores, &stray, |_| true).await;
    let summary = k6_run(&ns, &ids(&batch), &[], &[]);
    let summary = summary.to_str().unwrap();

    let (code, totals) = ns.reconcile(60, &["count", "--expect", "10"]);
    assert_eq!(code, 0, "totals cannot see the swap: {totals}");
    // Before this change `count --expect-from SUMMARY` compared the summary's `accepted` total the
    // same way and said OK (exit 0): the assertion below fails on that behaviour.
    let (code, report) = ns.reconcile(60, &["count", "--expect-from", summary]);
    assert_eq!(code, 1, "the id check sees the loss the totals hide: {report}");
    assert_eq!(report.level(), Some(Level::Ids));
    assert!(report.message().unwrap().contains("checked at id level"), "{report}");
    assert_eq!(totals.level(), Some(Level::Totals));
    assert!(totals.message().unwrap().contains("totals only"), "{totals}");
    for s in StoreKind::ALL {
        assert_eq!(class(&report, &names::missing(s)), (1, vec![batch[9].id.as_str()]), "{report}");
        assert_eq!(class(&report, &names::extra(s)), (1, vec![stray[0].id.as_str()]), "{report}");
    }
    assert_eq!(failures(&report).len(), 8, "{report}");

    let (code, diff) = ns.reconcile(60, &["diff", "--expect-from", summary]);
    assert_eq!((code, failures(&diff)), (1, failures(&report)), "diff and count agree: {diff}");
    let (code, refused) = ns.reconcile(60, &["diff"]);
    assert_eq!((code, bad_input(&refused)), (2, true), "no expected set, no pretending");
    let (code, agree) = ns.reconcile(60, &["diff", "--stores-only"]);
    assert_eq!((code, agree.level()), (0, Some(Level::StoresOnly)), "{agree}");
    assert!(agree.message().unwrap().contains("NOT checked against what was injected"), "{agree}");
}

/// `--only-prefix`: stores that held messages before a run (a pre-fill) judge only the run's ids;
/// the others are counted per store, not called extra, and a loss among the run's ids still fails.
#[tokio::test]
async fn a_prefix_judges_one_runs_ids_in_stores_that_hold_others() {
    let _g = exclusive().await;
    let ns = Namespace::new("prefix").await;
    let stores = ns.stores().await;
    let (fill, run) = (messages(30, "fill"), messages(10, "run"));
    write_all(&stores, &fill, |_| true).await;
    write_all(&stores, &run, |_| true).await;
    let summary = k6_run(&ns, &ids(&run), &[], &[]);
    let summary = summary.to_str().unwrap();

    let (code, all) = ns.reconcile(60, &["count", "--expect-from", summary]);
    assert_eq!(code, 1, "without a prefix the fill is extra: {all}");
    let (code, report) = ns.reconcile(60, &["--only-prefix", "run-", "count", "--expect-from", summary]);
    assert_eq!((code, failures(&report)), (0, vec![]), "{report}");
    assert_eq!(report.check().and_then(|r| r.only_prefix.as_deref()), Some("run-"));
    for s in StoreKind::ALL {
        assert_eq!(class(&report, &names::outside(s)).0, 30, "{report}");
    }

    let redis = stores.iter().find(|s| s.kind() == StoreKind::Redis).unwrap();
    redis.delete(&[run[9].id.clone()]).await.unwrap();
    let (code, report) = ns.reconcile(60, &["--only-prefix", "run-", "diff", "--expect-from", summary]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(failures(&report), vec![("missing from redis".to_string(), 1)], "{report}");
    let (code, refused) = ns.reconcile(60, &["--only-prefix", "run-", "count", "--expect", "10"]);
    assert_eq!((code, bad_input(&refused)), (2, true), "totals cannot be scoped: {refused}");
}

#[tokio::test]
async fn uncertain_ids_may_be_stored_refused_ones_never_and_none_twice() {
    let _g = exclusive().await;
    let ns = Namespace::new("uncertain").await;
    let stores = ns.stores().await;
    let (batch, u_in, u_out, refused) = (messages(5, "a"), messages(1, "uin"), messages(1, "uout"), messages(1, "r"));
    write_all(&stores, &batch, |_| true).await;
    write_all(&stores, &u_in, |_| true).await;
    let uncertain = [u_in[0].id.as_str(), u_out[0].id.as_str()];
    let summary = k6_run(&ns, &ids(&batch), &uncertain, &ids(&refused));
    let summary = summary.to_str().unwrap();

    let (code, report) = ns.reconcile(60, &["count", "--expect-from", summary]);
    assert_eq!(code, 0, "an uncertain id stored, another not: both fine: {report}");
    assert_eq!(class(&report, names::UNCERTAIN_STORED), (1, vec![u_in[0].id.as_str()]));
    assert_eq!(class(&report, names::UNCERTAIN_NOT_STORED), (1, vec![u_out[0].id.as_str()]));
    let expected = report.check().and_then(|r| r.expected);
    assert_eq!(expected, Some(ExpectedIds { accepted: 5, uncertain: 2, refused: 1 }));
    // The same check from plain id files.
    let dir = std::env::temp_dir();
    let (a, u) = (dir.join(format!("{}.a.ids", ns.name)), dir.join(format!("{}.u.ids", ns.name)));
    std::fs::write(&a, ids(&batch).join("\n")).unwrap();
    std::fs::write(&u, uncertain.join("\n")).unwrap();
    let (code, plain) = ns.reconcile(60, &["diff", "--ids", a.to_str().unwrap(), "--uncertain", u.to_str().unwrap()]);
    assert_eq!(code, 0, "{plain}");

    // a-0 copied into a second shard table; the refused id written to Redis.
    let dup = &batch[0];
    pipeline_testkit::copy_into_wrong_shard(&ns, &dup.id).await;
    write_all(&stores, &refused, |k| k == StoreKind::Redis).await;
    let (code, report) = ns.reconcile(60, &["diff", "--expect-from", summary]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        failures(&report),
        [("duplicated (mysql)".to_string(), 1), ("refused but in redis".into(), 1), ("wrong shard (mysql)".into(), 1)]
    );
    assert_eq!(class(&report, &names::duplicated("mysql")).1, [dup.id.as_str()]);
    assert_eq!(class(&report, &names::refused_in("redis")).1, [refused[0].id.as_str()]);
}

/// One dead letter: key, payload, headers.
type Letter<'a> = (String, Vec<u8>, Vec<(&'a str, String)>);

/// Produces dead letters the way the writer does.
async fn dead_letters(ns: &Namespace, topic: &str, records: Vec<Letter<'_>>) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    pipeline_common::kafka::ensure_topic(&ns.kafka, topic, 1).await.unwrap();
    let producer: FutureProducer = pipeline_common::kafka::producer_config(&ns.kafka).create().unwrap();
    for (key, payload, headers) in records {
        let mut h = OwnedHeaders::new();
        for (k, v) in &headers {
            h = h.insert(Header { key: k, value: Some(v.as_str()) });
        }
        let rec = FutureRecord::to(topic).key(&key).payload(&payload).headers(h);
        producer.send(rec, std::time::Duration::from_secs(30)).await.map_err(|(e, _)| e).unwrap();
    }
}

#[tokio::test]
async fn a_dead_lettered_accepted_id_is_reported_as_dead_lettered_not_missing() {
    let _g = exclusive().await;
    let ns = Namespace::new("dead").await;
    let stores = ns.stores().await;
    let (fine, x, y, old) = (messages(3, "ok"), messages(1, "x"), messages(1, "y"), messages(1, "oldrun"));
    write_all(&stores, &fine, |_| true).await;
    // Elasticsearch refused x; y could not be decoded (dead-lettered for every store).
    write_all(&stores, &x, |k| k != StoreKind::Es).await;
    let header = |k: &'static str, v: &str| (k, v.to_string());
    dead_letters(
        &ns,
        &format!("{}.dlq", ns.name),
        vec![
            (
                x[0].id.clone(),
                x[0].to_json().into_bytes(),
                vec![header("error", "mapper_parsing_exception"), header("store", "es"), header("id", &x[0].id)],
            ),
            (
                "0:5".into(),
                y[0].to_json().into_bytes(),
                vec![header("error", "body too long"), header("store", "decode")],
            ),
            ("0:6".into(), b"\xffnot json".to_vec(), vec![header("error", "not a message"), header("store", "decode")]),
            (old[0].id.clone(), old[0].to_json().into_bytes(), vec![header("error", "mongo: too big")]),
        ],
    )
    .await;
    let accepted: Vec<&str> = ids(&fine).into_iter().chain([x[0].id.as_str(), y[0].id.as_str()]).collect();
    let summary = k6_run(&ns, &accepted, &[], &[]);

    let (code, report) = ns.reconcile(60, &["count", "--expect-from", summary.to_str().unwrap()]);
    assert_eq!(code, 1, "a dead-lettered 202 is still a broken promise: {report}");
    assert_eq!(failures(&report), [("dead-lettered (accepted)".to_string(), 2)], "not `missing`: {report}");
    assert_eq!(
        class(&report, names::DL_ACCEPTED).1,
        [format!("{} (es: mapper_parsing_exception)", x[0].id), format!("{} (decode: body too long)", y[0].id)]
    );
    assert_eq!(class(&report, names::DL_OTHER), (1, vec![format!("{} (mongo: too big)", old[0].id).as_str()]));
    assert_eq!(class(&report, names::DL_NO_ID), (1, vec!["0:6 (not a message)"]));
    let records = report.check().map(|r| r.dead_letters.records);
    assert_eq!(records, Some(4), "the whole topic was read: {report}");
}
