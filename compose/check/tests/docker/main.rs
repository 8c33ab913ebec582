//! The Docker path for real: the image `compose/Dockerfile` builds, run by a Docker engine,
//! against the native stack's servers (`scripts/stack up`).
//!
//! `compose/smoke` starts the engine, builds the image (and the offline servers' images, for
//! offline.rs: the whole compose loop without a registry) and runs this test with the image's name
//! in `PIPELINE_IMAGE`: `cargo test -p compose-check --features docker --test docker`. Without
//! the feature it is not even compiled (a workspace `cargo test` has no engine to ask); with it,
//! a missing engine or image fails loudly.
//!
//! What compose would give the containers is read from compose/docker-compose.yml itself: the
//! command, the environment (interpolated with its defaults), the hardening (read-only root,
//! tmpfs, capabilities, no-new-privileges, memory limit), the healthcheck and the stop grace.
//! Only what points at servers is replaced: the test's private namespace (topic, group, store
//! namespaces) on the native stack, reached over the host's network.

#[path = "../shared/mod.rs"]
mod shared;

mod offline;

use pipeline_common::kafka::group_lag;
use pipeline_common::reconcile_report::Answer;
use pipeline_testkit::{exclusive, k6_bin, Namespace};
use shared::{compose, interpolate, scalar, Json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn image() -> String {
    std::env::var("PIPELINE_IMAGE").expect("PIPELINE_IMAGE names the image to test: run compose/smoke, which builds it")
}

/// The engine's client: `DOCKER` (compose/smoke sets Debian's, which matches the daemon).
fn docker(args: &[&str]) -> Output {
    let bin = std::env::var("DOCKER").unwrap_or_else(|_| "docker".into());
    Command::new(&bin).args(args).output().unwrap_or_else(|e| panic!("{bin} {args:?}: {e}"))
}

/// Runs a docker command that must succeed; its standard output.
fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The workspace's binaries, from cargo's own metadata: the image must hold every one.
fn workspace_bins() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(shared::root())
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Json = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let mut bins: Vec<String> = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter(|t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bin")))
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    bins.sort();
    bins
}

/// The services that run the pipeline's image (not the servers' or the tools' images).
fn program_services(c: &Json) -> Vec<(String, Json)> {
    let ours = &c["services"]["writer"]["image"];
    shared::services(c).iter().filter(|(_, s)| &s["image"] == ours).map(|(n, s)| (n.clone(), s.clone())).collect()
}

#[test]
fn the_image_runs_every_program_as_an_unprivileged_user() {
    let image = image();
    let uid = docker_ok(&["run", "--rm", &image, "id", "-u"]);
    assert!(uid != "0" && !uid.is_empty(), "the image runs as uid {uid}: it must not be root");
    let bins = workspace_bins();
    assert!(bins.len() >= 4, "the workspace's binaries: {bins:?}");
    for bin in &bins {
        let help = docker_ok(&["run", "--rm", "--read-only", "--cap-drop", "ALL", &image, bin, "--help"]);
        assert!(help.contains("Usage:"), "{bin} --help in the image printed no usage: {help}");
    }
    // Every healthcheck of a service on this image runs a program the image has.
    let c = compose();
    for (name, s) in program_services(&c) {
        let Some(test) = s["healthcheck"]["test"].as_array() else { continue };
        let program = match test.first().and_then(Json::as_str) {
            Some("CMD") => test.get(1).map(scalar).unwrap_or_default(),
            Some("CMD-SHELL") => "sh".to_string(),
            other => panic!("{name}: healthcheck test {other:?} is neither CMD nor CMD-SHELL"),
        };
        let found = docker(&["run", "--rm", "--entrypoint", "sh", &image, "-c", &format!("command -v {program}")]);
        assert!(found.status.success(), "{name}'s healthcheck runs {program}, which the image lacks");
    }
    // The experiment draws its charts with a TrueType font it finds at run time.
    let font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    assert!(docker(&["run", "--rm", &image, "test", "-r", font]).status.success(), "the image lacks {font}");
}

/// A container of one of compose's program services, started by the engine.
struct Container {
    name: String,
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.name]);
    }
}

impl Container {
    /// Starts service `service` as compose describes it, with `overrides` for what points at
    /// servers. `--network host`: the native servers listen on loopback.
    fn start(c: &Json, service: &str, overrides: &[(String, String)]) -> Container {
        let s = &c["services"][service];
        let name = format!("pipeline-smoke-{service}-{}", std::process::id());
        let _ = docker(&["rm", "-f", &name]);
        let mut env: BTreeMap<String, String> = s["environment"]
            .as_object()
            .unwrap_or_else(|| panic!("{service}: environment is a mapping"))
            .iter()
            .map(|(k, v)| (k.clone(), interpolate(&scalar(v))))
            .collect();
        // Compose's secrets (`/run/secrets/...`) hold the compose servers' credentials: the native
        // servers take the namespace's, so no compose secret is mounted and none is named.
        env.retain(|_, v| !v.starts_with("/run/secrets/"));
        for (k, v) in overrides {
            // A value given here replaces its secret-file twin (`X_FILE`), and the other way round.
            env.remove(&format!("{k}_FILE"));
            if let Some(base) = k.strip_suffix("_FILE") {
                env.remove(base);
            }
            env.insert(k.clone(), v.clone());
        }
        let mut args: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), name.clone()];
        args.extend(["--network".into(), "host".into()]);
        if s["read_only"] == true {
            args.push("--read-only".into());
        }
        for t in s["tmpfs"].as_array().into_iter().flatten() {
            args.extend(["--tmpfs".into(), scalar(t)]);
        }
        for cap in s["cap_drop"].as_array().into_iter().flatten() {
            args.extend(["--cap-drop".into(), scalar(cap)]);
        }
        for o in s["security_opt"].as_array().into_iter().flatten() {
            args.extend(["--security-opt".into(), scalar(o)]);
        }
        if let Some(m) = s["mem_limit"].as_str() {
            args.extend(["--memory".into(), m.into()]);
        }
        if let Some(g) = s["stop_grace_period"].as_str() {
            args.extend(["--stop-timeout".into(), seconds(g).to_string()]);
        }
        let h = &s["healthcheck"];
        if let Some(test) = h["test"].as_array() {
            // `docker run --health-cmd` is CMD-SHELL; compose's CMD words have no spaces to quote.
            let words: Vec<String> = test.iter().skip(1).map(scalar).collect();
            args.extend(["--health-cmd".into(), words.join(" ")]);
            for (flag, key) in [("--health-interval", "interval"), ("--health-timeout", "timeout")] {
                if let Some(v) = h[key].as_str() {
                    args.extend([flag.into(), v.into()]);
                }
            }
            if let Some(r) = h["retries"].as_u64() {
                args.extend(["--health-retries".into(), r.to_string()]);
            }
        }
        for (k, v) in &env {
            args.extend(["-e".into(), format!("{k}={v}")]);
            // Host files the overrides name (API keys, URL files) are mounted where they are.
            if overrides.iter().any(|(o, _)| o == k) && v.starts_with('/') && Path::new(v).is_file() {
                args.extend(["-v".into(), format!("{v}:{v}:ro")]);
            }
        }
        args.push(image());
        args.extend(s["command"].as_array().into_iter().flatten().map(scalar));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        docker_ok(&refs);
        Container { name }
    }

    /// Waits for the engine to report the compose healthcheck healthy.
    fn wait_healthy(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let status = docker_ok(&["inspect", "-f", "{{.State.Health.Status}}", &self.name]);
            if status == "healthy" {
                return;
            }
            assert!(
                status != "unhealthy" && Instant::now() < deadline,
                "{} is {status}; its log:\n{}",
                self.name,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn logs(&self) -> String {
        let out = docker(&["logs", "--tail", "40", &self.name]);
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }
}

/// `40s`, `1m30s`, `15s` as whole seconds (compose's duration format, the parts used here).
fn seconds(d: &str) -> u64 {
    let (mut total, mut n) = (0, 0);
    for ch in d.chars() {
        match ch {
            '0'..='9' => n = n * 10 + u64::from(ch.to_digit(10).unwrap_or(0)),
            'h' => (total, n) = (total + n * 3600, 0),
            'm' => (total, n) = (total + n * 60, 0),
            's' => (total, n) = (total + n, 0),
            _ => panic!("duration {d}"),
        }
    }
    total + n
}

#[tokio::test(flavor = "multi_thread")]
async fn the_services_in_containers_store_every_message_and_commit_on_stop() {
    let _g = exclusive().await;
    let ns = Namespace::new("docker").await;
    let c = compose();
    let overrides = ns.env();
    let writer = Container::start(&c, "writer", &overrides);
    writer.wait_healthy(Duration::from_secs(120));
    let ingest = Container::start(&c, "ingest", &overrides);
    ingest.wait_healthy(Duration::from_secs(120));

    // A short k6 load from the host, on the port compose gives the ingest.
    let out = tempdir();
    let (summary, ids) = (out.join("summary.json"), out.join("ids"));
    let port = interpolate(&scalar(&c["services"]["ingest"]["ports"][0]));
    let port = port.split(':').nth(1).expect("ingest ports: 127.0.0.1:HOST:8080");
    // Health and boot id on the admin listener, which compose keeps off the published ports
    // (reachable here: the containers share the host's network).
    let admin = interpolate(&scalar(&c["services"]["ingest"]["environment"]["INGEST_ADMIN_LISTEN"]));
    let admin = admin.rsplit(':').next().expect("INGEST_ADMIN_LISTEN: ADDR:PORT");
    let k6 = Command::new(k6_bin())
        .args(["run", "-q", "-e", "BATCH=50", "-e", "VUS=4", "-e", "DURATION=5s"])
        .arg("-e")
        .arg(format!("INGEST_URL=http://127.0.0.1:{port}"))
        .arg("-e")
        .arg(format!("INGEST_ADMIN_URL=http://127.0.0.1:{admin}"))
        .arg("-e")
        .arg(format!("SUMMARY_FILE={}", summary.display()))
        .arg(shared::root().join("k6/batch.js"))
        .env("K6_CONSOLE_OUTPUT", &ids)
        .env("K6_LOG_FORMAT", "raw")
        .envs(ns.env())
        .output()
        .expect("k6");
    assert!(k6.status.success(), "k6: {}{}", String::from_utf8_lossy(&k6.stdout), String::from_utf8_lossy(&k6.stderr));

    // Reconcile from the image too, exactly at id level against what k6 was told.
    let dir = out.display().to_string();
    let mut args: Vec<String> = vec!["run".into(), "--rm".into(), "--network".into(), "host".into()];
    args.extend(["-v".into(), format!("{dir}:{dir}:ro")]);
    for (k, v) in &overrides {
        args.extend(["-e".into(), format!("{k}={v}")]);
        if v.starts_with('/') && Path::new(v).is_file() {
            args.extend(["-v".into(), format!("{v}:{v}:ro")]);
        }
    }
    args.extend([image(), "reconcile".into(), "--json".into(), "--drain-timeout".into(), "120".into()]);
    args.extend(["diff".into(), "--expect-from".into(), summary.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = docker(&refs);
    let text = String::from_utf8_lossy(&report.stdout);
    let clean = Answer::parse(&text).ok().and_then(|a| a.check().map(|r| r.clean));
    assert_eq!(clean, Some(true), "reconcile diff in the image: {text}\n{}", String::from_utf8_lossy(&report.stderr));

    // The engine's stop (SIGTERM, compose's grace) must leave every stored record committed: a
    // restarted writer would find nothing to redeliver.
    docker_ok(&["stop", &ingest.name]);
    docker_ok(&["stop", &writer.name]);
    let code = docker_ok(&["inspect", "-f", "{{.State.ExitCode}}", &writer.name]);
    assert_eq!(code, "0", "the writer's exit after SIGTERM; its log:\n{}", writer.logs());
    let k = ns.kafka.clone();
    let lag = tokio::task::spawn_blocking(move || group_lag(&k, &k.group, &k.topic)).await.expect("join").expect("lag");
    let (committed, high): (i64, i64) = (lag.iter().map(|p| p.committed).sum(), lag.iter().map(|p| p.high).sum());
    assert!(high > 0, "k6 wrote nothing to the topic");
    assert_eq!(committed, high, "committed offsets after the stop, per partition: {lag:?}");
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pipeline-docker-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}
