//! The one way a black-box test starts a service: a workspace binary as a child process, its
//! standard output and error captured in a file, killed when the test lets go of it, and (with
//! [`Service::ready`]) waited for until its health endpoint answers.
//!
//! Every test goes through here so that a service that fails to start is reported the same way
//! everywhere: with its exit status and the end of its log, not a bare "not up" after a minute.

use crate::{bin_path, Child, Namespace};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long a service may take to answer its health endpoint (a cold start on a loaded 2-core
/// machine, the topic created and the stores prepared, is well under this).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// How much of the log a failing test prints.
const LOG_TAIL_LINES: usize = 60;

/// A running workspace binary (`ingest`, `writer`): a [`Child`] (signal it, wait for its exit)
/// whose output goes to a log file. Dropping it kills the process; if the test is failing at
/// that moment the end of the log is printed, so the failure shows what the service said.
pub struct Service {
    child: Child,
    bin: String,
    log: PathBuf,
}

impl Service {
    /// Starts `bin` with exactly `env` added to the test's environment (no namespace: for a
    /// service expected to refuse to start), `RUST_LOG` defaulting to the test's or `warn`.
    pub fn launch<K: AsRef<str>>(bin: &str, args: &[&str], env: &[(K, String)]) -> Service {
        let log = std::env::temp_dir().join(format!("pipeline-{bin}-{}.log", uuid::Uuid::now_v7().simple()));
        let file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let out = file.try_clone().unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let mut cmd = std::process::Command::new(bin_path(bin));
        cmd.args(args).env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()));
        cmd.envs(env.iter().map(|(k, v)| (k.as_ref(), v)));
        cmd.stdin(Stdio::null()).stdout(out).stderr(file);
        let child = Child(cmd.spawn().unwrap_or_else(|e| panic!("spawn {bin}: {e}")));
        Service { child, bin: bin.to_string(), log }
    }

    /// Waits until `GET http://127.0.0.1:{port}{path}` answers 2xx (`/healthz` once it serves,
    /// `/readyz` once it can also write); panics if the process exits first or does not answer in
    /// time (and the drop prints its log).
    pub async fn ready(mut self, port: u16, path: &str) -> Service {
        let url = format!("http://127.0.0.1:{port}{path}");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("an HTTP client");
        let deadline = Instant::now() + READY_WITHIN;
        while !http.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
            if let Ok(Some(status)) = self.child.0.try_wait() {
                panic!("the {} exited ({status}) before {url} answered", self.bin);
            }
            assert!(Instant::now() < deadline, "{url} never answered 2xx (the {})", self.bin);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self
    }

    /// Everything the process wrote so far (standard output and error).
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let text = self.logs();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }
}

impl std::ops::Deref for Service {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl std::ops::DerefMut for Service {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- the {} log ({}), last lines ---\n{}", self.bin, self.log.display(), self.log_tail());
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
        // The child is killed by its own drop, after this.
    }
}

impl Namespace {
    /// Starts a workspace binary with this namespace's environment, then `extra_env`, and `args`;
    /// not waited for (see [`Service::ready`], or [`Namespace::start`]).
    pub fn spawn(&self, bin: &str, args: &[&str], extra_env: &[(&str, String)]) -> Service {
        let mut env = self.env();
        env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.clone())));
        Service::launch(bin, args, &env)
    }

    /// [`Namespace::spawn`], then waits until `path` (`/healthz`, `/readyz`) answers on `port`.
    pub async fn start(
        &self,
        bin: &str,
        args: &[&str],
        extra_env: &[(&str, String)],
        port: u16,
        path: &str,
    ) -> Service {
        self.spawn(bin, args, extra_env).ready(port, path).await
    }
}
