//! Healthchecks, restart policies and start order.

use crate::{compose, services, COMPOSE};
use std::collections::BTreeSet;

/// Exporters (`*-exporter`): minimal images without a shell or an HTTP client, so no
/// healthcheck; Prometheus' `up` is their health (the dashboard's first panel). Nothing of the
/// pipeline waits for them.
fn exporter(name: &str) -> bool {
    name.ends_with("-exporter")
}

/// The live view: nothing of the pipeline waits for it either.
const VIEWS: [&str; 2] = ["prometheus", "grafana"];

#[test]
fn every_service_the_programs_need_is_healthchecked_and_restarted() {
    let c = compose();
    let all = services(&c);
    let mut problems = Vec::new();
    for (name, s) in all {
        // A profile of its own makes a service on demand, unless it is an optional store's.
        let one_shot = !crate::with_the_stores(s);
        if !one_shot && !exporter(name) {
            let test = &s["healthcheck"]["test"];
            let ok = test.as_array().is_some_and(|t| t.len() > 1 && t[0] != "NONE") || test.as_str().is_some();
            if !ok {
                problems.push(format!("{name}: no healthcheck"));
            }
        }
        if !one_shot {
            match s["restart"].as_str() {
                Some("unless-stopped" | "always" | "on-failure") => {}
                other => problems.push(format!("{name}: restart is {other:?}")),
            }
        }
        if let Some(deps) = s["depends_on"].as_object() {
            for (dep, how) in deps {
                if !all.contains_key(dep) {
                    problems.push(format!("{name} depends on unknown {dep}"));
                } else if how["condition"] != "service_healthy" {
                    problems.push(format!("{name} starts before {dep} is healthy"));
                } else if exporter(dep) {
                    problems.push(format!("{name} waits for an exporter"));
                }
            }
        }
    }
    // The pipeline waits for every server and the load waits for the pipeline.
    let deps = |s: &str| all[s]["depends_on"].as_object().map(|d| d.keys().cloned().collect()).unwrap_or_default();
    let w: BTreeSet<String> = deps("writer");
    // The servers: every long-running service that is not ours (built here), an exporter or a view.
    let servers = all.iter().filter(|(name, s)| {
        s.get("build").is_none() && crate::with_the_stores(s) && !exporter(name) && !VIEWS.contains(&name.as_str())
    });
    for (server, _) in servers {
        if !w.contains(server) {
            problems.push(format!("writer does not wait for {server}"));
        }
    }
    let k6: BTreeSet<String> = deps("k6");
    if !(k6.contains("ingest") && k6.contains("writer")) {
        problems.push("k6 must wait for a healthy ingest and writer".into());
    }
    let ingest_check = all["ingest"]["healthcheck"]["test"].to_string();
    let writer_check = all["writer"]["healthcheck"]["test"].to_string();
    if !ingest_check.contains("/readyz") {
        problems.push("ingest's healthcheck must ask /readyz".into());
    }
    if !writer_check.contains("/healthz") {
        problems.push("writer's healthcheck must ask /healthz".into());
    }
    assert!(problems.is_empty(), "{COMPOSE}:\n{}", problems.join("\n"));
}
