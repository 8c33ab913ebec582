//! The whole compose loop without a registry: `up → k6 → reconcile → stop → down` with the
//! compose file as written plus compose/offline/docker-compose.offline.yml, whose servers, k6 and
//! Prometheus are the local images compose/offline/images builds from the native stack's sources.
//!
//! Run by a real compose implementation (Debian's docker-compose, v1: the one this machine has;
//! v1 knows no top-level `name:`, so it reads a copy without that line, as compose/smoke does).
//! The compose file's own healthchecks and `depends_on` conditions order the start; every host
//! port is moved to a free one, so the native stack keeps its own.

use crate::shared;
use crate::{docker, docker_ok, image};
use pipeline_common::reconcile_report::Answer;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The override file, from the repository root.
const OVERRIDE: &str = "compose/offline/docker-compose.offline.yml";

/// One compose project: its files, variables and name; `down -v` when dropped.
struct Project {
    name: String,
    v1_file: tempfile_path::TempPath,
    env: Vec<(String, String)>,
}

impl Project {
    fn new() -> Project {
        let root = shared::root();
        // The secrets a user makes once before the first `up` (docs/guides/compose.md): a clean
        // clone has none, and compose refuses to start a service whose secret file is missing.
        // The script leaves every existing file alone.
        let made = Command::new(root.join("scripts/compose-secrets")).output().expect("scripts/compose-secrets");
        assert!(made.status.success(), "scripts/compose-secrets: {}", String::from_utf8_lossy(&made.stderr));
        let v1 = std::fs::read_to_string(root.join(shared::COMPOSE)).expect("compose file");
        let v1 = shared::as_v1(&v1);
        let v1_file = tempfile_path::TempPath::write("pipeline-offline", ".yml", &v1);
        let tag = image();
        let tag = tag
            .strip_prefix("pipeline:")
            .unwrap_or_else(|| panic!("PIPELINE_IMAGE {tag}: the compose file's image is pipeline:TAG"));
        let uid = Command::new("id").arg("-u").output().expect("id -u");
        let gid = Command::new("id").arg("-g").output().expect("id -g");
        // Every host port the file publishes moves to a free one. Every listener is held until
        // all are chosen, so no two variables get one port.
        let ports = shared::port_variables(&shared::compose());
        assert!(ports.len() >= 9, "the compose file's published ports: {ports:?}");
        let held: Vec<std::net::TcpListener> =
            ports.iter().map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port")).collect();
        let mut env: Vec<(String, String)> = ports
            .into_iter()
            .zip(&held)
            .map(|(p, l)| (p, l.local_addr().expect("its address").port().to_string()))
            .collect();
        drop(held);
        env.extend([
            ("PIPELINE_IMAGE_TAG".into(), tag.to_string()),
            ("HOST_UID".into(), String::from_utf8_lossy(&uid.stdout).trim().to_string()),
            ("HOST_GID".into(), String::from_utf8_lossy(&gid.stdout).trim().to_string()),
        ]);
        Project { name: format!("pipeline-offline-{}", std::process::id()), v1_file, env }
    }

    /// `docker-compose` with both files, this project's variables and `args`.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("docker-compose");
        cmd.current_dir(shared::root())
            .args(["--project-directory", "compose", "-p", &self.name, "-f"])
            .arg(self.v1_file.path())
            .args(["-f", OVERRIDE])
            // Every store, as compose/.env enables them for a user.
            .args(shared::store_profiles().iter().flat_map(|p| ["--profile", p]))
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    }

    fn compose(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        self.command(args)
            .envs(extra_env.iter().copied())
            .output()
            .unwrap_or_else(|e| panic!("docker-compose {args:?}: {e}"))
    }

    fn compose_ok(&self, args: &[&str], extra_env: &[(&str, &str)]) -> String {
        let out = self.compose(args, extra_env);
        assert!(
            out.status.success(),
            "docker-compose {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// The containers of the project, by service.
    fn containers(&self) -> Vec<(String, String)> {
        let out = docker_ok(&[
            "ps",
            "-a",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.name),
            "--format",
            "{{.Label \"com.docker.compose.service\"}} {{.Names}}",
        ]);
        out.lines().filter_map(|l| l.split_once(' ')).map(|(s, n)| (s.to_string(), n.to_string())).collect()
    }
}

impl Drop for Project {
    /// `down -v`, without panicking: a panic while a failed test unwinds would abort it and
    /// lose the failure's message.
    fn drop(&mut self) {
        let _ = self.command(&["down", "-v", "--remove-orphans"]).output();
    }
}

/// The services `up` starts: the main file's, less those in a profile there (but a store's) or in
/// the override.
fn started_by_up() -> Vec<String> {
    let main = shared::compose();
    let over = shared::yaml(OVERRIDE);
    shared::services(&main)
        .iter()
        .filter(|(name, s)| shared::with_the_stores(s) && over["services"][name.as_str()].get("profiles").is_none())
        .map(|(name, _)| name.clone())
        .collect()
}

/// Projects of earlier runs that were killed before their `down` (their process is gone).
fn remove_stale_projects() {
    let label = "{{.Label \"com.docker.compose.project\"}}";
    let names = docker_ok(&["ps", "-a", "--filter", "label=com.docker.compose.project", "--format", label]);
    let names: std::collections::BTreeSet<&str> = names.lines().collect();
    for name in names {
        let Some(pid) = name.strip_prefix("pipeline-offline-") else { continue };
        if std::path::Path::new("/proc").join(pid).exists() {
            continue;
        }
        let ids = docker_ok(&["ps", "-aq", "--filter", &format!("label=com.docker.compose.project={name}")]);
        for id in ids.lines() {
            let _ = docker(&["rm", "-f", "-v", id]);
        }
        let _ = docker(&["network", "rm", &format!("{name}_default")]);
    }
}

#[test]
fn the_compose_loop_runs_offline_up_k6_reconcile_down() {
    remove_stale_projects();
    let p = Project::new();
    // `up` names its services: an optional store's exporter is in the store's profile, and
    // compose adds the override's `registry` profile to that list instead of replacing it, so
    // with the stores' profiles on, `up` alone would start (and pull) the exporters too.
    let expected = started_by_up();
    let up: Vec<&str> = ["up", "-d", "--no-build"].into_iter().chain(expected.iter().map(String::as_str)).collect();
    p.compose_ok(&up, &[]);

    // Every service named (the main file's services outside any profile but a store's, less
    // those the override puts in its `registry` profile) runs and reports its compose
    // healthcheck healthy; nothing else was started.
    let started: Vec<String> = p.containers().into_iter().map(|(s, _)| s).collect();
    for s in &expected {
        assert!(started.contains(s), "{s} was not started: {started:?}");
    }
    for s in &started {
        assert!(expected.contains(s), "{s} was started though a profile keeps it out");
    }
    assert!(expected.len() >= 8 && !expected.iter().any(|s| s == "grafana"), "up's services: {expected:?}");
    let deadline = Instant::now() + Duration::from_secs(240);
    for (service, name) in p.containers() {
        loop {
            let status = docker_ok(&["inspect", "-f", "{{.State.Health.Status}}", &name]);
            if status == "healthy" {
                break;
            }
            let logs = docker(&["logs", "--tail", "30", &name]);
            assert!(
                status != "unhealthy" && Instant::now() < deadline,
                "{service} is {status}: {}{}",
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    // k6 as the compose file runs it (profile `load`), from its local image, into k6/out/.
    let run = format!("offline-test-{}", std::process::id());
    let out_dir = shared::root().join("k6/out");
    let _cleanup =
        RemoveOnDrop(vec![out_dir.join(format!("{run}.summary.json")), out_dir.join(format!("{run}.summary.ids"))]);
    let k6_env = [("VUS", "4"), ("DURATION", "5s"), ("WARMUP_ROUNDS", "1"), ("WARMUP", "2s"), ("K6_RUN", run.as_str())];
    let out = p.compose_ok(&["--profile", "load", "run", "--rm", "k6"], &k6_env);
    assert!(out.contains("accepted="), "k6 printed no summary: {out}");

    // reconcile from the image (profile `tools`), exact at id level and content.
    let report = p.compose(
        &[
            "--profile",
            "tools",
            "run",
            "--rm",
            "reconcile",
            "--json",
            "diff",
            "--expect-from",
            &format!("/k6/out/{run}.summary.json"),
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&report.stdout);
    let check = Answer::parse(&text).ok().and_then(|a| a.check().cloned());
    assert_eq!(
        check.as_ref().map(|r| r.clean),
        Some(true),
        "reconcile diff: {text}\n{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let stored = check.as_ref().and_then(|r| r.stores.as_ref()).map(Vec::len).unwrap_or(0);
    assert_eq!(stored, 4, "reconcile read four stores: {text}");
    let first = check.as_ref().and_then(|r| r.stores.as_ref()).and_then(|s| s.first()).map_or(0, |s| s.count);
    assert!(first > 0, "nothing was stored: {text}");

    // The engine's stop: the writer leaves on SIGTERM with exit 0 (everything committed).
    p.compose_ok(&["stop"], &[]);
    for (service, name) in p.containers() {
        if service == "writer" || service == "ingest" {
            let code = docker_ok(&["inspect", "-f", "{{.State.ExitCode}}", &name]);
            assert_eq!(code, "0", "{service}'s exit after the engine's stop");
        }
    }
}

/// Files the test made in the checkout, removed however it ends.
struct RemoveOnDrop(Vec<std::path::PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// A file in the temp folder, removed when dropped.
mod tempfile_path {
    use std::path::{Path, PathBuf};

    pub struct TempPath(PathBuf);

    impl TempPath {
        pub fn write(prefix: &str, suffix: &str, content: &str) -> TempPath {
            let p = std::env::temp_dir().join(format!("{prefix}-{}{suffix}", std::process::id()));
            std::fs::write(&p, content).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            TempPath(p)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}
