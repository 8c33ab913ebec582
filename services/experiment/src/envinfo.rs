//! `env.json`: what a stranger needs to judge the numbers — the commit, the binaries, the server
//! versions, the machine (CPU model, cores, kernel, memory), the experiment's own command line
//! and the pipeline's environment variables (passwords masked).

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn run(cmd: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    let mut c = Command::new(cmd);
    c.args(args);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    let out = c.output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn first_line(text: Option<String>) -> Value {
    text.and_then(|t| t.lines().next().map(str::to_string)).map(Value::String).unwrap_or(Value::Null)
}

/// A value as the evidence shows it: a URL's password and secret options' values masked
/// (`pipeline_common::secret::redact`).
pub(crate) fn mask(value: &str) -> String {
    pipeline_common::secret::redact(value)
}

fn cpu_model() -> Value {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .map(Value::String)
        .unwrap_or(Value::Null)
}

fn mem_total() -> Value {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("MemTotal:").map(|v| v.trim().to_string())))
        .map(Value::String)
        .unwrap_or(Value::Null)
}

fn binary(path: &Path) -> Value {
    match std::fs::metadata(path) {
        Ok(m) => json!({
            "path": path.display().to_string(),
            "bytes": m.len(),
            "modified": m.modified().ok().map(|t| time::OffsetDateTime::from(t).format(&time::format_description::well_known::Rfc3339).unwrap_or_default()),
        }),
        Err(e) => json!({ "path": path.display().to_string(), "error": e.to_string() }),
    }
}

async fn opensearch(http: &reqwest::Client) -> Value {
    let url = std::env::var("ES_URL").unwrap_or_else(|_| "http://127.0.0.1:9200".into());
    match http.get(&url).send().await {
        Ok(r) => {
            r.json::<Value>().await.ok().and_then(|v| v.pointer("/version/number").cloned()).unwrap_or(Value::Null)
        }
        Err(_) => Value::Null,
    }
}

/// The nx-27017 version from its dist-info folder in the venv that holds k6.
fn nx_version(k6: &Path) -> Value {
    let venv = k6.parent().and_then(Path::parent);
    let Some(lib) = venv.map(|v| v.join("lib")) else { return Value::Null };
    let found = std::fs::read_dir(lib).ok().into_iter().flatten().flatten().find_map(|py| {
        std::fs::read_dir(py.path().join("site-packages")).ok()?.flatten().find_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("nx_27017-").and_then(|r| r.strip_suffix(".dist-info")).map(str::to_string)
        })
    });
    found.map(Value::String).unwrap_or(Value::Null)
}

pub(crate) async fn collect(http: &reqwest::Client, root: &Path, bins: &Path, k6: &Path, profile: &str) -> Value {
    let dirty = run("git", &["status", "--porcelain"], Some(root)).map(|t| t.lines().count()).unwrap_or(0);
    // Every store's variables (`<STORE>_`, the registry's names) and the programs' own.
    let mut prefixes: Vec<String> =
        pipeline_stores::StoreKind::ALL.iter().map(|s| format!("{}_", s.name().to_uppercase())).collect();
    prefixes.extend(["KAFKA_", "WRITER_", "INGEST_", "RECONCILE_", "PIPELINE_", "K6_"].map(String::from));
    let vars: serde_json::Map<String, Value> = std::env::vars()
        .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p.as_str())))
        .map(|(k, v)| (k, Value::String(mask(&v))))
        .collect();
    let tansu = crate::paths::cache_dir().join("tansu-0.6.0/bin/tansu");
    json!({
        "started_at": crate::round::now_rfc3339(),
        "command": std::env::args().map(|a| pipeline_common::secret::redact_arg(&a)).collect::<Vec<_>>(),
        "git_sha": run("git", &["rev-parse", "HEAD"], Some(root)),
        "git_uncommitted_files": dirty,
        "profile": profile,
        "binaries": {
            "writer": binary(&bins.join("writer")),
            "ingest": binary(&bins.join("ingest")),
            "reconcile": binary(&bins.join("reconcile")),
            "experiment": std::env::current_exe().map(|p| binary(&p)).unwrap_or(Value::Null),
        },
        "servers": {
            "mariadb": first_line(run("mariadbd", &["--version"], None).or_else(|| run("/usr/sbin/mariadbd", &["--version"], None))),
            "redis": first_line(run("redis-server", &["--version"], None)),
            "tansu": if tansu.exists() { json!(tansu.display().to_string()) } else { Value::Null },
            "opensearch": opensearch(http).await,
            "nx-27017": nx_version(k6),
        },
        "k6": first_line(run(&k6.display().to_string(), &["version"], None)),
        "rustc": first_line(run("rustc", &["--version"], None)),
        "cpu_model": cpu_model(),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).ok(),
        "memory": mem_total(),
        "environment": vars,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_masked() {
        assert_eq!(super::mask("mysql://pipeline:secret@127.0.0.1:3306/p"), "mysql://pipeline:***@127.0.0.1:3306/p");
        assert_eq!(super::mask("redis://127.0.0.1:6379/0"), "redis://127.0.0.1:6379/0");
    }
}
