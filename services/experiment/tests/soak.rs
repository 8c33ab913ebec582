//! `experiment soak` end to end, shrunk: 24 s of open loop in 6 s windows against the real
//! servers (debug binaries, a private namespace). What it checks is the machinery, not a
//! verdict a 24 s run could earn: every window is in the k6 summary and adds up to the measured
//! phase, the sampler watched descriptors, threads and the servers' data, the round reconciled
//! exactly, and the exit code, soak.json and report.md agree on the verdict.

mod support;

use serde_json::Value;
use support::{experiment, RunNamespace};

fn json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_soak_has_every_window_and_a_consistent_verdict() {
    let env = RunNamespace::new("t_soak", 8).await.env();
    let out = std::env::temp_dir().join(format!("soak-test-{}", uuid::Uuid::now_v7().simple()));
    let status = experiment(&["soak"], &out)
        .args(["--rate", "40", "--duration", "24s", "--window", "6s", "--warmup", "0", "--sample-every", "1"])
        .arg("--no-warm-servers")
        // The machinery, not the machine: a round's drops and p99 are warnings here, so that
        // tests beside it (cargo-nextest runs binaries side by side) cannot fail it by load.
        .arg("--no-timing-gates")
        .envs(env)
        .env("RUST_LOG", "info")
        .status()
        .expect("experiment soak runs");
    eprintln!("evidence in {}", out.display());
    assert!(matches!(status.code(), Some(0 | 1)), "ran to a verdict: {status}");

    let round = std::fs::read_dir(out.join("rounds")).expect("rounds").flatten().next().expect("one round").path();
    let summary = json(&round.join("k6-summary.json"));
    let windows = summary["windows"].as_array().cloned().expect("windows in the k6 summary");
    assert_eq!(windows.len(), 4, "24 s in 6 s windows: {windows:#?}");
    let in_windows: f64 = windows.iter().filter_map(|w| w["requests"].as_f64()).sum();
    assert_eq!(Some(in_windows), summary["measured"]["requests"].as_f64(), "every measured request in a window");
    assert!(windows.iter().all(|w| w["latency_ms"]["p99"].as_f64().is_some_and(|p| p > 0.0)), "{windows:#?}");
    assert_eq!(summary["window_edges"]["windows"], 1, "a third of 4 windows, rounded down");

    let timeline = std::fs::read_to_string(round.join("timeline.csv")).expect("timeline.csv");
    for row in ["proc,open_fds,process=writer", "proc,threads,process=ingest", "disk,data_bytes,server=mysql"] {
        assert!(timeline.contains(row), "the sampler wrote {row}");
    }

    let soak = json(&out.join("soak.json"));
    let checks = soak["checks"].as_array().cloned().expect("checks");
    assert_eq!(checks[0]["check"], "the round passed every gate");
    assert_eq!(checks[0]["ok"], true, "the round is valid and reconciled exactly: {checks:#?}");
    let flat = checks.iter().all(|c| c["ok"] == true);
    assert_eq!(soak["flat"], flat);
    assert_eq!(status.success(), flat, "exit 0 exactly when flat");
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(report.contains(if flat { "Verdict: **flat**" } else { "Verdict: **not flat**" }), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}
