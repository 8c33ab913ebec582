//! The Grafana dashboard and the Prometheus rules querying only catalog metrics; both Prometheus
//! setups loading the rules and scraping both services.

use crate::promql::{leaves, recording_rules};
use crate::{read, root, scalar, yaml, Json};
use std::collections::BTreeSet;

fn dashboard_exprs() -> Vec<(String, String)> {
    let text = read("compose/grafana/dashboards/pipeline.json");
    let d: Json = serde_json::from_str(&text).expect("the dashboard is JSON");
    fn walk(panels: &Json, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push((p["title"].as_str().unwrap_or("?").to_string(), e.to_string()));
                }
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    assert!(!out.is_empty(), "the dashboard has no queries");
    out
}

/// Every catalog metric the dashboard reads, directly or through a recording rule.
pub(crate) fn dashboard_metrics() -> BTreeSet<&'static str> {
    let rules = recording_rules();
    let mut out = BTreeSet::new();
    let mut errors = Vec::new();
    for (panel, e) in dashboard_exprs() {
        let before = errors.len();
        leaves(&e, &rules, &mut out, &mut errors);
        for err in &mut errors[before..] {
            *err = format!("panel {panel:?}: {err}");
        }
    }
    for (name, e) in &rules {
        let before = errors.len();
        leaves(e, &rules, &mut out, &mut errors);
        for err in &mut errors[before..] {
            *err = format!("rule {name}: {err}");
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    out
}

#[test]
fn dashboard_and_rules_read_only_catalog_metrics() {
    let m = dashboard_metrics();
    println!("the dashboard reads {} catalog metrics: {}", m.len(), m.iter().copied().collect::<Vec<_>>().join(", "));
    // What the issue asks to see.
    for needed in [
        "ingest_requests_total",
        "ingest_request_seconds",
        "ingest_ring_occupancy",
        "writer_records_total",
        "writer_store_write_seconds",
        "writer_store_records_total",
        "writer_pool_queue_depth",
        "writer_pool_active_workers",
        "writer_pool_rejected_total",
        "writer_pool_caller_runs_total",
        "writer_partition_committed_offset",
        "writer_partition_high_watermark",
        "writer_dlq_records_total",
    ] {
        assert!(m.contains(needed), "the dashboard does not graph {needed}");
    }
    // Both Prometheus setups load the rules and scrape both services.
    for (cfg, rules_ref) in
        [("compose/prometheus/prometheus.yml", "rules.yml"), ("scripts/prometheus/prometheus.yml", "rules.yml")]
    {
        let p = yaml(cfg);
        let files: Vec<String> = p["rule_files"].as_array().expect("rule_files").iter().map(scalar).collect();
        assert!(files.iter().any(|f| f.ends_with(rules_ref)), "{cfg} does not load {rules_ref}");
        let jobs: Vec<String> =
            p["scrape_configs"].as_array().expect("scrape_configs").iter().map(|j| scalar(&j["job_name"])).collect();
        for job in ["ingest", "writer"] {
            assert!(jobs.contains(&job.to_string()), "{cfg} does not scrape {job}");
        }
    }
    // promtool (Debian's prometheus package, installed by `scripts/stack up --with-prometheus`)
    // checks both configurations and the rules the way Prometheus will load them.
    match std::process::Command::new("promtool").arg("--version").output() {
        Ok(_) => {
            for cfg in ["compose/prometheus/prometheus.yml", "scripts/prometheus/prometheus.yml"] {
                let out = std::process::Command::new("promtool")
                    .args(["check", "config", cfg])
                    .current_dir(root())
                    .output()
                    .expect("promtool");
                let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                assert!(out.status.success(), "promtool check config {cfg}:\n{text}");
                println!("promtool check config {cfg}: {}", text.trim().replace('\n', " | "));
            }
        }
        Err(_) => println!(
            "promtool not installed (scripts/stack up --with-prometheus installs it): rules parsed as YAML only"
        ),
    }
    if std::process::Command::new("promtool").arg("--version").output().is_ok() {
        // The rules' arithmetic on synthetic series (lag with a stale previous owner, rates, ratio).
        let out = std::process::Command::new("promtool")
            .args(["test", "rules", "compose/prometheus/rules_test.yml"])
            .current_dir(root())
            .output()
            .expect("promtool");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "promtool test rules compose/prometheus/rules_test.yml:\n{text}");
        println!(
            "promtool test rules compose/prometheus/rules_test.yml: {}",
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
    // The provisioned datasource is the one the dashboard names.
    let ds = yaml("compose/grafana/provisioning/datasources/prometheus.yml");
    let uid = ds["datasources"][0]["uid"].as_str().expect("datasource uid");
    let text = read("compose/grafana/dashboards/pipeline.json");
    assert!(text.contains(&format!("\"uid\": \"{uid}\"")), "the dashboard does not use datasource {uid}");
}
