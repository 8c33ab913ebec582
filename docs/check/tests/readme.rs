//! The README's "Your first message by hand", run as written against the real servers: the
//! fenced block under that heading is extracted and executed by bash, and what it prints is
//! checked against what the README says it prints. So the README cannot rot.
//!
//! Three things are changed on the way, each so that the run is private and uses this build:
//! `scripts/build` is left out and `target/release/` becomes the folder of the binaries this
//! test runs with (`pipeline_testkit::bin_path`); `localhost:8080` becomes a free port; the logs
//! go to a temporary folder. The servers, topic, group and store namespaces are a private
//! namespace's, given through the environment the programs read (`. scripts/lib.sh` keeps
//! what is already set).

use pipeline_testkit::{bin_path, exclusive, free_port, Namespace};
use std::time::Duration;

const HEADING: &str = "## Your first message by hand";

fn readme() -> String {
    std::fs::read_to_string(pipeline_testkit::docs::repo_root().join("README.md")).expect("README.md")
}

/// The fenced blocks under the heading, in order (the commands, then what they print).
fn blocks(text: &str) -> Vec<String> {
    let section = text.split(HEADING).nth(1).expect("the README has the first-message section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in section.lines() {
        if line.starts_with("```") {
            match current.take() {
                Some(block) => out.push(block),
                None => current = Some(String::new()),
            }
        } else if let Some(b) = current.as_mut() {
            b.push_str(line);
            b.push('\n');
        }
    }
    out
}

/// Kills the script's whole process group when the test ends, however it ends.
struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        // killpg, not the kill program: procps' `kill -KILL -PGID` reads `-PGID` as options and
        // sent SIGKILL to process group -1, every process the user may signal (seen here).
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGKILL);
    }
}

#[tokio::test]
async fn the_first_message_section_works_as_written() {
    let _g = exclusive().await;
    let ns = Namespace::new("readme").await;
    let text = readme();
    let blocks = blocks(&text);
    assert!(blocks.len() >= 2, "the section has the commands and what they print");
    let (port, metrics) = (free_port(), free_port());
    let logs = std::env::temp_dir().join(&ns.name);
    std::fs::create_dir_all(&logs).expect("log folder");
    let bin_dir = bin_path("writer").parent().expect("bin dir").display().to_string();
    let script: Vec<String> = blocks[0]
        .lines()
        .filter(|l| !l.trim_start().starts_with("scripts/build"))
        .map(|l| {
            l.replace("target/release/", &format!("{bin_dir}/"))
                .replace("localhost:8080", &format!("127.0.0.1:{port}"))
                .replace(">writer.log", &format!(">{}/writer.log", logs.display()))
                .replace(">ingest.log", &format!(">{}/ingest.log", logs.display()))
        })
        .collect();
    assert!(
        script.iter().any(|l| l.contains("/writer "))
            && script.iter().filter(|l| l.contains("reconcile show")).count() == 2,
        "the block starts a writer and shows the message twice:\n{}",
        script.join("\n")
    );
    let mut cmd = std::process::Command::new("setsid");
    cmd.args(["bash", "-euo", "pipefail", "-c", &script.join("\n")])
        .current_dir(pipeline_testkit::docs::repo_root())
        .envs(ns.env())
        .env("WRITER_DLQ_TOPIC", format!("{}.dlq", ns.name))
        .env("WRITER_METRICS_ADDR", format!("127.0.0.1:{metrics}"))
        .env("INGEST_LISTEN", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("bash");
    let _group = Group(child.id() as i32);
    let out =
        tokio::time::timeout(Duration::from_secs(300), tokio::task::spawn_blocking(move || child.wait_with_output()))
            .await
            .expect("the block finished within 5 minutes")
            .expect("join")
            .expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs_text = ["writer.log", "ingest.log"]
        .iter()
        .map(|f| format!("--- {f}\n{}", std::fs::read_to_string(logs.join(f)).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("\n");
    let context = format!("stdout:\n{stdout}\nstderr:\n{stderr}\n{logs_text}");
    assert!(out.status.success(), "the block failed ({:?})\n{context}", out.status);

    // Each POST answered 202 with the id and a version, the second one higher.
    let versions: Vec<u64> = stdout
        .lines()
        .filter(|l| l.starts_with("{\"id\":\"hello-1\""))
        .filter_map(|l| l.split("\"version\":").nth(1)?.trim_end_matches('}').parse().ok())
        .collect();
    assert!(versions.len() == 2 && versions[0] < versions[1], "two 202s, the second a newer version:\n{context}");
    // Each show printed the README's line, with the body posted just before it.
    let names: Vec<&str> = pipeline_stores::StoreKind::ALL.iter().map(|k| k.name()).collect();
    let same = format!("hello-1: the same in all {} stores ({})", names.len(), names.join(", "));
    assert!(blocks[1].contains(&same), "the README shows what `reconcile show` prints: {same}");
    let shown: Vec<&str> = stdout.lines().collect();
    let at: Vec<usize> = shown.iter().enumerate().filter(|(_, l)| **l == same.as_str()).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 2, "reconcile show said the same in all four stores twice:\n{context}");
    for (n, (at, (body, version))) in
        at.iter().zip([("hello, pipeline", versions[0]), ("hello again", versions[1])]).enumerate()
    {
        let line = shown.get(at + 1).copied().unwrap_or("");
        assert!(
            line.contains(&format!("version {version} ")) && line.contains(&format!("body {body:?}")),
            "show #{}: {line}\n{context}",
            n + 1
        );
    }
    let _ = std::fs::remove_dir_all(&logs);
}
