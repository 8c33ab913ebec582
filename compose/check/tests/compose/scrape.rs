//! The dashboard's metrics present in a real scrape of a running writer and ingest.

use crate::dashboard::dashboard_metrics;
use crate::promql::catalog_metric;
use crate::Json;
use pipeline_common::catalog;
use pipeline_testkit as kit;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Metrics that exist only once their event happened (a refusal, an error): declared in the
/// catalog, graphed, and absent from a healthy run's scrape. Everything else the dashboard
/// reads must be in the scrape below.
const EVENT_ONLY: [&str; 4] = [
    "ingest_kafka_errors_total",       // a broker refusal
    "ingest_uncertain_messages_total", // a 504
    "writer_store_errors_total",       // a failed store write
    "writer_store_retries_total",      // a retried store write
];

async fn scrape(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("GET /metrics on :{port}: {e}"))
        .text()
        .await
        .expect("metrics text")
}

fn sampled(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or("").to_string())
        .collect()
}

async fn wait_http(url: &str, child: &mut kit::Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if reqwest::get(url).await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        if let Ok(Some(st)) = child.0.try_wait() {
            panic!("{what} exited ({st}) before {url} answered");
        }
        assert!(Instant::now() < deadline, "{what}: {url} did not answer in 90 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The dashboard's metrics against a real scrape: a writer and an ingest on the stack's servers
/// (a private namespace), 40 messages through them, one poison record (for the dead-letter
/// counter) and a batch refused by a second ingest with a 64-slot ring (for ring_full), then their
/// `/metrics`. Needs `scripts/stack up`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_metric_is_in_a_real_scrape() {
    let _x = kit::exclusive().await;
    let ns = kit::Namespace::new("compose").await;
    let (wport, iport) = (kit::free_port(), kit::free_port());
    let dlq = format!("{}.dlq", ns.name);
    // Adaptive pools, so the dashboard's adaptive series (limit, round trip) are scraped too.
    let mut writer = ns.spawn(
        "writer",
        &["--pool-adaptive"],
        &[("WRITER_METRICS_ADDR", format!("127.0.0.1:{wport}")), ("WRITER_DLQ_TOPIC", dlq.clone())],
    );
    let mut ingest = ns.spawn("ingest", &[], &[("INGEST_LISTEN", format!("127.0.0.1:{iport}"))]);
    wait_http(&format!("http://127.0.0.1:{wport}/healthz"), &mut writer, "writer").await;
    wait_http(&format!("http://127.0.0.1:{iport}/readyz"), &mut ingest, "ingest").await;

    let client = kit::client();
    let msgs = kit::messages(40, "compose");
    for m in &msgs[..20] {
        let r = client
            .post(format!("http://127.0.0.1:{iport}/v1/messages"))
            .header("content-type", "application/json")
            .body(kit::request_json(m))
            .send()
            .await
            .expect("POST");
        assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    }
    let batch = format!("[{}]", msgs[20..].iter().map(kit::request_json).collect::<Vec<_>>().join(","));
    let r = client
        .post(format!("http://127.0.0.1:{iport}/v1/messages/batch"))
        .header("content-type", "application/json")
        .body(batch)
        .send()
        .await
        .expect("POST batch");
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    kit::produce_raw(&ns.kafka, &ns.kafka.topic, [(b"poison".to_vec(), b"not a message".to_vec())]).await;
    // A ring of 64 slots refuses a batch of 100 records (a record budget of 1 byte puts each
    // message in a record of its own): ingest_ring_rejections_total{reason="slots"}.
    let tport = kit::free_port();
    let mut tiny = ns.spawn(
        "ingest",
        &[],
        &[
            ("INGEST_LISTEN", format!("127.0.0.1:{tport}")),
            ("INGEST_RING_SIZE", "64".to_string()),
            ("INGEST_RECORD_MAX_BYTES", "1".to_string()),
        ],
    );
    wait_http(&format!("http://127.0.0.1:{tport}/readyz"), &mut tiny, "ingest with a tiny ring").await;
    let refused = kit::messages(100, "compose-refused");
    let batch = format!("[{}]", refused.iter().map(kit::request_json).collect::<Vec<_>>().join(","));
    let r = client
        .post(format!("http://127.0.0.1:{tport}/v1/messages/batch"))
        .header("content-type", "application/json")
        .body(batch)
        .send()
        .await
        .expect("POST batch");
    assert_eq!(r.status(), 503, "a batch larger than the ring: {}", r.text().await.unwrap_or_default());

    // Everything stored in all four stores, the poison dead-lettered, offsets committed and the
    // high watermarks sampled (every 5 s).
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let stored = kit::metric(wport, "writer_store_records_total").await;
        let dead = kit::metric(wport, "writer_dlq_records_total").await;
        let text = scrape(wport).await;
        let names = sampled(&text);
        if stored >= 4.0 * msgs.len() as f64
            && dead >= 1.0
            && names.contains("writer_partition_committed_offset")
            && names.contains("writer_partition_high_watermark")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the writer did not store 4 × 40 records and a dead letter in 90 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (wtext, itext) = (scrape(wport).await, scrape(iport).await);
    let mut seen = sampled(&wtext);
    seen.extend(sampled(&itext));
    seen.extend(sampled(&scrape(tport).await));
    let mut missing = Vec::new();
    for m in dashboard_metrics() {
        let histogram = catalog::ALL.iter().any(|(k, n, _)| *n == m && *k == "histogram");
        let present = if histogram { seen.contains(&format!("{m}_bucket")) } else { seen.contains(m) };
        if !present && !EVENT_ONLY.contains(&m) {
            missing.push(m);
        }
        println!("{m}: {}", if present { "scraped" } else { "not scraped (only after its event)" });
    }
    assert!(missing.is_empty(), "the dashboard reads metrics no service exported: {missing:?}");
    for m in EVENT_ONLY {
        assert!(catalog_metric(m).is_some(), "{m} is not in the catalog");
    }
    // The info metric names each service, with the boot id of its /healthz.
    for (port, service, text) in [(wport, "writer", &wtext), (iport, "ingest", &itext)] {
        let health: Json =
            reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await.unwrap().json().await.unwrap();
        let boot = health["boot_id"].as_str().expect("boot_id on /healthz");
        let info = text.lines().find(|l| l.starts_with("pipeline_process_info{")).expect("pipeline_process_info");
        assert!(info.contains(&format!("service=\"{service}\"")), "{info}");
        assert!(info.contains(&format!("boot_id=\"{boot}\"")), "{info} vs /healthz {boot}");
        assert!(
            text.lines().any(|l| l.starts_with("process_start_time_seconds ")),
            "{service}: no process_start_time_seconds"
        );
        assert!(!text.contains("process_boot_id"), "{service} still exports process_boot_id");
    }
    writer.signal("TERM");
    writer.wait_exit(Duration::from_secs(40));
}
