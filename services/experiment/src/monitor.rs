//! `experiment monitor`: the chaos suite's progress samples, every `--interval` until SIGTERM.
//!
//! One JSON line per sample: `{"t": epoch, "committed": [per partition], "high": [per
//! partition], "w": {port: {"name{labels}": value}}}`. `committed` is the writers' group offset as
//! the broker holds it (what the writers committed, i.e. what is in every store), `high` the high
//! watermark (what the ingest produced); `w` holds the writer metric families the chaos report
//! reads, and the 1 s and +Inf buckets of `writer_store_write_seconds` (their difference counts
//! writes slower than 1 s: a stalled store shows there), scraped from each writer's `/metrics`
//! (a writer that is down is absent). The Kafka client is the one every binary builds from
//! `KafkaArgs` (`pipeline_common::kafka::GroupProbe`).

use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::GroupProbe;
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The families kept from each writer's `/metrics`.
const FAMILIES: [&str; 11] = [
    "writer_store_retries_total",
    "writer_store_errors_total",
    "writer_pool_rejected_total",
    "writer_pool_queue_depth",
    "writer_pool_queue_depth_peak",
    "writer_pool_active_workers",
    "writer_pool_caller_runs_total",
    "writer_records_total",
    "writer_dlq_records_total",
    "writer_consumer_failures_total",
    "pipeline_process_info",
];

#[derive(clap::Args)]
pub struct MonitorArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// The JSON lines file, appended to.
    #[arg(long)]
    pub out: PathBuf,
    /// The writers' metrics ports on 127.0.0.1, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub writers: Vec<u16>,
    /// Seconds between samples.
    #[arg(long, default_value_t = 0.5)]
    pub interval: f64,
}

/// The kept samples of one `/metrics` body, keyed by the exposition line's name and labels.
fn kept(body: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for line in body.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or("");
        let keep = if name == "writer_store_write_seconds_bucket" {
            line.contains("le=\"1\"") || line.contains("le=\"+Inf\"")
        } else {
            FAMILIES.contains(&name)
        };
        if let (true, Some((key, value))) = (keep, line.rsplit_once(' ')) {
            if let Ok(v) = value.parse::<f64>() {
                out.insert(key.to_string(), json!(v));
            }
        }
    }
    out
}

pub async fn run(args: &MonitorArgs) -> anyhow::Result<()> {
    let probe = Arc::new(GroupProbe::new(&args.kafka, &args.kafka.group, &args.kafka.topic)?);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build()?;
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(&args.out)?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let every = Duration::from_secs_f64(args.interval.max(0.05));
    loop {
        let started = Instant::now();
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let mut rec = Map::new();
        rec.insert("t".into(), json!((t * 1000.0).round() / 1000.0));
        let p = probe.clone();
        let sampled = tokio::task::spawn_blocking(move || p.sample().map_err(|e| e.to_string()))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        match sampled {
            Ok(parts) => {
                rec.insert("committed".into(), parts.iter().map(|p| p.committed.max(0)).collect());
                rec.insert("high".into(), parts.iter().map(|p| p.high).collect());
            }
            Err(e) => {
                rec.insert("error".into(), json!(e));
            }
        }
        let mut writers = Map::new();
        for port in &args.writers {
            let url = format!("http://127.0.0.1:{port}/metrics");
            if let Ok(body) = async { http.get(&url).send().await?.error_for_status()?.text().await }.await {
                writers.insert(port.to_string(), Value::Object(kept(&body)));
            }
        }
        rec.insert("w".into(), Value::Object(writers));
        writeln!(out, "{}", Value::Object(rec))?;
        tokio::select! {
            _ = term.recv() => return Ok(()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = tokio::time::sleep(every.saturating_sub(started.elapsed())) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_the_families_and_the_two_buckets() {
        let body = "# HELP x\nwriter_pool_queue_depth{pool=\"es\"} 3\nwriter_store_write_seconds_bucket{store=\"es\",le=\"1\"} 7\n\
                    writer_store_write_seconds_bucket{store=\"es\",le=\"0.5\"} 6\nwriter_store_write_seconds_bucket{store=\"es\",le=\"+Inf\"} 9\n\
                    ingest_requests_total 4\n";
        let k = super::kept(body);
        assert_eq!(k.len(), 3, "{k:?}");
        assert_eq!(k["writer_pool_queue_depth{pool=\"es\"}"], 3.0);
        assert_eq!(k["writer_store_write_seconds_bucket{store=\"es\",le=\"+Inf\"}"], 9.0);
    }
}
