//! Host ports equal to .env.example's, and the k6 service's output in a folder every clone has.

use crate::{compose, env_of, interpolate, read, root, scalar, services};
use std::collections::BTreeMap;

fn env_example() -> BTreeMap<String, String> {
    read(".env.example")
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn host_ports_are_those_of_env_example() {
    let c = compose();
    let ex = env_example();
    let mut problems = Vec::new();
    let mut published = BTreeMap::new();
    for (name, s) in services(&c) {
        for p in s["ports"].as_array().into_iter().flatten() {
            let p = p.as_str().unwrap_or_else(|| panic!("{name}: ports as strings"));
            // 127.0.0.1:${VAR:-default}:container
            let Some(rest) = p.strip_prefix("127.0.0.1:${") else {
                problems.push(format!("{name}: {p} is not 127.0.0.1:${{VAR:-port}}:port"));
                continue;
            };
            let (var, tail) = rest.split_once(":-").expect("a default port");
            let (port, _) = tail.split_once('}').expect("closed");
            match ex.get(var) {
                Some(v) if v == port => {}
                other => problems.push(format!("{name}: {var} is {port} here, {other:?} in .env.example")),
            }
            published.insert(var.to_string(), port.to_string());
            println!("{name}: host 127.0.0.1:{port} (${var})");
        }
    }
    // The native addresses of .env.example are the compose stack's published ports, so a
    // host-side reconcile or k6 works against either with the same settings.
    for (addr_var, port_var) in [("INGEST_LISTEN", "INGEST_PORT"), ("WRITER_METRICS_ADDR", "WRITER_METRICS_PORT")] {
        let addr = ex.get(addr_var).cloned().unwrap_or_default();
        let port = published.get(port_var).cloned().unwrap_or_default();
        if !addr.ends_with(&format!(":{port}")) {
            problems.push(format!(".env.example: {addr_var}={addr} but compose publishes {port_var}={port}"));
        }
    }
    for (url_var, port_var) in [
        ("KAFKA_BROKERS", "KAFKA_PORT"),
        ("MYSQL_URL", "MYSQL_PORT"),
        ("REDIS_URL", "REDIS_PORT"),
        ("ES_URL", "ES_PORT"),
        ("MONGO_URL", "MONGO_PORT"),
    ] {
        let url = ex.get(url_var).cloned().unwrap_or_default();
        let port = published.get(port_var).cloned().unwrap_or_default();
        if port.is_empty() || !url.contains(&format!(":{port}")) {
            problems.push(format!(".env.example: {url_var}={url} does not use the published {port_var}={port}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn k6_writes_its_summary_and_ids_into_a_folder_every_clone_has() {
    let c = compose();
    let k6 = &c["services"]["k6"];
    assert_eq!(k6["profiles"], serde_json::json!(["load"]), "k6 runs only on demand (profile load)");
    let vols: Vec<String> = k6["volumes"].as_array().expect("volumes").iter().map(scalar).collect();
    let out = vols.iter().find(|v| v.ends_with(":/k6/out")).expect("k6/out mounted writable at /k6/out");
    let host = out.split(':').next().unwrap();
    let host_dir = root().join("compose").join(host);
    assert!(host_dir.is_dir(), "{host} does not exist");
    let tracked = std::process::Command::new("git")
        .args(["ls-files", "--error-unmatch", "k6/out/.gitignore"])
        .current_dir(root())
        .output()
        .expect("git");
    assert!(tracked.status.success(), "k6/out/ must hold a committed file so that a fresh clone has it");
    let env = env_of(&c, "k6");
    for var in ["SUMMARY_FILE", "K6_CONSOLE_OUTPUT"] {
        let v = interpolate(&scalar(&env[var]));
        assert!(v.starts_with("/k6/out/"), "{var}={v} is not in the mounted folder");
    }
    assert_eq!(scalar(&env["K6_LOG_FORMAT"]), "raw", "the id log needs bare lines");
    assert_eq!(scalar(&env["INGEST_URL"]), "https://ingest:8080", "the ingest speaks HTTPS only");
    // reconcile reads the same folder at the same path
    let rv: Vec<String> =
        c["services"]["reconcile"]["volumes"].as_array().expect("volumes").iter().map(scalar).collect();
    assert!(rv.iter().any(|v| v.starts_with("../k6:/k6")), "reconcile sees k6/out at /k6/out");
}
