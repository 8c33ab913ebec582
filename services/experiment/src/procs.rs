//! The processes of a round: starting a fresh writer or ingest, reading its boot id, stopping
//! it, and reading any process's CPU time and RSS from /proc (ours, k6's and the servers').
//!
//! A fresh process per round is the reference's first lesson: its benchmark once measured the same
//! app nine times because a new one failed to bind silently. So a start refuses a port that
//! already answers, and the boot id is read from the process we started.

use pipeline_common::procstat::cpu_rss;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("something already answers {0} (another writer or ingest?): stop it or choose another address")]
    PortTaken(String),
    #[error("cannot start {0}: {1}")]
    Spawn(String, std::io::Error),
    #[error("{0} exited ({1}) before answering {2}; see its log")]
    Exited(String, String, String),
    #[error("{0} did not answer {1} within {2} s")]
    NotReady(String, String, u64),
    #[error("{0}: no boot_id in the /healthz answer ({1})")]
    NoBootId(String, String),
}

/// A service we started (writer or ingest).
pub struct Service {
    pub child: Child,
    pub pid: u32,
    /// `http://host:port`
    pub base: String,
}

/// What to start, and how to know it is up.
pub struct Launch<'a> {
    /// For errors and logs: `writer` or `ingest`.
    pub name: &'a str,
    pub bin: &'a Path,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    /// Takes stdout and stderr.
    pub log: &'a Path,
    /// `http://host:port`: nothing may answer there before the start.
    pub base: &'a str,
    /// The path that answers 200 once the service is ready.
    pub ready: &'a str,
    pub timeout: Duration,
}

/// Starts `bin args` with stdout and stderr in `log`, then waits until `base+ready` answers 200.
pub async fn start(http: &reqwest::Client, launch: Launch<'_>) -> Result<Service, ProcError> {
    let Launch { name, bin, args, env, log, base, ready, timeout } = launch;
    if get_ok(http, &format!("{base}/healthz")).await {
        return Err(ProcError::PortTaken(format!("{base}/healthz")));
    }
    let out = std::fs::File::create(log).map_err(|e| ProcError::Spawn(name.into(), e))?;
    let err = out.try_clone().map_err(|e| ProcError::Spawn(name.into(), e))?;
    let mut child = Command::new(bin)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ProcError::Spawn(format!("{name} ({})", bin.display()), e))?;
    let pid = child.id().unwrap_or(0);
    let url = format!("{base}{ready}");
    let deadline = Instant::now() + timeout;
    loop {
        if get_ok(http, &url).await {
            return Ok(Service { child, pid, base: base.into() });
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(ProcError::Exited(name.into(), st.to_string(), url));
        }
        if Instant::now() > deadline {
            return Err(ProcError::NotReady(name.into(), url, timeout.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn get_ok(http: &reqwest::Client, url: &str) -> bool {
    matches!(http.get(url).send().await, Ok(r) if r.status().is_success())
}

/// The boot id a service reports on `/healthz`.
pub async fn boot_id(http: &reqwest::Client, base: &str) -> Result<String, ProcError> {
    let url = format!("{base}/healthz");
    let r = http.get(&url).send().await.map_err(|e| ProcError::NoBootId(url.clone(), e.to_string()))?;
    let v: serde_json::Value = r.json().await.map_err(|e| ProcError::NoBootId(url.clone(), e.to_string()))?;
    v.get("boot_id").and_then(|b| b.as_str()).map(str::to_string).ok_or_else(|| ProcError::NoBootId(url, v.to_string()))
}

/// Sends a signal with kill(1) (no libc binding for one call).
pub fn signal(pid: u32, sig: &str) -> bool {
    std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

impl Service {
    /// SIGTERM, then up to `grace` for a clean exit (the writer commits what it stored), then
    /// SIGKILL. Returns how it ended, for the round's record.
    pub async fn stop(mut self, grace: Duration) -> String {
        if let Ok(Some(st)) = self.child.try_wait() {
            return format!("had already exited ({st})");
        }
        signal(self.pid, "TERM");
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(st)) => format!("exited after SIGTERM ({st})"),
            _ => {
                let _ = self.child.kill().await;
                format!("SIGKILLed after {} s of SIGTERM", grace.as_secs())
            }
        }
    }
}

/// The servers of the native stack with their pids, from the pid files `scripts/stack` writes,
/// `<stack>/<name>.pid` for Kafka and each store (`$STACK_DIR` or `<root>/.stack`). Servers not
/// running, or started some other way, are left out (and the report says which it sampled).
pub fn server_pids(root: &Path) -> Vec<(String, u32)> {
    let stack = crate::paths::stack_dir(root);
    let names = std::iter::once("kafka").chain(pipeline_stores::StoreKind::ALL.iter().map(|k| k.name()));
    names
        .map(|n| (n, stack.join(format!("{n}.pid"))))
        .filter_map(|(name, f)| {
            let pid: u32 = std::fs::read_to_string(f).ok()?.trim().parse().ok()?;
            cpu_rss(Some(pid)).map(|_| (name.to_string(), pid))
        })
        .collect()
}
