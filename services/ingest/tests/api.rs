//! Black-box tests of the ingest through a spawned app on a random port, against the real
//! tansu broker (or, for the failure cases, a broker address where nothing listens).
//!
//! One file past ~400 lines on purpose: every answer of the API's routes is tested here, side by
//! side (the edge's limits and keys are in edge.rs).

use pipeline_common::kafka::group_lag;
use pipeline_common::Message;
use pipeline_testkit::{consume_messages, exclusive, free_port, Namespace, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[derive(Clone)]
struct TestApp {
    base: String,
    client: reqwest::Client,
    /// The ingest process, stopped when the last clone is dropped.
    _ingest: std::sync::Arc<Service>,
}

/// Starts the ingest with `args` (plus the namespace's Kafka settings) on a free port, once its
/// /healthz answers.
async fn spawn(ns: &Namespace, brokers: Option<&str>, args: &[&str]) -> TestApp {
    let port = free_port();
    let mut argv = vec!["--listen".to_string(), format!("127.0.0.1:{port}")];
    argv.extend(pipeline_testkit::auth_args());
    argv.extend(["--kafka-brokers".into(), brokers.unwrap_or(&ns.kafka.brokers).to_string()]);
    argv.extend(["--kafka-topic".into(), ns.kafka.topic.clone()]);
    argv.extend(args.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let ingest = ns.start("ingest", &argv, &[], port, "/healthz").await;
    let base = format!("http://127.0.0.1:{port}");
    let client = pipeline_testkit::client_builder().timeout(Duration::from_secs(30)).build().unwrap();
    TestApp { base, client, _ingest: std::sync::Arc::new(ingest) }
}

impl TestApp {
    async fn post(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> (StatusCode, Value, reqwest::header::HeaderMap) {
        self.post_ct(path, "application/json", body).await
    }
    async fn post_ct(
        &self,
        path: &str,
        ct: &str,
        body: impl Into<reqwest::Body>,
    ) -> (StatusCode, Value, reqwest::header::HeaderMap) {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), headers)
    }
}

/// Total records on the namespace's topic (sum of high watermarks).
async fn records_on_topic(ns: &Namespace) -> i64 {
    let k = ns.kafka.clone();
    tokio::task::spawn_blocking(move || group_lag(&k, "nobody", &k.topic))
        .await
        .unwrap()
        .unwrap()
        .iter()
        .map(|p| p.high)
        .sum()
}

/// The messages with the versions the ingest stamped taken off (each checked non-zero), to
/// compare with what was posted.
fn unversioned(msgs: Vec<Message>) -> Vec<Message> {
    msgs.into_iter()
        .map(|m| {
            assert!(m.version > 0, "{} travels with its version", m.id);
            Message { version: 0, ..m }
        })
        .collect()
}

fn msg(i: usize) -> Value {
    json!({ "id": format!("m-{i}"), "sender": "alice", "recipient": "bob", "body": format!("hello {i}"), "sent_at": "2026-11-29T12:00:00Z" })
}

#[tokio::test]
async fn single_and_batch_posts_land_on_the_topic_exactly() {
    let _g = exclusive().await;
    let ns = Namespace::new("ing").await;
    let app = spawn(&ns, None, &[]).await;
    let (st, body, _) = app.post("/v1/messages", msg(0).to_string()).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["id"], "m-0");
    let (st, body, _) =
        app.post("/v1/messages", json!({"sender": "a", "recipient": "b", "body": "no id"}).to_string()).await;
    assert_eq!(st, StatusCode::ACCEPTED);
    let generated = body["id"].as_str().unwrap().to_string();
    assert_eq!(generated.len(), 36, "a UUIDv7 is generated");
    let batch: Vec<Value> = (1..=100).map(msg).collect();
    let (st, body, _) = app.post("/v1/messages/batch", Value::Array(batch.clone()).to_string()).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{body}");
    let ids: Vec<String> = body["ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(ids, (1..=100).map(|i| format!("m-{i}")).collect::<Vec<_>>(), "ids in input order");

    let mut got = consume_messages(&ns.kafka, 102, Duration::from_secs(30)).await;
    assert_eq!(got.len(), 102);
    got.sort_by(|a, b| a.id.cmp(&b.id));
    let m5 = got.iter().find(|m| m.id == "m-5").unwrap();
    assert_eq!((m5.sender.as_str(), m5.recipient.as_str(), m5.body.as_str()), ("alice", "bob", "hello 5"));
    assert_eq!(m5.sent_at, time::macros::datetime!(2026-11-29 12:00 UTC));
    assert!(got.iter().any(|m| m.id == generated && m.body == "no id"));
    // One record per single POST, one for the batch (an array of its 100 messages).
    assert_eq!(records_on_topic(&ns).await, 3, "nothing else was produced");
}

#[tokio::test]
async fn a_batch_past_the_record_budget_is_cut_into_records() {
    let _g = exclusive().await;
    let ns = Namespace::new("cut").await;
    let app = spawn(&ns, None, &["--record-max-bytes", "1000"]).await;
    let batch: Vec<Value> = (0..20).map(msg).collect();
    let (st, body, _) = app.post("/v1/messages/batch", Value::Array(batch.clone()).to_string()).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{body}");
    let mut got = consume_messages(&ns.kafka, 20, Duration::from_secs(30)).await;
    got.sort_by_key(|m| m.id[2..].parse::<usize>().unwrap_or(usize::MAX));
    assert!(got.windows(2).all(|w| w[0].version < w[1].version), "a batch's items are stamped in order");
    let answered: Vec<u64> = body["versions"].as_array().unwrap().iter().filter_map(Value::as_u64).collect();
    assert_eq!(answered, got.iter().map(|m| m.version).collect::<Vec<_>>(), "the 202 names the versions");
    let records = pipeline_common::record::encode(&got, 1000);
    let expected: Vec<Message> = batch.iter().map(|v| serde_json::from_value(v.clone()).unwrap()).collect();
    assert_eq!(unversioned(got), expected, "every message once");
    assert!(records.len() > 1 && records.iter().all(|r| r.len() <= 1000));
    assert_eq!(records_on_topic(&ns).await, records.len() as i64, "records of at most 1,000 bytes");
}

#[tokio::test]
async fn the_requests_of_one_window_travel_as_one_record() {
    let _g = exclusive().await;
    let ns = Namespace::new("gather").await;
    // A window far longer than it takes to send 32 requests at once: the ring consumer joins
    // them all (30 single POSTs and 2 batches of 5) into one record. A fixed window: an adaptive
    // one sends the first request at once (the next test).
    let app = spawn(&ns, None, &["--linger-ms", "1500", "--linger-mode", "fixed"]).await;
    let mut expected: Vec<Value> = Vec::new();
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..32 {
        let (path, body) = match i {
            0..30 => ("/v1/messages", msg(i)),
            _ => ("/v1/messages/batch", Value::Array((0..5).map(|j| msg(100 + 10 * i + j)).collect())),
        };
        match &body {
            Value::Array(items) => expected.extend(items.iter().cloned()),
            one => expected.push(one.clone()),
        }
        let app = app.clone();
        requests.spawn(async move { app.post(path, body.to_string()).await });
    }
    while let Some(r) = requests.join_next().await {
        let (st, body, _) = r.expect("request task");
        assert_eq!(st, StatusCode::ACCEPTED, "{body}");
    }
    let mut got = consume_messages(&ns.kafka, expected.len(), Duration::from_secs(30)).await;
    got.sort_by(|a, b| a.id.cmp(&b.id));
    let mut expected: Vec<Message> = expected.iter().map(|v| serde_json::from_value(v.clone()).unwrap()).collect();
    expected.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(unversioned(got), expected, "every message once");
    let records = records_on_topic(&ns).await;
    assert!(records <= 2, "32 requests in one window: {records} records (one, or two if a window ended among them)");
}

#[tokio::test]
async fn an_idle_ingest_does_not_hold_a_request_for_the_window() {
    let _g = exclusive().await;
    let ns = Namespace::new("idle").await;
    // A 40 s window: with the adaptive window a request that finds nothing in
    // flight goes to Kafka at once (1 ms after a one-request record before at the latest), so its 202
    // comes within the broker's round trip; a fixed window would hold each for the whole 40 s.
    // The 5 s bound is a thousand times the expected
    // wait, not a performance figure: it tells "at once" from "held for the window".
    let app = spawn(&ns, None, &["--linger-ms", "40000", "--deadline-ms", "90000", "--linger-mode", "adaptive"]).await;
    for i in 0..3 {
        let posted = tokio::time::timeout(Duration::from_secs(5), app.post("/v1/messages", msg(i).to_string())).await;
        let (st, body, _) = posted.unwrap_or_else(|_| panic!("request {i} was held for the window"));
        assert_eq!(st, StatusCode::ACCEPTED, "{body}");
    }
    let got = consume_messages(&ns.kafka, 3, Duration::from_secs(30)).await;
    assert_eq!(got.len(), 3);
    assert_eq!(records_on_topic(&ns).await, 3, "one record per request: each found the link idle");
}

#[tokio::test]
async fn every_error_case_has_its_status_and_code() {
    let _g = exclusive().await;
    let ns = Namespace::new("err").await;
    let app = spawn(&ns, None, &["--max-request-bytes", "2048", "--max-batch", "5"]).await;
    let cases: Vec<(&str, &str, String, StatusCode, &str)> = vec![
        ("/v1/messages", "application/json", "{\"sender\": \"a\",".into(), StatusCode::BAD_REQUEST, "malformed_json"),
        (
            "/v1/messages",
            "text/plain",
            msg(1).to_string(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        // Each route has its own limit: the single route reads at most what one valid message
        // can take (~100 KiB with the default 16 KiB body), the batch route --max-request-bytes.
        (
            "/v1/messages",
            "application/json",
            json!({"sender":"a","recipient":"b","body":"x".repeat(200_000)}).to_string(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        (
            "/v1/messages/batch",
            "application/json",
            json!([{"sender":"a","recipient":"b","body":"x".repeat(4000)}]).to_string(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        (
            "/v1/messages",
            "application/json",
            json!({"sender":"","recipient":"b","body":"x"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_message",
        ),
        (
            "/v1/messages",
            "application/json",
            json!({"sender":"a","recipient":"b","body":"x","extra":1}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_message",
        ),
        (
            "/v1/messages",
            "application/json",
            json!({"sender":"a","recipient":"b","body":"x","sent_at":"yesterday"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_message",
        ),
        (
            "/v1/messages",
            "application/json",
            json!({"id":"a b","sender":"a","recipient":"b","body":"x"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_message",
        ),
        (
            "/v1/messages/batch",
            "application/json",
            msg(1).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_batch",
        ),
        ("/v1/messages/batch", "application/json", "[]".into(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_batch"),
        (
            "/v1/messages/batch",
            "application/json",
            Value::Array((0..6).map(msg).collect()).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_batch",
        ),
        ("/nope", "application/json", "{}".into(), StatusCode::NOT_FOUND, "not_found"),
    ];
    for (path, ct, body, status, code) in cases {
        let (st, v, _) = app.post_ct(path, ct, body.clone()).await;
        assert_eq!((st, v["error"].as_str().unwrap_or("")), (status, code), "{path} {body:.80}: {v}");
    }
    // Another method on an API route: 405 with Allow, the same JSON shape.
    for path in ["/v1/messages", "/v1/messages/batch"] {
        let r = app.client.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "GET {path}");
        assert_eq!(r.headers().get("allow").and_then(|v| v.to_str().ok()), Some("POST"), "GET {path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "method_not_allowed", "GET {path}: {v}");
    }
    // Malformed JSON says where.
    let (_, v, _) = app.post("/v1/messages", "{\"sender\": \"a\",\n  oops}").await;
    assert_eq!((v["detail"]["line"].as_u64(), v["detail"]["column"].as_u64()), (Some(2), Some(3)), "{v}");
    // A batch names every bad item, by index and field.
    let mut items: Vec<Value> = (0..4).map(msg).collect();
    items[1]["sender"] = json!("");
    items[3]["recipient"] = json!("r".repeat(65));
    let (st, v, _) = app.post("/v1/messages/batch", Value::Array(items).to_string()).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    let bad: Vec<(u64, &str)> = v["detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["index"].as_u64().unwrap(), e["field"].as_str().unwrap()))
        .collect();
    assert_eq!(bad, [(1, "sender"), (3, "recipient")]);
    // Items that are not messages at all are named by index too, beside field errors.
    let items = json!([msg(0), {"sender": "a", "recipient": "b"}, {"sender": "", "recipient": "b", "body": "x"}, 7]);
    let (st, v, _) = app.post("/v1/messages/batch", items.to_string()).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    let bad: Vec<(u64, Option<&str>)> =
        v["detail"].as_array().unwrap().iter().map(|e| (e["index"].as_u64().unwrap(), e["field"].as_str())).collect();
    assert_eq!(bad, [(1, None), (2, Some("sender")), (3, None)], "{v}");
    assert!(v["detail"][0]["reason"].as_str().unwrap().contains("missing field `body`"), "{v}");
    assert_eq!(records_on_topic(&ns).await, 0, "bad input changes nothing");
}

/// xorshift64*: a small deterministic generator, so a failing body can be reproduced.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A body that can never be valid: which family, and the bytes.
fn malformed(rng: &mut Rng) -> (&'static str, Vec<u8>) {
    let valid = msg(rng.below(1000)).to_string();
    match rng.below(6) {
        0 => ("truncated", valid.as_bytes()[..rng.below(valid.len())].to_vec()),
        1 => ("garbage", (0..rng.below(200)).map(|_| b'!' + rng.below(90) as u8).chain([b'}']).collect()),
        2 => {
            let mut v = msg(1);
            let field = ["sender", "recipient", "id"][rng.below(3)];
            let long = json!("x".repeat(65 + rng.below(10)));
            // Every value here is invalid for its field (`id: null` would be valid: ids are optional).
            v[field] = if field == "id" {
                [json!(""), json!(42), long, json!("sp ace")][rng.below(4)].clone()
            } else {
                [json!(""), json!(42), json!(null), long][rng.below(4)].clone()
            };
            ("bad field", v.to_string().into_bytes())
        }
        3 => {
            let mut v = msg(2);
            v.as_object_mut().unwrap().remove(["sender", "recipient", "body"][rng.below(3)]);
            ("missing field", v.to_string().into_bytes())
        }
        4 => {
            let mut v = msg(3);
            v[format!("x{}", rng.below(100))] = json!(rng.next());
            ("unknown field", v.to_string().into_bytes())
        }
        _ => ("wrong time", {
            let mut v = msg(4);
            v["sent_at"] = json!(format!("2026-13-{}", rng.below(99)));
            v.to_string().into_bytes()
        }),
    }
}

#[tokio::test]
async fn ten_thousand_malformed_bodies_never_5xx_and_never_reach_kafka() {
    let _g = exclusive().await;
    let ns = Namespace::new("fuzz").await;
    let app = spawn(&ns, None, &[]).await;
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for i in 0..10_000 {
        let (family, body) = malformed(&mut rng);
        let path = if i % 2 == 0 { "/v1/messages" } else { "/v1/messages/batch" };
        let body = if path.ends_with("batch") && rng.below(2) == 0 { [b"[", &body[..], b"]"].concat() } else { body };
        let (st, v, _) = app.post(path, body.clone()).await;
        assert!(
            st == StatusCode::BAD_REQUEST || st == StatusCode::UNPROCESSABLE_ENTITY,
            "#{i} {family} on {path}: {st} {v} for {:?}",
            String::from_utf8_lossy(&body)
        );
        assert!(v["error"].is_string() && !v["detail"].is_null(), "#{i}: error body {v}");
    }
    assert_eq!(records_on_topic(&ns).await, 0);
}

#[tokio::test]
async fn ack_kafka_never_says_202_when_the_broker_is_down() {
    let _g = exclusive().await;
    let ns = Namespace::new("down").await;
    let dead = format!("127.0.0.1:{}", free_port());
    // A producer queue of one record: the first message waits in librdkafka for a broker that
    // never answers (it may still be sent if the broker came back: 504 uncertain, with its id);
    // the next ones cannot even enter librdkafka (503: never written).
    let app = spawn(&ns, Some(&dead), &["--deadline-ms", "800", "--producer-queue", "1"]).await;
    for i in 0..4 {
        let t = Instant::now();
        let (st, v, h) = app.post("/v1/messages", msg(i).to_string()).await;
        if i == 0 {
            assert_eq!((st, v["error"].as_str()), (StatusCode::GATEWAY_TIMEOUT, Some("uncertain")), "{v}");
            assert_eq!(v["ids"], json!(["m-0"]), "an uncertain answer names the ids to retry with: {v}");
        } else {
            assert_eq!((st, v["error"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("kafka_unavailable")), "{v}");
        }
        assert!(h.get("retry-after").is_some());
        assert!(t.elapsed() < Duration::from_millis(2000), "answered at the deadline, not later: {:?}", t.elapsed());
    }
}

#[tokio::test]
async fn a_full_ring_answers_503_at_once() {
    let _g = exclusive().await;
    let ns = Namespace::new("full").await;
    let dead = format!("127.0.0.1:{}", free_port());
    // A 64-slot ring (the disruptor's minimum) in front of a producer that holds 1 record and a
    // broker that never answers: in ring-ack mode the first ~65 are accepted, then the ring is full.
    // A record budget smaller than one message keeps each message a record of its own (the ring
    // consumer would otherwise gather a window's messages into one). A record that cannot enter
    // librdkafka gives up half a deadline after it left the ring, freeing a slot: a long deadline
    // keeps that from happening while the 100 requests are sent (with 5 s, a slow machine sent
    // them in more than 2.5 s and a 71st was accepted).
    let app = spawn(
        &ns,
        Some(&dead),
        &[
            "--ack",
            "ring",
            "--ring-size",
            "64",
            "--producer-queue",
            "1",
            "--deadline-ms",
            "120000",
            "--record-max-bytes",
            "1",
        ],
    )
    .await;
    let mut statuses = Vec::new();
    for i in 0..100 {
        let t = Instant::now();
        let (st, v, h) = app.post("/v1/messages", msg(i).to_string()).await;
        if st == StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(v["error"], "ring_full", "{v}");
            assert_eq!(h.get("retry-after").unwrap(), "1");
            assert!(t.elapsed() < Duration::from_millis(500), "a full ring answers at once: {:?}", t.elapsed());
        }
        statuses.push(st.as_u16());
    }
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    assert!((64..=70).contains(&accepted), "the ring's worth accepted, then 503: {statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 503).count(), 100 - accepted, "{statuses:?}");
    let metrics = app.client.get(format!("{}/metrics", app.base)).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with("ingest_ring_rejections_total") && !l.ends_with(" 0")),
        "rejections are counted"
    );
}
