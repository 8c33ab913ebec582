//! compose/ without a Docker engine: the compose file against the compose-spec JSON schema
//! (vendored in compose/schema/), every variable the programs read set in their services, every
//! image pinned, a healthcheck on every service the programs wait for, host ports equal to
//! .env.example's, the k6 service's output in a folder every clone has; the Prometheus rules and
//! the Grafana dashboard querying only metrics of the catalog (services/common/src/catalog.rs),
//! and those metrics present in a real scrape of a running writer and ingest (this one needs the
//! servers of `scripts/stack up`, and fails naming the missing one); the README's metric table
//! equal to the catalog.
//!
//! The programs' variables come from their own `--help` (clap prints `[env: NAME=]` and
//! `[default: ...]` for each flag): the binaries `cargo test --workspace` builds.

use pipeline_common::catalog;
use pipeline_testkit as kit;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// A YAML file as JSON, with `<<` merge keys applied (as compose does).
fn yaml(rel: &str) -> Json {
    let mut v: serde_norway::Value = serde_norway::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    v.apply_merge().unwrap_or_else(|e| panic!("{rel}: merge keys: {e}"));
    serde_json::to_value(v).unwrap_or_else(|e| panic!("{rel}: not JSON-like: {e}"))
}

const COMPOSE: &str = "compose/docker-compose.yml";

fn compose() -> Json {
    yaml(COMPOSE)
}

fn services(c: &Json) -> &serde_json::Map<String, Json> {
    c["services"].as_object().expect("services is a mapping")
}

/// Compose interpolation with an empty environment: `${X:-d}` and `${X-d}` give d, `${X}` and
/// `$X` give "", `$$` gives `$`.
fn interpolate(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(a) = after.strip_prefix('{') {
            let end = a.find('}').unwrap_or_else(|| panic!("unclosed ${{ in {s}"));
            let inner = &a[..end];
            if let Some((_, d)) = inner.split_once(":-").or_else(|| inner.split_once('-')) {
                out.push_str(d);
            } else if let Some((_, msg)) = inner.split_once(":?").or_else(|| inner.split_once('?')) {
                panic!("{s}: required variable ({msg})");
            }
            rest = &a[end + 1..];
        } else {
            let n = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            rest = &after[n..];
        }
    }
    out.push_str(rest);
    out
}

fn interpolate_all(v: &Json) -> Json {
    match v {
        Json::String(s) => Json::String(interpolate(s)),
        Json::Array(a) => Json::Array(a.iter().map(interpolate_all).collect()),
        Json::Object(o) => Json::Object(o.iter().map(|(k, v)| (k.clone(), interpolate_all(v))).collect()),
        other => other.clone(),
    }
}

// ------------------------------------------------------------------------------- schema

#[test]
fn compose_file_is_valid_against_the_compose_spec_schema() {
    let schema: Json = serde_json::from_str(&read("compose/schema/compose-spec.json")).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the compose-spec schema compiles");
    let raw = compose();
    for (what, doc) in [("as written", raw.clone()), ("interpolated with the defaults", interpolate_all(&raw))] {
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{COMPOSE} ({what}) violates compose-spec.json:\n{}", errors.join("\n"));
        println!("{COMPOSE} ({what}): valid against compose/schema/compose-spec.json");
    }
    println!("services: {}", services(&raw).keys().cloned().collect::<Vec<_>>().join(", "));
}

// ------------------------------------------------------------------------------- variables

/// (variable, clap default) of every flag of `bin` (and of its subcommands), from `--help`.
fn program_env(bin: &str) -> BTreeMap<String, Option<String>> {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(kit::bin_path(bin))
            .args(args)
            .env_clear() // clap prints an env var's current value; we want the defaults
            .output()
            .unwrap_or_else(|e| panic!("{bin} --help: {e}"));
        assert!(out.status.success(), "{bin} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("help is UTF-8")
    };
    let top = help(&["--help"]);
    let mut texts = vec![top.clone()];
    // Subcommands (reconcile count, diff, ...) may add flags of their own.
    if let Some(cmds) = top.split("Commands:\n").nth(1) {
        for line in cmds.lines().take_while(|l| l.starts_with("  ")) {
            let name = line.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" {
                texts.push(help(&[name, "--help"]));
            }
        }
    }
    let mut out = BTreeMap::new();
    for text in texts {
        // One block per flag: from a line starting with `-`/`--` to the next one.
        let mut blocks: Vec<String> = Vec::new();
        for line in text.lines() {
            if line.trim_start().starts_with('-') {
                blocks.push(String::new());
            }
            if let Some(b) = blocks.last_mut() {
                b.push_str(line);
                b.push('\n');
            }
        }
        for b in blocks {
            let Some(env) = b.split("[env: ").nth(1).and_then(|s| s.split('=').next()) else { continue };
            let default = b.split("[default: ").nth(1).and_then(|s| s.split(']').next()).map(str::to_string);
            out.insert(env.to_string(), default);
        }
    }
    assert!(!out.is_empty(), "{bin} --help lists no [env: ...]: has its help format changed?");
    out
}

fn env_of<'a>(c: &'a Json, service: &str) -> &'a serde_json::Map<String, Json> {
    c["services"][service]["environment"]
        .as_object()
        .unwrap_or_else(|| panic!("service {service}: environment must be a mapping"))
}

fn scalar(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The programs of the image and the service running each.
const PROGRAMS: [(&str, &str); 3] = [("writer", "writer"), ("ingest", "ingest"), ("reconcile", "reconcile")];

#[test]
fn every_variable_the_programs_read_is_set_with_their_default() {
    let c = compose();
    let mut problems = Vec::new();
    for (bin, service) in PROGRAMS {
        let env = env_of(&c, service);
        let wanted = program_env(bin);
        for (var, default) in &wanted {
            let Some(v) = env.get(var) else {
                problems.push(format!("{service}: {var} is not set (the {bin} reads it; default {default:?})"));
                continue;
            };
            let v = scalar(v);
            // `${VAR:-d}`: passed through from the host, and d must be the program's own default.
            if let Some(d) = v.strip_prefix(&format!("${{{var}:-")).and_then(|s| s.strip_suffix('}')) {
                if Some(d) != default.as_deref() {
                    problems.push(format!("{service}: {var} defaults to {d:?} here but to {default:?} in {bin}"));
                }
            }
            let resolved = interpolate(&v);
            if resolved.contains("127.0.0.1") || resolved.contains("localhost") {
                problems.push(format!("{service}: {var}={resolved} points at the container itself"));
            }
        }
        println!("{service}: all {} variables {bin} reads are set", wanted.len());
    }
    assert!(
        problems.is_empty(),
        "{COMPOSE}:\n{}\n(the variables come from the built binaries' --help: after changing a flag, \
         `cargo build --workspace` first — `cargo test --workspace` does)",
        problems.join("\n")
    );
}

#[test]
fn the_image_holds_every_workspace_binary_and_runs_as_a_user() {
    let df = read("compose/Dockerfile");
    assert!(df.contains("cargo build --release --locked --workspace --bins"), "the image must build every binary");
    assert!(df.contains("cargo chef cook"), "dependencies are built in their own cached layer (cargo-chef)");
    assert!(df.contains("--mount=type=cache"), "the cargo registry is a BuildKit cache mount");
    let last_from = df.rfind("\nFROM ").expect("a runtime stage");
    assert!(df[last_from..].contains("\nUSER "), "the runtime stage sets a non-root USER");
    let ignore = read(".dockerignore");
    for p in ["target", ".git", ".stack", "k6/out"] {
        assert!(ignore.lines().any(|l| l.trim_end_matches('/') == p), ".dockerignore lacks {p}");
    }
    let c = compose();
    for (_, service) in PROGRAMS {
        let s = &c["services"][service];
        assert_eq!(s["build"]["dockerfile"], "compose/Dockerfile", "{service} is built from compose/Dockerfile");
        assert_eq!(s["image"], c["services"]["writer"]["image"], "{service} shares the writer's image");
    }
}

// ------------------------------------------------------------------------------- images

/// An exact version (`1.2.3`, `v1.2.3`, `1.2.3-bookworm`) or a dated build (`bookworm-20251229-slim`).
fn exact_tag(tag: &str) -> bool {
    let t = tag.trim_start_matches('v');
    let version = t.split('-').next().unwrap_or("");
    let parts: Vec<_> = version.split('.').collect();
    let semver = parts.len() >= 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let dated = t.split('-').any(|p| p.len() == 8 && p.bytes().all(|b| b.is_ascii_digit()));
    semver || dated
}

fn pinned(image: &str) -> Result<(), String> {
    let (name_tag, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let hex = d.strip_prefix("sha256:").ok_or(format!("{image}: digest is not sha256"))?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("{image}: malformed digest"));
        }
    }
    let last = name_tag.rsplit('/').next().unwrap_or(name_tag);
    let Some((_, tag)) = last.split_once(':') else { return Err(format!("{image}: no tag")) };
    if !exact_tag(tag) {
        return Err(format!("{image}: tag {tag} is not an exact version"));
    }
    Ok(())
}

#[test]
fn every_image_is_pinned() {
    let c = compose();
    let mut problems = Vec::new();
    for (name, s) in services(&c) {
        if s.get("build").is_some() {
            continue; // the pipeline's own image, built from compose/Dockerfile
        }
        match s["image"].as_str() {
            Some(i) => {
                if let Err(e) = pinned(i) {
                    problems.push(format!("{name}: {e}"));
                }
                println!("{name}: {i}");
            }
            None => problems.push(format!("{name}: neither image nor build")),
        }
    }
    let df = read("compose/Dockerfile");
    for line in df.lines() {
        if let Some(v) = line.strip_prefix("ARG ").and_then(|a| a.split_once("_IMAGE=")).map(|(_, v)| v) {
            if let Err(e) = pinned(v) {
                problems.push(format!("compose/Dockerfile: {e}"));
            }
        }
        if let Some(from) = line.strip_prefix("FROM ") {
            let img = from.split_whitespace().next().unwrap_or("");
            if !img.starts_with("${") && !["chef", "plan", "build"].contains(&img) {
                if let Err(e) = pinned(img) {
                    problems.push(format!("compose/Dockerfile: {e}"));
                }
            }
        }
        if line.contains("cargo install") && !line.contains("--version") && !line.contains("--locked") {
            problems.push(format!("compose/Dockerfile: unpinned `{line}`"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ------------------------------------------------------------------------------- health

/// Exporters: minimal images without a shell or an HTTP client, so no healthcheck; Prometheus'
/// `up` is their health (the dashboard's first panel). Nothing of the pipeline waits for them.
const EXPORTERS: [&str; 5] =
    ["mysqld-exporter", "redis-exporter", "kafka-exporter", "mongodb-exporter", "elasticsearch-exporter"];

#[test]
fn every_service_the_programs_need_is_healthchecked_and_restarted() {
    let c = compose();
    let all = services(&c);
    let mut problems = Vec::new();
    for (name, s) in all {
        let one_shot = s.get("profiles").is_some();
        if !one_shot && !EXPORTERS.contains(&name.as_str()) {
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
                } else if EXPORTERS.contains(&dep.as_str()) {
                    problems.push(format!("{name} waits for an exporter"));
                }
            }
        }
    }
    // The pipeline waits for every server and the load waits for the pipeline.
    let deps = |s: &str| all[s]["depends_on"].as_object().map(|d| d.keys().cloned().collect()).unwrap_or_default();
    let w: BTreeSet<String> = deps("writer");
    for server in ["mysql", "redis", "kafka", "mongo", "elasticsearch"] {
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

// ------------------------------------------------------------------------------- ports, k6

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
    assert_eq!(scalar(&env["INGEST_URL"]), "http://ingest:8080");
    // reconcile reads the same folder at the same path
    let rv: Vec<String> =
        c["services"]["reconcile"]["volumes"].as_array().expect("volumes").iter().map(scalar).collect();
    assert!(rv.iter().any(|v| v.starts_with("../k6:/k6")), "reconcile sees k6/out at /k6/out");
}

// ------------------------------------------------------------------------------- metrics

/// PromQL words that are not metric names when not followed by `(`: aggregations (`sum by (x) (...)`)
/// and binary operators.
const KEYWORDS: [&str; 17] = [
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
];

/// Metric names a PromQL expression reads (functions, keywords, labels, ranges left out).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let b = expr.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let skip_group = |mut i: usize, open: u8, close: u8| {
        let mut depth = 0;
        while i < b.len() {
            if b[i] == open {
                depth += 1;
            } else if b[i] == close {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            i += 1;
        }
        i
    };
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += 1;
            }
            i += 1;
        } else if c == b'{' {
            i = skip_group(i, b'{', b'}');
        } else if c == b'[' {
            i = skip_group(i, b'[', b']');
        } else if c.is_ascii_digit() || c == b'.' {
            while i < b.len() && (ident(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let mut j = i;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            let call = j < b.len() && b[j] == b'(';
            if ["by", "without", "on", "ignoring", "group_left", "group_right"].contains(&word) {
                if call {
                    i = skip_group(j, b'(', b')');
                }
            } else if !call && !KEYWORDS.contains(&word) {
                out.insert(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Prometheus' own series (not exported by the pipeline).
const PROMETHEUS_BUILTIN: [&str; 1] = ["up"];

/// The catalog metric a sample name belongs to (`x_bucket` → histogram `x`).
fn catalog_metric(name: &str) -> Option<&'static str> {
    for (kind, n, _) in catalog::ALL {
        if *n == name {
            return Some(n);
        }
        if *kind == "histogram" && ["_bucket", "_sum", "_count"].iter().any(|s| name.strip_suffix(s) == Some(n)) {
            return Some(n);
        }
    }
    None
}

fn recording_rules() -> BTreeMap<String, String> {
    let rules = yaml("compose/prometheus/rules.yml");
    let mut out = BTreeMap::new();
    for g in rules["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let name = r["record"].as_str().expect("recording rules only").to_string();
            assert!(out.insert(name.clone(), r["expr"].as_str().expect("expr").to_string()).is_none(), "{name} twice");
        }
    }
    out
}

/// The catalog metrics `expr` reads, through recording rules; errors for anything else.
fn leaves(expr: &str, rules: &BTreeMap<String, String>, out: &mut BTreeSet<&'static str>, errors: &mut Vec<String>) {
    for name in metric_names(expr) {
        if name.contains(':') {
            match rules.get(&name) {
                Some(e) => leaves(e, rules, out, errors),
                None => errors.push(format!("{name}: no such recording rule in compose/prometheus/rules.yml")),
            }
        } else if PROMETHEUS_BUILTIN.contains(&name.as_str()) {
        } else if let Some(m) = catalog_metric(&name) {
            out.insert(m);
        } else {
            errors.push(format!("{name} (in `{expr}`) is not in services/common/src/catalog.rs"));
        }
    }
}

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
fn dashboard_metrics() -> BTreeSet<&'static str> {
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

/// Metrics that exist only once their event happened (a refusal, an error): declared in the
/// catalog, graphed, and absent from a healthy run's scrape. Everything else the dashboard
/// reads must be in the scrape below.
const EVENT_ONLY: [&str; 4] = [
    "ingest_kafka_errors_total",       // a broker refusal
    "ingest_uncertain_messages_total", // a 504
    "writer_store_errors_total",       // a failed store write
    "writer_store_retries_total",      // a retried store write
];

async fn scrape(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("GET /metrics on :{port}: {e}"))
        .text()
        .await
        .expect("metrics text")
}

fn sampled(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or("").to_string())
        .collect()
}

async fn wait_http(url: &str, child: &mut kit::Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if reqwest::get(url).await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        if let Ok(Some(st)) = child.0.try_wait() {
            panic!("{what} exited ({st}) before {url} answered");
        }
        assert!(Instant::now() < deadline, "{what}: {url} did not answer in 90 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The dashboard's metrics against a real scrape: a writer and an ingest on the stack's servers
/// (a private namespace), 40 messages through them, one poison record (for the dead-letter
/// counter) and a batch refused by a second ingest with a 64-slot ring (for ring_full), then their
/// `/metrics`. Needs `scripts/stack up`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_metric_is_in_a_real_scrape() {
    let _x = kit::exclusive().await;
    let ns = kit::Namespace::new("compose").await;
    let (wport, iport) = (kit::free_port(), kit::free_port());
    let dlq = format!("{}.dlq", ns.name);
    let mut writer = ns.spawn(
        "writer",
        &[],
        &[("WRITER_METRICS_ADDR", format!("127.0.0.1:{wport}")), ("WRITER_DLQ_TOPIC", dlq.clone())],
    );
    let mut ingest = ns.spawn("ingest", &[], &[("INGEST_LISTEN", format!("127.0.0.1:{iport}"))]);
    wait_http(&format!("http://127.0.0.1:{wport}/healthz"), &mut writer, "writer").await;
    wait_http(&format!("http://127.0.0.1:{iport}/readyz"), &mut ingest, "ingest").await;

    let client = reqwest::Client::new();
    let msgs = kit::messages(40, "compose");
    for m in &msgs[..20] {
        let r = client
            .post(format!("http://127.0.0.1:{iport}/v1/messages"))
            .header("content-type", "application/json")
            .body(m.to_json())
            .send()
            .await
            .expect("POST");
        assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    }
    let batch = format!("[{}]", msgs[20..].iter().map(|m| m.to_json()).collect::<Vec<_>>().join(","));
    let r = client
        .post(format!("http://127.0.0.1:{iport}/v1/messages/batch"))
        .header("content-type", "application/json")
        .body(batch)
        .send()
        .await
        .expect("POST batch");
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    kit::produce_raw(&ns.kafka, &ns.kafka.topic, [(b"poison".to_vec(), b"not a message".to_vec())]).await;
    // A ring of 64 slots refuses a batch of 100 messages: ingest_ring_rejections_total{reason="slots"}.
    let tport = kit::free_port();
    let mut tiny = ns.spawn(
        "ingest",
        &[],
        &[("INGEST_LISTEN", format!("127.0.0.1:{tport}")), ("INGEST_RING_SIZE", "64".to_string())],
    );
    wait_http(&format!("http://127.0.0.1:{tport}/readyz"), &mut tiny, "ingest with a tiny ring").await;
    let refused = kit::messages(100, "compose-refused");
    let batch = format!("[{}]", refused.iter().map(|m| m.to_json()).collect::<Vec<_>>().join(","));
    let r = client
        .post(format!("http://127.0.0.1:{tport}/v1/messages/batch"))
        .header("content-type", "application/json")
        .body(batch)
        .send()
        .await
        .expect("POST batch");
    assert_eq!(r.status(), 503, "a batch larger than the ring: {}", r.text().await.unwrap_or_default());

    // Everything stored in all four stores, the poison dead-lettered, offsets committed and the
    // high watermarks sampled (every 5 s).
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let stored = kit::metric(wport, "writer_store_records_total").await;
        let dead = kit::metric(wport, "writer_dlq_records_total").await;
        let text = scrape(wport).await;
        let names = sampled(&text);
        if stored >= 4.0 * msgs.len() as f64
            && dead >= 1.0
            && names.contains("writer_partition_committed_offset")
            && names.contains("writer_partition_high_watermark")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the writer did not store 4 × 40 records and a dead letter in 90 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (wtext, itext) = (scrape(wport).await, scrape(iport).await);
    let mut seen = sampled(&wtext);
    seen.extend(sampled(&itext));
    seen.extend(sampled(&scrape(tport).await));
    let mut missing = Vec::new();
    for m in dashboard_metrics() {
        let histogram = catalog::ALL.iter().any(|(k, n, _)| *n == m && *k == "histogram");
        let present = if histogram { seen.contains(&format!("{m}_bucket")) } else { seen.contains(m) };
        if !present && !EVENT_ONLY.contains(&m) {
            missing.push(m);
        }
        println!("{m}: {}", if present { "scraped" } else { "not scraped (only after its event)" });
    }
    assert!(missing.is_empty(), "the dashboard reads metrics no service exported: {missing:?}");
    for m in EVENT_ONLY {
        assert!(catalog_metric(m).is_some(), "{m} is not in the catalog");
    }
    // The info metric names each service, with the boot id of its /healthz.
    for (port, service, text) in [(wport, "writer", &wtext), (iport, "ingest", &itext)] {
        let health: Json =
            reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await.unwrap().json().await.unwrap();
        let boot = health["boot_id"].as_str().expect("boot_id on /healthz");
        let info = text.lines().find(|l| l.starts_with("pipeline_process_info{")).expect("pipeline_process_info");
        assert!(info.contains(&format!("service=\"{service}\"")), "{info}");
        assert!(info.contains(&format!("boot_id=\"{boot}\"")), "{info} vs /healthz {boot}");
        assert!(
            text.lines().any(|l| l.starts_with("process_start_time_seconds ")),
            "{service}: no process_start_time_seconds"
        );
        assert!(!text.contains("process_boot_id"), "{service} still exports process_boot_id");
    }
    writer.signal("TERM");
    writer.wait_exit(Duration::from_secs(40));
}

// ------------------------------------------------------------------------------- README

const BEGIN: &str = "<!-- metrics:begin (generated from services/common/src/catalog.rs by compose/check; UPDATE_README=1 cargo test -p compose-check --test compose readme rewrites it) -->";
const END: &str = "<!-- metrics:end -->";

fn metric_table() -> String {
    let mut s = String::from("| metric | type | meaning |\n|---|---|---|\n");
    for (kind, name, help) in catalog::ALL {
        s.push_str(&format!("| `{name}` | {kind} | {} |\n", help.replace('|', "\\|")));
    }
    s
}

#[test]
fn readme_metric_table_is_the_catalog() {
    let path = root().join("README.md");
    let text = std::fs::read_to_string(&path).expect("README.md");
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        panic!("README.md has no generated metric table (lines {BEGIN} … {END})");
    };
    let current = &text[b + BEGIN.len()..e];
    let want = format!("\n{}", metric_table());
    if current != want {
        if std::env::var_os("UPDATE_README").is_some() {
            let new = format!("{}{BEGIN}{want}{}", &text[..b], &text[e..]);
            std::fs::write(&path, new).expect("write README.md");
            println!("README.md metric table rewritten from the catalog");
        } else {
            panic!(
                "README.md's metric table differs from services/common/src/catalog.rs; \
                 run `UPDATE_README=1 cargo test -p compose-check --test compose readme`"
            );
        }
    }
}

#[test]
fn promql_names_are_extracted() {
    let e = r#"histogram_quantile(0.99, sum by (le, route) (rate(ingest_request_seconds_bucket{route="/v1"}[30s]))) / on(job) group_left up"#;
    assert_eq!(metric_names(e), BTreeSet::from(["ingest_request_seconds_bucket".to_string(), "up".to_string()]));
    assert_eq!(
        metric_names("max by (partition) (a_b) - max by (partition) (pipeline:x:rate30s) * 1e3"),
        BTreeSet::from(["a_b".to_string(), "pipeline:x:rate30s".to_string()])
    );
    assert!(pinned("redis:7.0.15").is_ok() && pinned("redis:7").is_err() && pinned("grafana/k6:latest").is_err());
    assert!(pinned("debian:bookworm-20251229-slim").is_ok() && pinned("localhost:5000/x").is_err());
    assert_eq!(interpolate("127.0.0.1:${X:-80}:80 $$ ${Y}"), "127.0.0.1:80:80 $ ");
}
