//! The edge as a security tester attacks it, against a spawned ingest and the real broker: no
//! key or a wrong one gets 401 and writes nothing; a key removed from the keys file stops
//! working without a restart; a body trickled slower than the deadline is cut with 408 while
//! honest clients keep getting 202; two dozen concurrent 8 MB hostile bodies keep the ingest
//! within its body budget (503 `busy` past it) and far from the memory they used to cost;
//! `/readyz` says nothing of the broker's errors; the admin listener keeps health and metrics
//! off the API port.

use pipeline_testkit::{api_key, client_builder, exclusive, free_port, Namespace, Service};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn msg(id: &str) -> String {
    json!({ "id": id, "sender": "a", "recipient": "b", "body": "edge" }).to_string()
}

struct Ingest {
    child: Service,
    base: String,
}

async fn ingest(ns: &Namespace, args: &[&str], env: &[(&str, String)]) -> Ingest {
    ingest_on(ns, args, env, None).await
}

/// An ingest whose /healthz is on `admin` when given (else on its API port).
async fn ingest_on(ns: &Namespace, args: &[&str], env: &[(&str, String)], admin: Option<u16>) -> Ingest {
    let port = free_port();
    let mut all = vec![("INGEST_LISTEN", format!("127.0.0.1:{port}"))];
    all.extend(env.iter().cloned());
    let child = ns.start("ingest", args, &all, admin.unwrap_or(port), "/healthz").await;
    let base = format!("http://127.0.0.1:{port}");
    Ingest { child, base }
}

async fn post(client: &reqwest::Client, base: &str, body: String) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = client
        .post(format!("{base}/v1/messages"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn only_a_valid_key_writes_and_a_revoked_one_stops_at_once() {
    let _g = exclusive().await;
    let ns = Namespace::new("auth").await;
    let keys = std::env::temp_dir().join(format!("{}.keys", ns.name));
    let line = |name: &str, token: &str| {
        let hash = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes());
        format!("{name} sha256:{}\n", hash.iter().map(|b| format!("{b:02x}")).collect::<String>())
    };
    std::fs::write(&keys, format!("{}{}", line("alice", "pk_alice_0123456789"), line("bob", "pk_bob_0123456789")))
        .unwrap();
    let app = ingest(&ns, &[], &[("INGEST_AUTH_KEYS", keys.display().to_string())]).await;
    let with = |token: &str| {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        reqwest::Client::builder().default_headers(h).build().unwrap()
    };
    let (anyone, alice, bob, wrong) =
        (reqwest::Client::new(), with("pk_alice_0123456789"), with("pk_bob_0123456789"), with("pk_alice_0123456788"));
    for (who, client) in [("no key", &anyone), ("a wrong key", &wrong)] {
        let (status, headers, body) = post(client, &app.base, msg("refused")).await;
        assert_eq!(status, 401, "{who}: {body}");
        assert_eq!(headers["www-authenticate"], "Bearer realm=\"pipeline\"", "{who}");
        assert_eq!(body["error"], "unauthorized", "{who}");
        assert!(!body.to_string().contains("alice"), "nothing about why: {body}");
    }
    assert_eq!(post(&alice, &app.base, msg("by-alice")).await.0, 202);
    assert_eq!(post(&bob, &app.base, msg("by-bob")).await.0, 202);
    let mut accepted = vec!["by-alice".to_string(), "by-alice-2".into(), "by-alice-3".into(), "by-bob".into()];
    // Bob's key revoked: the file is read again when it changes, no restart.
    std::fs::write(&keys, line("alice", "pk_alice_0123456789")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    for i in 0.. {
        let id = format!("by-bob-late-{i}");
        match post(&bob, &app.base, msg(&id)).await.0 {
            401 => break,
            202 => accepted.push(id), // before the reload
            other => panic!("{other}"),
        }
        assert!(Instant::now() < deadline, "the revoked key still works");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(post(&alice, &app.base, msg("by-alice-2")).await.0, 202, "the other key keeps working");
    // A broken file is refused and the keys in force stay.
    std::fs::write(&keys, "not a keys file\n").unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(post(&alice, &app.base, msg("by-alice-3")).await.0, 202);
    // Nothing refused reached Kafka: exactly the accepted messages are on the topic.
    let got = pipeline_testkit::consume_messages(&ns.kafka, accepted.len(), Duration::from_secs(30)).await;
    let mut ids: Vec<String> = got.into_iter().map(|m| m.id).collect();
    ids.sort();
    accepted.sort();
    assert_eq!(ids, accepted);
    // Each request's key is a label of the metrics.
    let metrics = reqwest::get(format!("{}/metrics", app.base)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"ingest_accepted_messages_total{key="alice"} 3"#), "{metrics}");
    assert!(metrics.contains(r#"status="401",key="none""#), "refusals are counted, by no key");
    drop(app);
}

/// RSS of a process, in bytes.
fn rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    kb * 1024
}

#[tokio::test]
async fn slow_and_huge_bodies_are_bounded_while_honest_clients_get_202() {
    let _g = exclusive().await;
    let ns = Namespace::new("bounds").await;
    let app = ingest(&ns, &["--read-timeout-ms", "1500", "--body-budget-bytes", "67108864"], &[]).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let token = api_key().token.clone();
    // Twenty connections announce a 1 MB batch (20 MB in all, within the budget) and trickle it.
    let trickle: Vec<std::thread::JoinHandle<String>> = (0..20)
        .map(|_| {
            let (addr, token) = (addr.clone(), token.clone());
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let head = format!(
                    "POST /v1/messages/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n["
                );
                s.write_all(head.as_bytes()).unwrap();
                let started = Instant::now();
                while started.elapsed() < Duration::from_secs(6) {
                    if s.write_all(b"0,").is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let mut answer = String::new();
                let _ = s.read_to_string(&mut answer);
                answer
            })
        })
        .collect();
    let client = client_builder().timeout(Duration::from_secs(10)).build().unwrap();
    for i in 0..20 {
        let (status, _, body) = post(&client, &app.base, msg(&format!("honest-{i}"))).await;
        assert_eq!(status, 202, "an honest client meanwhile: {body}");
    }
    for t in trickle {
        let answer = t.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "a trickled body is cut at the deadline: {answer:.120}");
    }
    // Two dozen concurrent 8 MB bodies of zeros: each answered 422 or 503 busy, never 5xx
    // otherwise, and the ingest's memory stays far below what they used to cost (~1.4 GB).
    let pid = app.child.pid();
    let before = rss(pid);
    let zeros = {
        let mut z = String::with_capacity(8_000_000);
        z.push('[');
        while z.len() < 8_000_000 - 2 {
            z.push_str("0,");
        }
        z.push_str("0]");
        z
    };
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(before));
    let watch = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss(pid), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let posts = (0..24).map(|_| {
        let (client, url, body) = (client.clone(), format!("{}/v1/messages/batch", app.base), zeros.clone());
        tokio::spawn(async move {
            let r = client.post(url).header("content-type", "application/json").body(body).send().await;
            r.map(|r| r.status().as_u16()).unwrap_or(0)
        })
    });
    let statuses: Vec<u16> = futures::future::join_all(posts).await.into_iter().map(|r| r.unwrap()).collect();
    watch.abort();
    assert!(statuses.iter().all(|s| *s == 422 || *s == 503), "{statuses:?}");
    assert!(statuses.contains(&422), "some were parsed and refused: {statuses:?}");
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    assert!(peak < 512 << 20, "ingest RSS peaked at {} MB (before: {} MB)", peak >> 20, before >> 20);
    let after = client
        .post(format!("{}/v1/messages", app.base))
        .header("content-type", "application/json")
        .body(msg("after"))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 202, "still serving");
}

#[tokio::test]
async fn readiness_tells_nothing_of_the_broker_and_the_admin_port_keeps_health_off_the_api() {
    let _g = exclusive().await;
    let ns = Namespace::new("ready").await;
    // No broker at all: not ready, and the answer says only that.
    let dead = ingest(&ns, &[], &[("KAFKA_BROKERS", format!("127.0.0.1:{}", free_port()))]).await;
    let r = reqwest::get(format!("{}/readyz", dead.base)).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({ "status": "not_ready" }));
    drop(dead);
    let admin = free_port();
    let app = ingest_on(&ns, &["--admin-listen", &format!("127.0.0.1:{admin}")], &[], Some(admin)).await;
    for path in ["/metrics", "/readyz"] {
        assert_eq!(
            reqwest::get(format!("{}{path}", app.base)).await.unwrap().status(),
            404,
            "{path} is not on the API port"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while reqwest::get(format!("http://127.0.0.1:{admin}/readyz")).await.map(|r| r.status().as_u16()).unwrap_or(0)
        != 200
    {
        assert!(Instant::now() < deadline, "ready on the admin port");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let m = reqwest::get(format!("http://127.0.0.1:{admin}/metrics")).await.unwrap().text().await.unwrap();
    assert!(m.contains("ingest_body_budget_bytes"), "{m:.300}");
}

#[tokio::test]
async fn a_key_past_its_limits_is_refused_while_another_keeps_its_rate() {
    let _g = exclusive().await;
    let ns = Namespace::new("limits").await;
    let keys = std::env::temp_dir().join(format!("{}.keys", ns.name));
    let line = |name: &str, token: &str, extra: &str| {
        let hash = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes());
        format!("{name} sha256:{} {extra}\n", hash.iter().map(|b| format!("{b:02x}")).collect::<String>())
    };
    // Alice: 5 messages a second. Bob: unlimited, but 1 % of a 1 MB ring (10 KB) in flight.
    let text =
        format!("{}{}", line("alice", "pk_alice_0123456789", "rate=5"), line("bob", "pk_bob_0123456789", "share=0.01"));
    std::fs::write(&keys, text).unwrap();
    let args = ["--ring-max-bytes", "1000000"];
    let app = ingest(&ns, &args, &[("INGEST_AUTH_KEYS", keys.display().to_string())]).await;
    let with = |token: &str| {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        reqwest::Client::builder().default_headers(h).build().unwrap()
    };
    let (alice, bob) = (with("pk_alice_0123456789"), with("pk_bob_0123456789"));
    let mut statuses = Vec::new();
    for i in 0..20 {
        let (status, headers, _) = post(&alice, &app.base, msg(&format!("a-{i}"))).await;
        if status == 429 {
            assert!(headers.contains_key("retry-after"), "429 says when to retry");
        }
        statuses.push(status);
    }
    assert!(statuses.iter().take(5).all(|s| *s == 202), "the first second's five pass: {statuses:?}");
    assert!(statuses.contains(&429), "then 429: {statuses:?}");
    // Bob, concurrently: batches of ~3 KB, at most ~10 KB in flight; past it 503 key_busy for
    // him alone, while Alice (rate-limited, not share-limited) is unaffected by his share.
    let batch = |k: usize| {
        let items: Vec<Value> = (0..20)
            .map(|j| json!({ "id": format!("b-{k}-{j}"), "sender": "s", "recipient": "r", "body": "x".repeat(100) }))
            .collect();
        Value::Array(items).to_string()
    };
    let posts = (0..12).map(|k| {
        let (bob, url, body) = (bob.clone(), format!("{}/v1/messages/batch", app.base), batch(k));
        tokio::spawn(async move {
            let r = bob.post(url).header("content-type", "application/json").body(body).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        })
    });
    let answers: Vec<(u16, Value)> = futures::future::join_all(posts).await.into_iter().map(|r| r.unwrap()).collect();
    assert!(answers.iter().all(|(s, _)| *s == 202 || *s == 503), "{answers:?}");
    assert!(answers.iter().any(|(s, b)| *s == 503 && b["error"] == "key_busy"), "{answers:?}");
    assert!(answers.iter().any(|(s, _)| *s == 202), "{answers:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(post(&alice, &app.base, msg("a-late")).await.0, 202, "alice's bucket refills");
    let metrics = reqwest::get(format!("{}/metrics", app.base)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"ingest_key_refusals_total{key="alice",reason="rate"}"#), "{metrics}");
    assert!(metrics.contains(r#"ingest_key_refusals_total{key="bob",reason="share"}"#), "{metrics}");
}
