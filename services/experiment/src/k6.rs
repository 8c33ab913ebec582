//! One k6 run of a round: the closed loop (`k6/closed-loop.js`, warm-up rounds then the measured
//! phase), the open loop (`k6/open-loop.js` at one rate) or batches (`k6/batch.js`), with the id log on, so reconcile can
//! check the stores id by id against what k6 saw accepted.

use crate::plan::{LoadKind, Plan};
use crate::sampler::Sampler;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub(crate) enum K6Error {
    #[error("cannot start k6 ({0}): {1}")]
    Spawn(String, std::io::Error),
    #[error("k6 log {0}: {1}")]
    Log(String, std::io::Error),
}

/// What the round records about its k6 run (times in seconds since the round's start).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct K6Run {
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    pub exit_code: Option<i32>,
    pub started_s: f64,
    /// When the scenarios began (k6's setup wrote the id log's first line).
    pub scenarios_s: Option<f64>,
    /// Start of the measured phase: scenarios start + the warm-up rounds and their gaps.
    pub measured_s: f64,
    pub ended_s: f64,
}

pub(crate) struct K6Job<'a> {
    pub k6: &'a Path,
    pub root: &'a Path,
    pub dir: &'a Path,
    pub ingest_url: &'a str,
    pub plan: &'a Plan,
    /// VUs (closed) or the rate (open).
    pub point: u32,
    pub run_id: String,
}

/// The summary and id log paths of a round.
pub(crate) fn summary_path(dir: &Path) -> PathBuf {
    dir.join("k6-summary.json")
}

pub(crate) fn ids_path(dir: &Path) -> PathBuf {
    dir.join("k6-ids.log")
}

/// Seconds from the scenarios' start to the measured phase, as the scripts lay them out
/// (closed-loop.js: rounds 1 s apart, the measured phase 5 s after the last; open-loop.js the same).
pub(crate) fn measured_offset(plan: &Plan) -> f64 {
    let (n, d) = crate::plan::warmup(&plan.warmup).unwrap_or((0, "0s".into()));
    let secs = crate::duration::seconds(&d).unwrap_or(0.0);
    if n == 0 {
        0.0
    } else {
        f64::from(n) * (secs + 1.0) + 5.0
    }
}

/// The variables every k6 run gets: where to send, where its summary and id log go (the id log
/// is what reconcile checks the stores against), the run id that starts its message ids, and
/// the lab's API key file.
pub(crate) fn base_env(
    root: &Path,
    ingest_url: &str,
    summary: &Path,
    ids: &Path,
    run_id: &str,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("INGEST_URL".into(), ingest_url.into()),
        ("SUMMARY_FILE".into(), summary.display().to_string()),
        ("K6_CONSOLE_OUTPUT".into(), ids.display().to_string()),
        ("K6_LOG_FORMAT".into(), "raw".into()),
        ("K6_NO_USAGE_REPORT".into(), "true".into()),
        ("RUN_ID".into(), run_id.into()),
    ];
    env.extend(crate::paths::lab_key_env(root));
    env
}

/// Starts `k6 run -q SCRIPT` in the checkout with `env` added, its output in `log`.
pub(crate) fn spawn(
    k6: &Path,
    root: &Path,
    script: &str,
    env: &[(String, String)],
    log: &Path,
) -> Result<tokio::process::Child, K6Error> {
    let mut cmd = tokio::process::Command::new(k6);
    cmd.args(["run", "-q", script]).envs(env.iter().map(|(k, v)| (k, v))).current_dir(root);
    crate::procs::logged(&mut cmd, log).map_err(|e| K6Error::Log(log.display().to_string(), e))?;
    cmd.spawn().map_err(|e| K6Error::Spawn(k6.display().to_string(), e))
}

/// Runs k6 to its end; its pid is sampled meanwhile as `k6`.
pub(crate) async fn run(job: &K6Job<'_>, t0: Instant, sampler: &Sampler) -> Result<K6Run, K6Error> {
    let script = match job.plan.load {
        LoadKind::Closed => "k6/closed-loop.js",
        LoadKind::Open => "k6/open-loop.js",
        LoadKind::Batch => "k6/batch.js",
    };
    let (rounds, each) = crate::plan::warmup(&job.plan.warmup).unwrap_or((0, "0s".into()));
    let summary = summary_path(job.dir);
    let ids = ids_path(job.dir);
    let _ = std::fs::remove_file(&summary);
    let _ = std::fs::remove_file(&ids);
    let mut env = base_env(job.root, job.ingest_url, &summary, &ids, &job.run_id);
    env.extend([
        ("DURATION".into(), job.plan.duration.clone()),
        ("WARMUP_ROUNDS".into(), rounds.to_string()),
        ("WARMUP".into(), each),
    ]);
    match job.plan.load {
        LoadKind::Closed => env.push(("VUS".into(), job.point.to_string())),
        LoadKind::Batch => {
            env.push(("VUS".into(), job.point.to_string()));
            env.push(("BATCH".into(), job.plan.batch.to_string()));
        }
        LoadKind::Open => {
            env.push(("RATE".into(), job.point.to_string()));
            env.push(("MAX_VUS".into(), job.plan.max_vus.to_string()));
            env.push(("PRE_VUS".into(), job.plan.max_vus.min(job.point.max(10)).to_string()));
            if !job.plan.window.is_empty() {
                env.push(("WINDOW".into(), job.plan.window.clone()));
            }
        }
    }
    let args = vec!["run".to_string(), "-q".to_string(), script.to_string()];
    let started_s = t0.elapsed().as_secs_f64();
    let mut child = spawn(job.k6, job.root, script, &env, &job.dir.join("k6.log"))?;
    if let Some(pid) = child.id() {
        sampler.add_proc("k6", pid);
    }
    // Watch the id log appear (setup's first line): that is when the scenarios start. A stat
    // every 100 ms until then; after that only the wait.
    let mut scenarios_s = None;
    let status = loop {
        tokio::select! {
            st = child.wait() => break st.ok(),
            _ = tokio::time::sleep(Duration::from_millis(100)), if scenarios_s.is_none() => {
                if std::fs::metadata(&ids).map(|m| m.len() > 0).unwrap_or(false) {
                    scenarios_s = Some(t0.elapsed().as_secs_f64());
                }
            }
        }
    };
    let ended_s = t0.elapsed().as_secs_f64();
    let start = scenarios_s.unwrap_or(started_s + 1.0);
    let mut command = vec![job.k6.display().to_string()];
    command.extend(args);
    Ok(K6Run {
        command,
        env,
        exit_code: status.and_then(|s| s.code()),
        started_s,
        scenarios_s,
        measured_s: start + measured_offset(job.plan),
        ended_s,
    })
}
