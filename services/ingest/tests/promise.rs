//! The 202 promise, as a property: every message the ingest accepts is stored, exactly once and
//! unchanged, identically in all four stores; everything the API refuses is refused with a 4xx. Messages are
//! generated with proptest at the edges of every field: ids of 1 and 64 characters, sender and
//! recipient of 1 to 64 characters from every Unicode plane (NUL and noncharacters included),
//! bodies up to the byte limit, and `sent_at` across the whole accepted range with every offset
//! RFC 3339 allows, plus dates just outside it (which must be a 422, not a 202 that a store then
//! refuses: before the fix `0000-01-01T00:00:00+00:01` got a 202 and then killed the writer on
//! every restart). The same kinds of message also go through the batch route, whose messages
//! travel to the writer as arrays (one Kafka record per request, cut at `--record-max-bytes`).
//!
//! Every store must hold the same content as MySQL (version, sender, recipient, body, `sent_at`
//! compared by fingerprint), the version the 202 named, and MySQL what was sent, byte for byte.
//!
//! Runs against the real servers, with the ingest and writer binaries spawned (so
//! `PIPELINE_BIN_DIR` can point it at another build).

use futures::StreamExt;
use pipeline_common::message::{shard_of, shard_table, DEFAULT_MAX_BODY_BYTES, MAX_NAME_CHARS};
use pipeline_testkit::{assert_exact_ids, exclusive, free_port, wait_for_counts, Namespace};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

/// One generated request body and whether the API must accept it.
#[derive(Debug, Clone)]
struct Case {
    json: Value,
    valid: bool,
}

/// 1..=64 characters from anywhere in Unicode, often exactly at the limits.
fn name() -> impl Strategy<Value = String> {
    let any_char = prop_oneof![
        4 => any::<char>(),
        1 => Just('\0'),
        1 => Just('\u{FFFF}'),
        1 => Just('\u{10FFFF}'),
        1 => Just('\u{1F600}'),
        1 => Just('\u{E000}'),
        1 => Just('"'),
        1 => Just('\\'),
    ];
    prop_oneof![
        1 => Just(1usize),
        1 => Just(MAX_NAME_CHARS),
        3 => 1..=MAX_NAME_CHARS,
    ]
    .prop_flat_map(move |n| proptest::collection::vec(any_char.clone(), n))
    .prop_map(|chars| chars.into_iter().collect())
}

/// A body of at most the byte limit: random characters, or filled to exactly the limit.
fn body() -> impl Strategy<Value = String> {
    let random = proptest::collection::vec(any::<char>(), 0..300).prop_map(|c| c.into_iter().collect::<String>());
    let full = (any::<char>(), 0usize..4).prop_map(|(c, pad)| {
        let mut s = String::new();
        while s.len() + c.len_utf8() <= DEFAULT_MAX_BODY_BYTES - pad {
            s.push(c);
        }
        while s.len() < DEFAULT_MAX_BODY_BYTES {
            s.push('x');
        }
        s
    });
    prop_oneof![4 => random, 1 => full, 1 => Just(String::new())]
}

/// `sent_at` strings: anywhere in years 1000..=9999 with any offset and fraction, the exact
/// edges, and just outside them. Returns the text and whether it must be accepted.
fn sent_at() -> impl Strategy<Value = Option<(String, bool)>> {
    let inside = (1001i32..=9998, 1u8..=12, 1u8..=28, 0u8..24, 0u8..60, 0u8..60, 0u32..1_000_000_000, -1439i32..=1439)
        .prop_map(|(y, mo, d, h, mi, s, ns, off)| {
            let sign = if off < 0 { '-' } else { '+' };
            let (oh, om) = (off.abs() / 60, off.abs() % 60);
            (format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ns:09}{sign}{oh:02}:{om:02}"), true)
        });
    let edges = prop_oneof![
        Just(("1000-01-01T00:00:00Z".to_string(), true)),
        Just(("1000-01-01T00:00:00-00:01".to_string(), true)),
        Just(("1000-01-01T23:59:00+23:59".to_string(), true)),
        Just(("9999-12-31T23:59:59.999999999Z".to_string(), true)),
        Just(("9999-12-31T23:59:59+00:01".to_string(), true)),
        Just(("9999-12-31T00:00:00-23:59".to_string(), true)),
        Just(("0000-01-01T00:00:00+00:01".to_string(), false)),
        Just(("0999-12-31T23:59:59.999999Z".to_string(), false)),
        Just(("1000-01-01T00:00:00+00:01".to_string(), false)),
        Just(("9999-12-31T23:59:59-00:01".to_string(), false)),
        Just(("9999-12-31T23:59:59.999999999-23:59".to_string(), false)),
    ];
    prop_oneof![2 => Just(None), 6 => inside.prop_map(Some), 3 => edges.prop_map(Some)]
}

fn case() -> impl Strategy<Value = Case> {
    let id = prop_oneof![1 => Just(None), 4 => "[A-Za-z0-9_-]{1,64}".prop_map(Some)];
    (id, name(), name(), body(), sent_at()).prop_map(|(id, sender, recipient, body, sent_at)| {
        let mut json = json!({ "sender": sender, "recipient": recipient, "body": body });
        if let Some(id) = id {
            json["id"] = json!(id);
        }
        let mut valid = true;
        if let Some((text, ok)) = sent_at {
            json["sent_at"] = json!(text);
            valid = ok;
        }
        Case { json, valid }
    })
}

/// Deterministic cases (a fixed seed, so a failure reproduces), ids made unique per run.
fn generate(n: usize, run: &str) -> Vec<Case> {
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let strategy = case();
    (0..n)
        .map(|i| {
            let mut c = strategy.new_tree(&mut runner).map(|t| t.current()).unwrap_or_else(|e| panic!("generate: {e}"));
            if let Some(id) = c.json.get("id").and_then(Value::as_str) {
                // Unique per case and run, still 1..=64 characters of the allowed set.
                let id = format!("{run}{i}-{id}");
                c.json["id"] = json!(id.chars().take(MAX_NAME_CHARS).collect::<String>());
            }
            c
        })
        .collect()
}

#[tokio::test]
async fn every_accepted_message_lands_unchanged_in_all_four_stores() {
    let _g = exclusive().await;
    let ns = Namespace::new("promise").await;
    let stores = ns.stores().await;
    let metrics_port = free_port();
    let env = [
        ("WRITER_METRICS_ADDR", format!("127.0.0.1:{metrics_port}")),
        ("WRITER_DLQ_TOPIC", format!("{}.dlq", ns.name)),
    ];
    let mut writer = ns.spawn("writer", &[], &env);
    let port = free_port();
    let _ingest = ns.start("ingest", &[], &[("INGEST_LISTEN", format!("127.0.0.1:{port}"))], port, "/readyz").await;
    let base = format!("http://127.0.0.1:{port}/v1/messages");
    // Idle connections are dropped before actix's 5 s keep-alive closes them, so a request is
    // never sent on a connection the server is closing at that moment (hyper: IncompleteMessage).
    let client = pipeline_testkit::client_builder()
        .timeout(Duration::from_secs(30))
        .pool_idle_timeout(Duration::from_secs(2))
        .build()
        .unwrap();

    let cases = generate(1200, &ns.name[ns.name.len() - 6..]);
    let answers: Vec<(u16, Value)> = futures::stream::iter(cases.iter().map(|c| {
        let (client, base, body) = (client.clone(), base.clone(), c.json.to_string());
        async move {
            let r = client.post(&base).header("content-type", "application/json").body(body).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    }))
    .buffered(32)
    .collect()
    .await;

    let mut accepted: HashMap<String, &Value> = HashMap::new();
    let mut versions: HashMap<String, u64> = HashMap::new();
    for (c, (status, answer)) in cases.iter().zip(&answers) {
        match (c.valid, *status) {
            (true, 202) => {
                let id = answer["id"].as_str().expect("a 202 names the id").to_string();
                versions.insert(id.clone(), answer["version"].as_u64().expect("a 202 names the version"));
                accepted.insert(id, &c.json);
            }
            (false, 422) => assert_eq!(answer["detail"][0]["field"], "sent_at", "{answer}"),
            _ => panic!(
                "{} for {} (valid: {}): {answer}",
                status,
                c.json.to_string().chars().take(300).collect::<String>(),
                c.valid
            ),
        }
    }
    assert!(accepted.len() > 900 && accepted.len() < cases.len(), "both kinds generated: {}", accepted.len());

    // The same kinds of message through the batch route, whose messages travel as arrays in
    // records of at most --record-max-bytes: valid ones in batches of 50 (a batch of bodies at
    // the limit, escaped six-fold, spans many records), and batches that hold one invalid
    // message, which must be refused whole.
    let batch_cases = generate(600, &format!("b{}", &ns.name[ns.name.len() - 5..]));
    let (good, bad): (Vec<&Case>, Vec<&Case>) = batch_cases.iter().partition(|c| c.valid);
    let mut batches: Vec<(Vec<&Case>, bool)> = good.chunks(50).map(|c| (c.to_vec(), true)).collect();
    batches.extend(bad.iter().take(3).zip(good.chunks(7)).map(|(b, g)| ([g, &[*b]].concat(), false)));
    for (batch, valid) in &batches {
        let body = Value::Array(batch.iter().map(|c| c.json.clone()).collect()).to_string();
        let r = client.post(format!("{base}/batch")).header("content-type", "application/json").body(body);
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let answer: Value = r.json().await.unwrap_or(Value::Null);
        match (valid, status) {
            (true, 202) => {
                let ids = answer["ids"].as_array().expect("a 202 names the ids");
                let vs = answer["versions"].as_array().expect("a 202 names the versions");
                assert_eq!((ids.len(), vs.len()), (batch.len(), batch.len()), "{answer}");
                for ((id, c), v) in ids.iter().zip(batch).zip(vs) {
                    let id = id.as_str().expect("an id").to_string();
                    versions.insert(id.clone(), v.as_u64().expect("a version"));
                    accepted.insert(id, &c.json);
                }
            }
            (false, 422) => assert_eq!(answer["error"], "invalid_batch", "{answer}"),
            _ => panic!("{status} for a batch of {} (valid: {valid}): {answer}", batch.len()),
        }
    }
    let ids: Vec<String> = accepted.keys().cloned().collect();
    let counts = wait_for_counts(&stores, ids.len() as u64, Duration::from_secs(240)).await;
    assert!(writer.0.try_wait().unwrap().is_none(), "the writer is still running");
    assert!(counts.iter().all(|(_, n)| *n == ids.len() as u64), "counts {counts:?}, want {}", ids.len());
    assert_exact_ids(&stores, &ids).await;
    let content = pipeline_testkit::assert_same_content(&stores).await;
    for (id, v) in &versions {
        assert_eq!(content[id].version, *v, "{id}: stored with the version its 202 named");
    }
    assert_mysql_holds_them_unchanged(&ns, &accepted).await;
    let dead = pipeline_testkit::metric(metrics_port, "writer_dlq_records_total").await;
    assert_eq!(dead, 0.0, "nothing accepted was dead-lettered");
    writer.signal("TERM");
}

/// Reads every accepted row back from its shard table and compares sender, recipient and body
/// byte for byte: a store that silently changed a character would break the promise too.
async fn assert_mysql_holds_them_unchanged(ns: &Namespace, accepted: &HashMap<String, &Value>) {
    let pool = sqlx::mysql::MySqlPoolOptions::new().max_connections(1).connect(&ns.stores.mysql.url).await.unwrap();
    let mut seen = 0;
    for shard in 0..16 {
        let table = shard_table(shard);
        let rows: Vec<(String, String, String, String)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT id, sender, recipient, body FROM {table}")))
                .fetch_all(&pool)
                .await
                .unwrap();
        for (id, sender, recipient, body) in rows {
            let sent = accepted.get(&id).unwrap_or_else(|| panic!("{id} stored but never accepted"));
            assert_eq!(table, shard_table(shard_of(&id)));
            assert_eq!(
                (sender.as_str(), recipient.as_str()),
                (sent["sender"].as_str().unwrap(), sent["recipient"].as_str().unwrap()),
                "{id}"
            );
            assert!(body == sent["body"].as_str().unwrap(), "{id}: body changed in MySQL");
            seen += 1;
        }
    }
    assert_eq!(seen, accepted.len());
}
