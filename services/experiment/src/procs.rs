//! The one process supervisor of the experiment's rounds and chaos scenarios: starting a fresh
//! writer or ingest, reading its boot id, stopping or killing it (signals through `nix`), running
//! reconcile, and finding the native stack's servers by their pid files.
//!
//! A fresh process per round is the reference's first lesson: its benchmark once measured the same
//! app nine times because a new one failed to bind silently. So a start refuses a port that
//! already answers, and the boot id is read from the process we started.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pipeline_common::procstat::cpu_rss;
use pipeline_stores::Selection;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcError {
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
pub(crate) struct Service {
    pub child: Child,
    pub pid: u32,
    /// `http://host:port`
    pub base: String,
}

/// What to start, and how to know it is up.
pub(crate) struct Launch<'a> {
    /// For errors and logs: `writer` or `ingest`.
    pub name: &'a str,
    pub bin: &'a Path,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    /// Takes stdout and stderr (appended).
    pub log: &'a Path,
    /// `http://host:port`: nothing may answer there before the start.
    pub base: &'a str,
    /// The path that answers 200 once the service is ready.
    pub ready: &'a str,
    pub timeout: Duration,
}

/// Sets `cmd` up as every process the experiment starts: no stdin, stdout and stderr appended to
/// `log` (a restarted process, a chaos scenario's writer, keeps one log), killed if dropped (an
/// interrupted run leaves nothing behind).
pub(crate) fn logged(cmd: &mut Command, log: &Path) -> std::io::Result<()> {
    let out = std::fs::File::options().create(true).append(true).open(log)?;
    let err = out.try_clone()?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(true);
    Ok(())
}

/// Runs a program to its end with no stdin, killed if the caller is dropped, and returns its exit
/// status with what it printed, stderr first: the bench's reference examples and the broker probe
/// (`crate::beside`) keep that text as their evidence, whatever the status.
pub(crate) async fn run_to_end(bin: &Path, argv: &[&str], root: &Path) -> std::io::Result<(ExitStatus, String)> {
    let out = Command::new(bin).args(argv).current_dir(root).stdin(Stdio::null()).kill_on_drop(true).output().await?;
    let text = [String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout)].concat();
    Ok((out.status, text))
}

/// The stores of this run (`--stores`, env `STORES`), chosen once at the start.
static STORES: OnceLock<Selection> = OnceLock::new();

/// Chooses the stores of this run: every writer and reconcile it starts is given them (`STORES`),
/// and only their servers are warmed and sampled. The first choice holds.
pub(crate) fn select_stores(selection: Selection) {
    let _ = STORES.set(selection);
}

/// The stores of this run: the chosen ones, else `STORES` from the environment, else all.
pub(crate) fn stores() -> Selection {
    STORES.get().cloned().unwrap_or_else(|| pipeline_stores::StoreArgs::from_env().selection)
}

/// Starts `bin args` with stdout and stderr in `log`, then waits until `base+ready` answers 200.
pub(crate) async fn start(http: &reqwest::Client, launch: Launch<'_>) -> Result<Service, ProcError> {
    let Launch { name, bin, args, env, log, base, ready, timeout } = launch;
    if get_ok(http, &format!("{base}/healthz")).await {
        return Err(ProcError::PortTaken(format!("{base}/healthz")));
    }
    let mut cmd = Command::new(bin);
    // `env` may name other stores still (a chaos scenario's own flags): it comes after.
    cmd.args(args).env("STORES", stores().to_string()).envs(env.iter().map(|(k, v)| (k, v)));
    logged(&mut cmd, log).map_err(|e| ProcError::Spawn(name.into(), e))?;
    let mut child = cmd.spawn().map_err(|e| ProcError::Spawn(format!("{name} ({})", bin.display()), e))?;
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
pub(crate) async fn boot_id(http: &reqwest::Client, base: &str) -> Result<String, ProcError> {
    let url = format!("{base}/healthz");
    let r = http.get(&url).send().await.map_err(|e| ProcError::NoBootId(url.clone(), e.to_string()))?;
    let v: serde_json::Value = r.json().await.map_err(|e| ProcError::NoBootId(url.clone(), e.to_string()))?;
    v.get("boot_id").and_then(|b| b.as_str()).map(str::to_string).ok_or_else(|| ProcError::NoBootId(url, v.to_string()))
}

/// Sends `sig` to process `pid`; false when there is no such process (or it is not ours).
pub(crate) fn signal(pid: u32, sig: Signal) -> bool {
    i32::try_from(pid).map(|p| kill(Pid::from_raw(p), sig).is_ok()).unwrap_or(false)
}

/// How a service ended when it was stopped.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// It had exited on its own before the stop.
    Before(ExitStatus),
    /// It exited within the grace period.
    Exited(ExitStatus),
    /// It was SIGKILLed after this many seconds of SIGTERM.
    Killed(u64),
}

impl Stopped {
    /// Exited 0 after SIGTERM: a writer that did so committed what it stored.
    pub(crate) fn clean(&self) -> bool {
        matches!(self, Stopped::Exited(s) if s.success())
    }
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Before(st) => write!(f, "had already exited ({st})"),
            Stopped::Exited(st) => write!(f, "exited after SIGTERM ({st})"),
            Stopped::Killed(secs) => write!(f, "SIGKILLed after {secs} s of SIGTERM"),
        }
    }
}

impl Service {
    /// SIGTERM, then up to `grace` for a clean exit (the writer commits what it stored), then
    /// SIGKILL. Returns how it ended, for the round's record.
    pub(crate) async fn stop(mut self, grace: Duration) -> Stopped {
        if let Ok(Some(st)) = self.child.try_wait() {
            return Stopped::Before(st);
        }
        signal(self.pid, Signal::SIGTERM);
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(st)) => Stopped::Exited(st),
            _ => {
                let _ = self.child.kill().await;
                Stopped::Killed(grace.as_secs())
            }
        }
    }

    /// SIGKILL (the fault, not a stop): the process alone, then reaped. `Err` with its status
    /// when it had already exited on its own, which a fault scenario counts as a failure.
    pub(crate) async fn kill(mut self) -> Result<(), ExitStatus> {
        if let Ok(Some(st)) = self.child.try_wait() {
            return Err(st);
        }
        signal(self.pid, Signal::SIGKILL);
        let _ = self.child.wait().await;
        Ok(())
    }

    /// Its exit status once it has exited on its own; `None` while it runs.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// Runs `reconcile --json ARGS` from `bins` with `env` added, stdout into `out` and stderr into
/// `log`; its exit code (`None` when it could not start or was killed; the log says which).
pub(crate) async fn reconcile(
    bins: &Path,
    env: &[(String, String)],
    args: &[&str],
    out: &Path,
    log: &Path,
) -> Result<Option<i32>, std::io::Error> {
    let stdout = std::fs::File::create(out)?;
    let stderr = std::fs::File::create(log)?;
    let status = tokio::process::Command::new(bins.join("reconcile"))
        .arg("--json")
        .args(args)
        .env("STORES", stores().to_string())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true)
        .status()
        .await;
    Ok(match status {
        Ok(s) => s.code(),
        Err(e) => {
            std::fs::write(log, format!("cannot start reconcile: {e}\n"))?;
            None
        }
    })
}

/// The servers of the native stack with their pids, from the pid files `scripts/stack` writes,
/// `<stack>/<name>.pid` for Kafka and each store (`$STACK_DIR` or `<root>/.stack`). Servers not
/// running, or started some other way, are left out (and the report says which it sampled).
pub(crate) fn server_pids(root: &Path) -> Vec<(String, u32)> {
    server_names().filter_map(|n| server_pid(root, n).map(|pid| (n.to_string(), pid))).collect()
}

/// The native stack's servers as its files name them: the broker, then each store of the run.
fn server_names() -> impl Iterator<Item = &'static str> {
    std::iter::once("kafka").chain(stores().kinds().iter().map(|k| k.name()).collect::<Vec<_>>())
}

/// Each server's data on disk, from the links `scripts/stack` makes beside the pid files,
/// `<stack>/<name>.data` (a folder, or tansu's SQLite file). Servers without one are left out.
pub(crate) fn server_data(root: &Path) -> Vec<(String, PathBuf)> {
    let stack = crate::paths::stack_dir(root);
    server_names().map(|n| (n.to_string(), stack.join(format!("{n}.data")))).filter(|(_, p)| p.exists()).collect()
}

/// `<stack>/<name>.pid`, the pid file `scripts/stack` writes (or links) for one server.
fn pid_file(root: &Path, name: &str) -> PathBuf {
    crate::paths::stack_dir(root).join(format!("{name}.pid"))
}

/// One server's pid from its pid file, when that process is alive.
pub(crate) fn server_pid(root: &Path, name: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file(root, name)).ok()?.trim().parse().ok()?;
    cpu_rss(Some(pid)).map(|_| pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every server of the running native stack keeps its data and pid in this checkout's stack
    /// folder, nowhere shared: when OpenSearch's lived in the machine's build cache, a second
    /// checkout's stack (CI's clone) wrote the same index, and its tests emptied the `messages`
    /// of an hour's soak whose other three stores were intact. Needs `scripts/stack up`.
    #[test]
    fn every_servers_data_and_pid_are_this_checkouts() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let stack = crate::paths::stack_dir(&root).canonicalize().expect("the stack folder: run scripts/stack up");
        let data = server_data(&root);
        assert_eq!(data.len(), server_names().count(), "every server's data link (scripts/stack up): {data:?}");
        for (name, link) in data.into_iter().chain(server_names().map(|n| (n.to_string(), pid_file(&root, n)))) {
            let real = link.canonicalize().unwrap_or_else(|e| panic!("{name}: {} resolves: {e}", link.display()));
            assert!(
                real.starts_with(&stack),
                "{name}: {} is {}, outside {}",
                link.display(),
                real.display(),
                stack.display()
            );
        }
    }
}
