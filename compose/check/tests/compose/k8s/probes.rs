//! Probes that ask routes the programs serve, on the port that serves them.

use super::*;

#[test]
fn probes_ask_routes_the_programs_serve_on_the_port_that_serves_them() {
    let docs = docs();
    let mut ignored = Vec::new();
    let mut problems = Vec::new();
    for (d, pod, c, bin) in program_containers(&docs) {
        let at = d.at();
        let ports = list(&c["ports"]);
        let Some((_, vars)) = LISTENERS.iter().find(|(b, _)| *b == bin) else {
            // reconcile: no listener, nothing to probe or publish.
            for p in ["livenessProbe", "readinessProbe", "startupProbe"] {
                if c.get(p).is_some() {
                    problems.push(format!("{at}: {p} on {bin}, which serves no HTTP"));
                }
            }
            if !ports.is_empty() {
                problems.push(format!("{at}: ports on {bin}, which listens on none"));
            }
            continue;
        };
        let served = routes(bin);
        if !served.contains("/healthz") {
            problems
                .push(format!("{at}: no `.route(\"/healthz\"` found in {}: has the routing changed?", source_dir(bin)));
            continue;
        }
        let env = container_env(&docs, c, &at, &mut ignored);
        let help = help_env(bin).expect("a program");
        let addr = |var: &str| env.get(var).cloned().flatten().or_else(|| help.get(var).cloned().flatten());
        let listening: Vec<(&str, i64)> = vars.iter().filter_map(|v| Some((*v, port_of(&addr(v)?)?))).collect();
        let Some(&(health_var, health_port)) = listening.first() else {
            problems.push(format!("{at}: none of {vars:?} set"));
            continue;
        };
        // Every port the container declares is one it listens on.
        for p in ports {
            let n = p["containerPort"].as_i64().unwrap_or_default();
            if !listening.iter().any(|(_, port)| *port == n) {
                problems.push(format!("{at}: containerPort {n}, but {bin} listens on {listening:?}"));
            }
        }
        // Liveness: the process serves. Readiness: /readyz where the program has one (the ingest:
        // Kafka answers), else /healthz (the writer takes no requests; its listener opens once the
        // stores are prepared). Startup, where set: a served route too.
        let ready = if served.contains("/readyz") { "/readyz" } else { "/healthz" };
        for (probe, want) in
            [("livenessProbe", Some("/healthz")), ("readinessProbe", Some(ready)), ("startupProbe", None)]
        {
            let p = &c[probe];
            if p.is_null() {
                if want.is_some() && long_running(d) {
                    problems.push(format!("{at}: no {probe}"));
                }
                continue;
            }
            let Some(path) = p["httpGet"]["path"].as_str() else {
                problems.push(format!("{at}: {probe} is not an httpGet"));
                continue;
            };
            if !served.contains(path) {
                problems.push(format!("{at}: {probe} asks {path}; {bin} serves {served:?}"));
            }
            if want.is_some_and(|w| w != path) {
                problems.push(format!("{at}: {probe} asks {path}, not {}", want.unwrap_or_default()));
            }
            match resolve_port(&p["httpGet"]["port"], ports) {
                Some(n) if n == health_port => {}
                other => problems.push(format!(
                    "{at}: {probe} on port {other:?}; {bin} serves {path} on {health_var} ({health_port})"
                )),
            }
        }
        // The scrape annotation names the port /metrics is on.
        if let Some(p) = pod["metadata"]["annotations"]["prometheus.io/port"].as_str() {
            if p.parse::<i64>().ok() != Some(health_port) || !served.contains("/metrics") {
                problems.push(format!("{at}: prometheus.io/port {p}, but /metrics is on {health_var} ({health_port})"));
            }
        }
        println!("{at}: probes on {health_var} ({health_port}), {bin} serves {served:?}");
    }
    assert!(problems.is_empty(), "{DIR}:\n{}", problems.join("\n"));
}
