//! Every second (a soak: every `sample_every_s`), for the whole round: every sample of the
//! writer's and the ingest's `/metrics` (histogram buckets aside), the CPU time, RSS, open file
//! descriptors and threads of every process of the round (writer, ingest, k6, the five servers),
//! and the bytes on disk of each server's data (when the round watches them: a soak), appended
//! to the round's `timeline.csv`.
//!
//! The file is long, one value per row (`t_s,source,name,labels,value`), because the series are
//! not known in advance (a pool appears when the writer creates it) and because a reader can
//! grep it. It costs a few HTTP GETs and /proc reads per second: nothing next to the load.

use crate::prom;
use pipeline_common::procstat::{cpu_rss, disk_bytes, fds_threads, machine_busy};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub(crate) const HEADER: &str = "t_s,source,name,labels,value";

#[derive(Debug, thiserror::Error)]
pub(crate) enum SampleError {
    #[error("timeline {0}: {1}")]
    Io(String, std::io::Error),
    #[error("the sampler task ended abnormally: {0}")]
    Join(String),
}

#[derive(Default)]
struct Targets {
    procs: Vec<(String, u32)>,
    /// (source, metrics URL)
    urls: Vec<(String, String)>,
    /// (server, its data on disk)
    dirs: Vec<(String, std::path::PathBuf)>,
}

pub(crate) struct Sampler {
    targets: Arc<Mutex<Targets>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<u64, SampleError>>,
}

impl Sampler {
    /// Starts sampling into `path` every `every`; times are seconds since `t0`.
    pub(crate) fn start(
        path: &Path,
        t0: Instant,
        http: reqwest::Client,
        every: Duration,
    ) -> Result<Sampler, SampleError> {
        let io = |e| SampleError::Io(path.display().to_string(), e);
        let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
        writeln!(out, "{HEADER}").map_err(io)?;
        let targets = Arc::new(Mutex::new(Targets::default()));
        let (stop, mut stopped) = watch::channel(false);
        let shared = targets.clone();
        let name = path.display().to_string();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut rows = 0u64;
            loop {
                let last = tokio::select! {
                    _ = tick.tick() => false,
                    _ = stopped.changed() => true,
                };
                rows +=
                    sample_once(&shared, &http, t0, &mut out).await.map_err(|e| SampleError::Io(name.clone(), e))?;
                if last {
                    out.flush().map_err(|e| SampleError::Io(name.clone(), e))?;
                    return Ok(rows);
                }
            }
        });
        Ok(Sampler { targets, stop, task })
    }

    pub(crate) fn add_proc(&self, name: &str, pid: u32) {
        if let Ok(mut t) = self.targets.lock() {
            t.procs.retain(|(n, _)| n != name);
            t.procs.push((name.to_string(), pid));
        }
    }

    /// Samples the bytes on disk under `path` as `server`'s data.
    pub(crate) fn add_dir(&self, server: &str, path: &Path) {
        if let Ok(mut t) = self.targets.lock() {
            t.dirs.push((server.to_string(), path.to_path_buf()));
        }
    }

    pub(crate) fn add_url(&self, source: &str, url: &str) {
        if let Ok(mut t) = self.targets.lock() {
            t.urls.retain(|(s, _)| s != source);
            t.urls.push((source.to_string(), url.to_string()));
        }
    }

    /// Takes a last sample, closes the file, returns the rows written.
    pub(crate) async fn finish(self) -> Result<u64, SampleError> {
        let _ = self.stop.send(true);
        self.task.await.map_err(|e| SampleError::Join(e.to_string()))?
    }
}

async fn sample_once(
    targets: &Mutex<Targets>,
    http: &reqwest::Client,
    t0: Instant,
    out: &mut impl Write,
) -> std::io::Result<u64> {
    let (procs, urls, dirs) = match targets.lock() {
        Ok(t) => (t.procs.clone(), t.urls.clone(), t.dirs.clone()),
        Err(_) => return Ok(0),
    };
    let t = t0.elapsed().as_secs_f64();
    let mut rows = 0;
    for (source, url) in &urls {
        let body = match http.get(url).timeout(Duration::from_millis(900)).send().await {
            Ok(r) if r.status().is_success() => r.text().await.ok(),
            _ => None,
        };
        writeln!(out, "{t:.3},sampler,scrape_ok,source={source},{}", u8::from(body.is_some()))?;
        rows += 1;
        for s in body.as_deref().map(prom::parse).unwrap_or_default() {
            writeln!(out, "{t:.3},{source},{},{},{}", s.name, s.labels, s.value)?;
            rows += 1;
        }
    }
    if let Some(busy) = machine_busy() {
        writeln!(out, "{t:.3},machine,cpu_busy_seconds,,{busy:.3}")?;
        rows += 1;
    }
    for (name, pid) in &procs {
        if let Some((cpu, rss)) = cpu_rss(Some(*pid)) {
            writeln!(out, "{t:.3},proc,cpu_seconds,process={name},{cpu:.3}")?;
            writeln!(out, "{t:.3},proc,rss_bytes,process={name},{rss}")?;
            rows += 2;
        }
        if let Some((fds, threads)) = fds_threads(*pid) {
            writeln!(out, "{t:.3},proc,open_fds,process={name},{fds}")?;
            writeln!(out, "{t:.3},proc,threads,process={name},{threads}")?;
            rows += 2;
        }
    }
    for (server, path) in &dirs {
        // A walk of a large data folder is file-system work: off the runtime's threads.
        let p = path.clone();
        if let Ok(Some(bytes)) = tokio::task::spawn_blocking(move || disk_bytes(&p)).await {
            writeln!(out, "{t:.3},disk,data_bytes,server={server},{bytes}")?;
            rows += 1;
        }
    }
    out.flush()?;
    Ok(rows)
}
