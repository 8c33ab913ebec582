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

mod dashboard;
mod env;
mod health;
mod images;
mod ports;
mod promql;
mod readme;
mod schema;
mod scrape;

// Helpers shared by the modules.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};

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
