//! Metric names in PromQL, resolved through the recording rules to the catalog
//! (services/common/src/catalog.rs).

use crate::images::pinned;
use crate::{interpolate, yaml};
use pipeline_common::catalog;
use std::collections::{BTreeMap, BTreeSet};

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
pub(crate) fn catalog_metric(name: &str) -> Option<&'static str> {
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

pub(crate) fn recording_rules() -> BTreeMap<String, String> {
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
pub(crate) fn leaves(
    expr: &str,
    rules: &BTreeMap<String, String>,
    out: &mut BTreeSet<&'static str>,
    errors: &mut Vec<String>,
) {
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
