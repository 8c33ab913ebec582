//! The chaos scenarios' progress sampler, every `interval` while a scenario runs.
//!
//! One JSON line per sample into `monitor.jsonl`: `{"t": epoch, "committed": [per partition],
//! "high": [per partition], "w": {port: {"name{labels}": value}}}`. `committed` is the writers'
//! group offset as the broker holds it (what the writers committed, i.e. what is in every store),
//! `high` the high watermark (what the ingest produced); `w` holds the writer metric families the
//! chaos verdicts read, and the 1 s and +Inf buckets of `writer_store_write_seconds` (their
//! difference counts writes slower than 1 s: a stalled store shows there), scraped from each
//! writer's `/metrics` (a writer that is down, or whose host is cut off, is absent; the writers
//! are scraped concurrently, so one that does not answer delays a sample by the scrape timeout
//! at most, not once per writer). The Kafka client is the one every
//! binary builds from `KafkaArgs` (`pipeline_common::kafka::GroupProbe`). The samples are also
//! kept in memory: a scenario waits on them for the pipeline to recover before its next fault.

use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::GroupProbe;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The families kept from each writer's `/metrics`.
const FAMILIES: [&str; 13] = [
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
    // The partition scenarios: which writer owned partitions when its host was cut, and whether
    // it owns any again after the heal; what a zombie stored after it lost the broker.
    "writer_assigned_partitions",
    "writer_store_records_total",
];

/// Seconds since the epoch: the clock of the samples, and of the events they are set against.
pub(super) fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// One sample. A sample whose broker calls failed has no offsets (`error` says why).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Sample {
    pub t: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub committed: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub high: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Writer metrics port → kept series → value.
    #[serde(default)]
    pub w: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Sample {
    /// Both offsets were read.
    pub(super) fn has_offsets(&self) -> bool {
        !self.committed.is_empty() && self.committed.len() == self.high.len()
    }

    /// Records produced and not yet committed, over all partitions.
    pub(super) fn lag(&self) -> i64 {
        self.high.iter().sum::<i64>() - self.committed.iter().sum::<i64>()
    }
}

/// A running monitor; [`Monitor::stop`] ends it.
pub(super) struct Monitor {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    samples: Arc<Mutex<Vec<Sample>>>,
}

impl Monitor {
    /// Samples `kafka`'s group and topic and the writers `writers` (`(key, http://host:port)`:
    /// the key, the writer's metrics port, names its series in `w`) into `out`, every `every`.
    pub(super) fn start(
        kafka: &KafkaArgs,
        out: &Path,
        writers: Vec<(String, String)>,
        every: Duration,
    ) -> anyhow::Result<Monitor> {
        let probe = Arc::new(GroupProbe::new(kafka, &kafka.group, &kafka.topic)?);
        let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build()?;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(out)?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let kept_samples = samples.clone();
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                let started = Instant::now();
                let s = sample(&probe, &http, &writers).await;
                if let Ok(line) = serde_json::to_string(&s) {
                    // A full disk loses monitor lines, which the verdicts then report as gaps.
                    let _ = writeln!(file, "{line}");
                }
                if let Ok(mut v) = kept_samples.lock() {
                    v.push(s);
                }
                tokio::select! {
                    _ = stopped.changed() => return,
                    _ = tokio::time::sleep(every.saturating_sub(started.elapsed())) => {}
                }
            }
        });
        Ok(Monitor { stop, task, samples })
    }

    /// The samples so far that carry offsets (as [`super::files::load_samples`] reads them back).
    pub(super) fn samples(&self) -> Vec<Sample> {
        self.samples.lock().map(|v| v.iter().filter(|s| s.has_offsets()).cloned().collect()).unwrap_or_default()
    }

    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn sample(probe: &Arc<GroupProbe>, http: &reqwest::Client, writers: &[(String, String)]) -> Sample {
    let t = now();
    let mut s = Sample { t: (t * 1000.0).round() / 1000.0, ..Sample::default() };
    let p = probe.clone();
    match tokio::task::spawn_blocking(move || p.sample().map_err(|e| e.to_string())).await {
        Ok(Ok(parts)) => {
            s.committed = parts.iter().map(|p| p.committed.max(0)).collect();
            s.high = parts.iter().map(|p| p.high).collect();
        }
        Ok(Err(e)) => s.error = Some(e),
        Err(e) => s.error = Some(e.to_string()),
    }
    let scrapes = writers.iter().map(|(key, base)| async move {
        let url = format!("{base}/metrics");
        let body = async { http.get(&url).send().await?.error_for_status()?.text().await }.await;
        body.ok().map(|b| (key.clone(), kept(&b)))
    });
    s.w.extend(futures::future::join_all(scrapes).await.into_iter().flatten());
    s
}

/// The kept samples of one `/metrics` body, keyed by the exposition line's name and labels.
fn kept(body: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or("");
        let keep = if name == "writer_store_write_seconds_bucket" {
            line.contains("le=\"1\"") || line.contains("le=\"+Inf\"")
        } else {
            FAMILIES.contains(&name)
        };
        if let (true, Some((key, value))) = (keep, line.rsplit_once(' ')) {
            if let Ok(v) = value.parse::<f64>() {
                out.insert(key.to_string(), v);
            }
        }
    }
    out
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
