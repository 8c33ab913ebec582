//! Reading compose/: helpers shared by the compose tests (tests/compose/) and the Docker test
//! (tests/docker/).
#![allow(dead_code)] // each test target uses its own part

pub use serde_json::Value as Json;
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

pub fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// A YAML file as JSON, with `<<` merge keys applied (as compose does).
pub fn yaml(rel: &str) -> Json {
    let mut v: serde_norway::Value = serde_norway::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    v.apply_merge().unwrap_or_else(|e| panic!("{rel}: merge keys: {e}"));
    serde_json::to_value(v).unwrap_or_else(|e| panic!("{rel}: not JSON-like: {e}"))
}

pub const COMPOSE: &str = "compose/docker-compose.yml";

pub fn compose() -> Json {
    yaml(COMPOSE)
}

/// The compose profiles of the optional stores: each is named as its store is in `STORES`
/// (the registry's names), and MySQL, the system of record, has none.
pub fn store_profiles() -> Vec<&'static str> {
    pipeline_stores::StoreKind::ALL.into_iter().filter(|k| *k != pipeline_stores::REQUIRED).map(|k| k.name()).collect()
}

/// Whether a service runs with the stores: no profile, or only its store's.
pub fn with_the_stores(s: &Json) -> bool {
    match s.get("profiles").and_then(Json::as_array) {
        None => true,
        Some(p) => p.len() == 1 && p[0].as_str().is_some_and(|p| store_profiles().contains(&p)),
    }
}

/// The compose file as compose v1 reads it: without the top-level `name:` and the
/// `required: false` of an optional store's dependency, both v2's (docs/guides/compose.md).
pub fn as_v1(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("name: "))
        .map(|l| format!("{}\n", l.replace(", required: false", "")))
        .collect()
}

pub fn services(c: &Json) -> &serde_json::Map<String, Json> {
    c["services"].as_object().expect("services is a mapping")
}

/// Compose interpolation with an empty environment: `${X:-d}` and `${X-d}` give d, `${X}` and
/// `$X` give "", `$$` gives `$`.
pub fn interpolate(s: &str) -> String {
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

pub fn interpolate_all(v: &Json) -> Json {
    match v {
        Json::String(s) => Json::String(interpolate(s)),
        Json::Array(a) => Json::Array(a.iter().map(interpolate_all).collect()),
        Json::Object(o) => Json::Object(o.iter().map(|(k, v)| (k.clone(), interpolate_all(v))).collect()),
        other => other.clone(),
    }
}

pub fn env_of<'a>(c: &'a Json, service: &str) -> &'a serde_json::Map<String, Json> {
    c["services"][service]["environment"]
        .as_object()
        .unwrap_or_else(|| panic!("service {service}: environment must be a mapping"))
}

pub fn scalar(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The variables every host port is published with (`127.0.0.1:${VAR:-port}:port`, the form
/// tests/compose/ports.rs holds the file to), in the order of the file.
pub fn port_variables(c: &Json) -> Vec<String> {
    services(c)
        .values()
        .flat_map(|s| s["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_str()?.strip_prefix("127.0.0.1:${")?.split_once(":-").map(|(v, _)| v.to_string()))
        .collect()
}
