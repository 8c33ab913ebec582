//! Content against the real stores: every way a store's copy can differ from MySQL's — a body
//! changed, a field truncated, `sent_at` shifted, a stale version, a value that is not a message
//! at all — is reported as `mismatched` with the fields that differ, and as `not what was sent`
//! where the id log carries the client's digest; then `reconcile repair` rebuilds the stores from
//! MySQL: `--dry-run` changes nothing, a repair makes every store agree (an id MySQL does not hold
//! is reported, and deleted only with `--delete-extra`), a second repair finds nothing to do,
//! and a version newer than MySQL's is never overwritten.

use pipeline_common::digest::{hex, Digest};
use pipeline_common::reconcile_report::{names, Answer, CheckReport, RepairedStore};
use pipeline_common::Message;
use pipeline_stores::Overwrite::{Older, OlderOrSame};
use pipeline_stores::{Store, StoreKind};
use pipeline_testkit::{exclusive, messages, Namespace};
use std::collections::BTreeMap;
use std::sync::Arc;

fn store(stores: &[Arc<dyn Store>], kind: StoreKind) -> &dyn Store {
    stores.iter().find(|s| s.kind() == kind).expect("store").as_ref()
}

/// An id file with each id's digest of what was sent, as k6 writes it.
fn sent_file(ns: &Namespace, msgs: &[Message]) -> String {
    let path = std::env::temp_dir().join(format!("{}.sent.ids", ns.name));
    let lines: String = msgs.iter().map(|m| format!("{}:{}\n", m.id, hex(Digest::of_message(m).sent))).collect();
    std::fs::write(&path, lines).unwrap();
    path.to_string_lossy().into_owned()
}

/// The check report of an answer.
fn check(answer: &Answer) -> &CheckReport {
    answer.check().unwrap_or_else(|| panic!("a check report: {answer}"))
}

/// The non-zero classes of a report: name → (total, fields).
fn nonzero(report: &Answer) -> Vec<(String, u64, BTreeMap<String, u64>)> {
    let mut out: Vec<(String, u64, BTreeMap<String, u64>)> = check(report)
        .classes
        .iter()
        .filter(|(_, c)| c.total > 0)
        .map(|(k, c)| (k.clone(), c.total, c.fields.clone()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn repair_of<'a>(report: &'a Answer, kind: &str) -> &'a RepairedStore {
    report.repair().unwrap_or_else(|| panic!("a repair report: {report}")).store(kind).expect("the store")
}

/// Per field, how many ids differ in it.
fn fields<const N: usize>(counts: [(&str, u64); N]) -> BTreeMap<String, u64> {
    counts.into_iter().map(|(f, n)| (f.to_string(), n)).collect()
}

#[tokio::test]
async fn every_kind_of_content_difference_is_reported_and_repaired_from_mysql() {
    let _g = exclusive().await;
    let ns = Namespace::new("content").await;
    let stores = ns.stores().await;
    let mut msgs = messages(20, "ct");
    for (i, m) in msgs.iter_mut().enumerate() {
        m.version = 100 + i as u64;
    }
    let sent = sent_file(&ns, &msgs);
    for s in &stores {
        // es misses the last message; everything else is in every store.
        let part = if s.kind() == StoreKind::Es { &msgs[..19] } else { &msgs[..] };
        s.write(part, Older).await.unwrap();
    }
    let (code, clean) = ns.reconcile(60, &["diff", "--ids", &sent]);
    assert_eq!(nonzero(&clean).iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["missing from es"], "{clean}");
    assert_eq!((code, check(&clean).content.map(|c| c.checked_against_sent)), (1, Some(20)), "{clean}");

    // The damage, each kind in a store of its own. The same version with other content can only
    // be damage (a version has one content), so it is written as repair would write it.
    let with = |i: usize, f: &dyn Fn(&mut Message)| {
        let mut m = msgs[i].clone();
        f(&mut m);
        vec![m]
    };
    let redis = store(&stores, StoreKind::Redis);
    redis.write(&with(1, &|m| m.body.push_str(" (changed)")), OlderOrSame).await.unwrap();
    let es = store(&stores, StoreKind::Es);
    es.write(&with(2, &|m| m.sender.truncate(3)), OlderOrSame).await.unwrap();
    let mongo = store(&stores, StoreKind::Mongo);
    mongo.write(&with(3, &|m| m.sent_at += time::Duration::milliseconds(1)), OlderOrSame).await.unwrap();
    // A stale version: mongo holds an older version of message 4, with its older content.
    mongo.delete(&[msgs[4].id.clone()]).await.unwrap();
    mongo
        .write(
            &with(4, &|m| {
                m.version -= 50;
                m.body = "an older version".into();
            }),
            Older,
        )
        .await
        .unwrap();
    // Not a message at all, and an id nobody sent.
    let mut conn =
        redis::Client::open(ns.stores.redis.url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    redis::cmd("SET").arg(format!("msg:{}", msgs[5].id)).arg("{not json").query_async::<()>(&mut conn).await.unwrap();
    redis.write(&messages(1, "stray"), Older).await.unwrap();

    let (code, report) = ns.reconcile(60, &["diff", "--ids", &sent]);
    assert_eq!(code, 1, "{report}");
    let found = nonzero(&report);
    let names: Vec<&str> = found.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "extra in redis",
            "mismatched (es)",
            "mismatched (mongo)",
            "mismatched (redis)",
            "missing from es",
            "not what was sent (es)",
            "not what was sent (mongo)",
            "not what was sent (redis)",
        ],
        "{report}"
    );
    let get = |name: &str| found.iter().find(|c| c.0 == name).cloned().expect(name);
    assert_eq!(get("mismatched (redis)").1, 2, "the changed body and the unreadable value");
    assert_eq!(get("mismatched (redis)").2, fields([("body", 1), ("unreadable", 1)]));
    assert_eq!(get("mismatched (es)").2, fields([("sender", 1)]));
    assert_eq!(get("mismatched (mongo)").2, fields([("sent_at", 1), ("version", 1), ("body", 1)]));
    assert_eq!(get("not what was sent (mongo)").1, 2);
    let example = check(&report).class(&names::mismatched("es")).and_then(|c| c.examples.first());
    let example = example.map_or("", String::as_str);
    assert!(example.contains("sender: mysql \"user-2\" vs es \"use\""), "an example shows both values: {example}");
    let (code, totals) = ns.reconcile(60, &["count", "--expect-from", &sent]);
    assert_eq!(code, 1, "count --expect-from checks content too: {totals}");

    // Repair: a dry run changes nothing.
    let (code, dry) = ns.reconcile(60, &["repair", "--dry-run"]);
    assert_eq!(code, 1, "something to do: {dry}");
    assert_eq!(repair_of(&dry, "redis").mismatched.total, 2, "{dry}");
    assert_eq!(repair_of(&dry, "es").missing.total, 1, "{dry}");
    assert_eq!(repair_of(&dry, "mongo").mismatched.total, 2, "{dry}");
    assert_eq!(
        check(&ns.reconcile(60, &["diff", "--ids", &sent]).1).classes,
        check(&report).classes,
        "the dry run wrote nothing"
    );
    // A repair: everything from MySQL, except the id MySQL does not hold, which stays reported.
    let (code, fixed) = ns.reconcile(60, &["repair"]);
    assert_eq!(code, 1, "an extra id is left until --delete-extra: {fixed}");
    assert_eq!(repair_of(&fixed, "redis").repaired, 2, "{fixed}");
    assert_eq!(repair_of(&fixed, "mongo").repaired, 2, "{fixed}");
    assert_eq!(repair_of(&fixed, "es").repaired, 2, "{fixed}");
    assert_eq!(repair_of(&fixed, "redis").extra.total, 1, "{fixed}");
    let (code, fixed) = ns.reconcile(60, &["repair", "--delete-extra"]);
    assert_eq!((code, repair_of(&fixed, "redis").deleted), (0, 1), "{fixed}");
    let (code, again) = ns.reconcile(60, &["repair"]);
    assert_eq!(code, 0, "{again}");
    assert!(again.message().unwrap_or_default().starts_with("NOTHING TO DO"), "idempotent: {again}");
    let (code, report) = ns.reconcile(60, &["count", "--expect-from", &sent]);
    assert_eq!(code, 0, "exact at id level and content after the repair: {report}");

    // A version newer than MySQL's (MySQL is behind): repair says so and overwrites nothing.
    let newer = with(6, &|m| {
        m.version += 1000;
        m.body = "newer than mysql".into();
    });
    redis.write(&newer, Older).await.unwrap();
    let (code, report) = ns.reconcile(60, &["repair"]);
    assert_eq!((code, repair_of(&report, "redis").newer_than_reference.total), (1, 1), "{report}");
    assert_eq!(redis.fetch(&[msgs[6].id.clone()]).await.unwrap(), newer, "the newer version stays");
}
