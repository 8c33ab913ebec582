//! A short experiment end to end against the real servers: 2 policies × 2 rounds of a few
//! seconds, debug binaries, a private store namespace and private ports. Round 3 is broken on
//! purpose (the writer SIGKILLed halfway and not restarted): the gates must mark exactly that
//! round invalid, for the right reasons, and `experiment report` must judge the evidence alone the
//! same way.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::{experiment, RunNamespace};

fn verdicts(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("verdicts.json")).expect("verdicts.json written");
    serde_json::from_str::<Value>(&text).expect("verdicts.json is JSON").as_array().cloned().expect("an array")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_experiment_marks_the_broken_round_invalid_and_only_that_one() {
    let env = RunNamespace::new("t_exp", 6).await.env();
    let out = std::env::temp_dir().join(format!("experiment-test-{}", uuid::Uuid::now_v7().simple()));
    let started = std::time::Instant::now();
    let status = experiment(&[], &out)
        .args(["--policies", "A,C", "--rounds", "2", "--vus", "4", "--duration", "3s", "--warmup", "0"])
        .args(["--fault", "3:kill-writer", "--drain-timeout", "15"])
        .envs(env)
        .env("RUST_LOG", "info")
        .status()
        .expect("experiment runs");
    eprintln!("experiment took {:.0} s; evidence in {}", started.elapsed().as_secs_f64(), out.display());
    assert_eq!(status.code(), Some(1), "exit 1: a round is invalid");

    let v = verdicts(&out);
    assert_eq!(v.len(), 4, "four rounds: {v:#?}");
    for r in &v {
        let name = r["round"].as_str().unwrap_or_default();
        let reasons = r["reasons"].as_str().unwrap_or_default();
        if name.starts_with("03-") {
            assert_eq!(r["valid"], false, "the broken round is invalid: {r:#}");
            assert!(reasons.contains("reconcile: not drained"), "reconcile names the lag: {reasons}");
            assert!(reasons.contains("boot-ids: writer"), "the dead writer is seen: {reasons}");
        } else {
            assert_eq!(r["valid"], true, "round {name} is valid: {reasons}");
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(report.contains("**3 of 4 rounds valid.**"), "{report}");
    // Every server was warmed first, each store with at least one window of the rule's chunks,
    // then one round ran unmeasured: in its own folder, counted in no table (four verdicts).
    let warmed: Value = serde_json::from_str(&std::fs::read_to_string(out.join("warmup.json")).expect("warmup.json"))
        .expect("warmup.json is JSON");
    let stores: Vec<&str> = warmed.as_array().expect("an array").iter().filter_map(|w| w["store"].as_str()).collect();
    assert_eq!(stores, pipeline_stores::StoreKind::ALL.map(|k| k.name()), "{warmed:#}");
    assert!(warmed.as_array().into_iter().flatten().all(|w| w["chunks"].as_u64() >= Some(10)), "{warmed:#}");
    assert!(report.contains("Servers warmed before the first round"), "{report}");
    assert!(out.join("warm-round/round.json").exists(), "the warming round's evidence");
    assert!(report.contains("Then one round of the pipeline, not measured (`warm-round/`: policy A at 4;"), "{report}");
    assert!(report.contains("| A | 4 | 1/2 |"), "A's median uses its one valid round: {report}");
    if Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        for chart in ["throughput.png", "latency.png", "cpu.png", "pool-A.png", "pool-C.png"] {
            assert!(out.join(chart).exists(), "{chart} drawn");
        }
    }

    // The evidence alone gives the same judgement.
    std::fs::remove_file(out.join("verdicts.json")).expect("remove verdicts.json");
    let st = Command::new(env!("CARGO_BIN_EXE_experiment")).arg("report").arg(&out).status().expect("report runs");
    assert_eq!(st.code(), Some(1), "report exits 1 too");
    let again: Vec<(Value, Value)> = verdicts(&out).iter().map(|r| (r["round"].clone(), r["valid"].clone())).collect();
    let first: Vec<(Value, Value)> = v.iter().map(|r| (r["round"].clone(), r["valid"].clone())).collect();
    assert_eq!(again, first);
    let _ = std::fs::remove_dir_all(&out);
}
