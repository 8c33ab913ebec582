//! The processes a test starts: workspace binaries, k6, ports, and a child that dies with the
//! test; plus reading a service's `/metrics`.

/// A child process killed (SIGKILL) when dropped, so a failing test leaves nothing running.
pub struct Child(pub std::process::Child);

impl Child {
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }
    /// Sends a signal (e.g. `libc`-free: "TERM", "KILL", "STOP", "CONT") with the kill command.
    pub fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill").arg(format!("-{sig}")).arg(self.pid().to_string()).status();
        assert!(ok.map(|s| s.success()).unwrap_or(false), "kill -{sig} {}", self.pid());
    }
    /// Waits for the process to exit, up to `timeout`; returns its exit status.
    pub fn wait_exit(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(st)) = self.0.try_wait() {
                return Some(st);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free TCP port on loopback (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Waits until something listens on `port` (loopback), at most `secs` seconds.
pub fn wait_port(port: u16, secs: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// Path of a workspace binary (`ingest`, `writer`, `reconcile`), built by `cargo test --workspace`.
/// `PIPELINE_BIN_DIR` points the black-box tests at other builds of the binaries (release ones,
/// or an older commit's, to watch a new test fail on the old code).
pub fn bin_path(name: &str) -> std::path::PathBuf {
    let dir = match std::env::var_os("PIPELINE_BIN_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().expect("current exe");
            exe.parent().and_then(|d| d.parent()).expect("target/<profile>").to_path_buf()
        }
    };
    let p = dir.join(name);
    assert!(p.exists(), "{} not built: run `cargo build --workspace` (or `cargo test --workspace`)", p.display());
    p
}

/// The k6 binary: `K6_BIN` (scripts/test sets it to the stack's venv), else the first venv under
/// `$PIPELINE_CACHE` that has one.
pub fn k6_bin() -> String {
    if let Ok(p) = std::env::var("K6_BIN") {
        return p;
    }
    venv_bin("k6")
}

/// A program of the stack's Python venv (`scripts/requirements.txt`: k6, schemathesis): beside
/// `K6_BIN` when that is set, else in the first venv under `$PIPELINE_CACHE` that has it.
pub fn venv_bin(name: &str) -> String {
    if let Some(p) =
        std::env::var_os("K6_BIN").map(std::path::PathBuf::from).and_then(|k6| Some(k6.parent()?.join(name)))
    {
        if p.exists() {
            return p.to_string_lossy().into_owned();
        }
    }
    let cache = std::env::var("PIPELINE_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/pipeline", std::env::var("HOME").unwrap_or_default()));
    std::fs::read_dir(&cache)
        .ok()
        .and_then(|d| d.flatten().map(|e| e.path().join("bin").join(name)).find(|p| p.exists()))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| panic!("{name} not found: run scripts/stack up (installs it in a venv under {cache})"))
}

/// Sum of every sample of a metric (name, optionally with its opening labels, as a prefix of the
/// exposition line) on a service's `/metrics` at `port`.
pub async fn metric(port: u16, name_and_labels: &str) -> f64 {
    let body = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("GET /metrics on :{port}: {e}"));
    let text = body.text().await.unwrap_or_else(|e| panic!("reading /metrics on :{port}: {e}"));
    text.lines()
        .filter(|l| l.starts_with(name_and_labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The ids of the flags of `cmd` that have no help text (`--help`/`--version` aside).
pub fn flags_without_help(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| a.get_help().is_none() && !["help", "version"].contains(&a.get_id().as_str()))
        .map(|a| a.get_id().to_string())
        .collect()
}
