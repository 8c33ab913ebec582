//! compose/k8s/, the Kubernetes manifests, without a cluster: every manifest valid against the
//! Kubernetes JSON schemas of one pinned version (kubernetes-validate from the stack's venv,
//! strict: an unknown field is an error); every variable the manifests give ingest, writer and
//! reconcile one the program reads (from its `--help`, as env.rs), every one it needs set, and the
//! values those of compose's services but for the differences listed here; no more writer
//! consumers than the topic has partitions; probes that ask routes the programs register, on the
//! port that serves them; every pod hardened, with resources, disruption budgets and Services
//! that select it; every secret a file that docs/guides/kubernetes.md creates.
//!
//! What this cannot see: a cluster. The manifests were never applied to one here.

mod env;
mod partitions;
mod pods;
mod probes;
mod schema;
mod secrets;

use crate::env::{program_env, PROGRAMS};
use crate::{compose, env_of, interpolate, read, root, scalar, Json};
use pipeline_testkit as kit;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::OnceLock;

pub(super) const DIR: &str = "compose/k8s";
pub(super) const GUIDE: &str = "docs/guides/kubernetes.md";
pub(super) const NAMESPACE: &str = "pipeline";

/// The Kubernetes version whose schemas the manifests are held to (the guide names it). An
/// older one than kubernetes-validate's newest on purpose: clusters run behind the newest
/// release, and every API used here (apps/v1, batch/v1, policy/v1, autoscaling/v2) is GA from
/// before it on.
pub(super) const KUBERNETES_VERSION: &str = "1.30.0";

/// Where each program's code is: its HTTP routes and whether it sets up logging are read there.
pub(super) const SOURCES: [(&str, &str); 3] =
    [("writer", "services/writer/src"), ("ingest", "services/ingest/src"), ("reconcile", "reconcile/src")];

/// Read besides the flags, by `pipeline_common::telemetry::init_tracing` (RUST_LOG is
/// tracing-subscriber's `EnvFilter` default variable): by a program whose main.rs calls it.
pub(super) const LOGGING: [&str; 2] = ["RUST_LOG", "LOG_FORMAT"];

/// Variables that name a file the program reads, besides the `*_FILE` ones.
pub(super) const PATH_VARIABLES: [&str; 1] = ["INGEST_AUTH_KEYS"];

/// Needed although the program has no default for them (a default that points at the pod itself
/// makes a variable needed too: the connection URLs, the brokers, the listen addresses).
pub(super) const NEEDED: [(&str, &str, &str); 1] =
    [("ingest", "INGEST_AUTH_KEYS", "with INGEST_AUTH=keys, the default, the ingest refuses to start without it")];

/// Each program's HTTP listeners; the first one set serves its health routes and /metrics
/// (services/ingest/src/startup.rs: with --admin-listen the admin routes are served there only,
/// else beside the API; services/writer/src/startup.rs: the metrics server).
pub(super) const LISTENERS: [(&str, &[&str]); 2] =
    [("ingest", &["INGEST_ADMIN_LISTEN", "INGEST_LISTEN"]), ("writer", &["WRITER_METRICS_ADDR"])];

/// Where the manifests' environment differs from compose's service for the program, and why
/// (the manifests' comments say the same); `*` is every program. Any other variable compose sets
/// is set here with compose's value (the default of its `${VAR:-default}`), or as its `_FILE`
/// twin (a secret file).
pub(super) const NOT_AS_COMPOSE: [(&str, &str, &str); 4] = [
    ("ingest", "INGEST_ID", "unset: the autoscaler runs several ingests and a Deployment cannot number its pods"),
    ("writer", "WRITER_CONSUMERS", "2 writers × 2 consumers fill the 4 partitions, where compose runs 1 × 3"),
    ("*", "PIPELINE_ALLOW_PLAINTEXT", "false: a cluster's pod network spans machines"),
    ("reconcile", "RUST_LOG", "unset: reconcile does not read it"),
];

/// One YAML document of a manifest, as JSON.
pub(super) struct Doc {
    file: String,
    v: Json,
}

impl Doc {
    fn kind(&self) -> &str {
        self.v["kind"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.v["metadata"]["name"].as_str().unwrap_or("")
    }
    fn at(&self) -> String {
        format!("{} {}/{}", self.file, self.kind(), self.name())
    }
}

pub(super) fn manifest_files() -> Vec<PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(DIR), &mut out);
    out.sort();
    assert!(!out.is_empty(), "no manifests in {DIR}");
    out
}

pub(super) fn relative(p: &std::path::Path) -> String {
    p.strip_prefix(root()).expect("under the repository").to_string_lossy().into_owned()
}

/// Every document of every manifest. Documents are split at `---` lines (what the files use);
/// kubernetes-validate parses them on its own, and its list of resources must equal this one.
pub(super) fn docs() -> Vec<Doc> {
    let mut out = Vec::new();
    for path in manifest_files() {
        let file = relative(&path);
        let text = read(&file);
        let mut chunk = String::new();
        let mut flush = |chunk: &mut String| {
            let content = chunk.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
            if content {
                let v: Json = serde_norway::from_str(chunk).unwrap_or_else(|e| panic!("{file}: {e}"));
                out.push(Doc { file: file.clone(), v });
            }
            chunk.clear();
        };
        for line in text.lines() {
            if line.trim_end() == "---" {
                flush(&mut chunk);
            } else {
                chunk.push_str(line);
                chunk.push('\n');
            }
        }
        flush(&mut chunk);
    }
    out
}

/// A workload's pod template (`metadata` and `spec`), for every kind that runs pods.
pub(super) fn pod_template(d: &Doc) -> Option<&Json> {
    match d.kind() {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => Some(&d.v["spec"]["template"]),
        "CronJob" => Some(&d.v["spec"]["jobTemplate"]["spec"]["template"]),
        "Pod" => Some(&d.v),
        _ => None,
    }
}

pub(super) fn long_running(d: &Doc) -> bool {
    !matches!(d.kind(), "Job" | "CronJob" | "Pod")
}

pub(super) fn list(v: &Json) -> &[Json] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

pub(super) fn containers(pod: &Json) -> impl Iterator<Item = &Json> {
    list(&pod["spec"]["initContainers"]).iter().chain(list(&pod["spec"]["containers"]))
}

/// The program a container runs: the image has no entrypoint, so `command[0]` is the binary.
pub(super) fn program(c: &Json) -> Option<&str> {
    c["command"][0].as_str()
}

pub(super) fn str_map(v: &Json) -> BTreeMap<String, String> {
    v.as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect()).unwrap_or_default()
}

pub(super) fn config_map(docs: &[Doc], name: &str) -> Option<BTreeMap<String, String>> {
    docs.iter().find(|d| d.kind() == "ConfigMap" && d.name() == name).map(|d| str_map(&d.v["data"]))
}

/// A container's environment as the kubelet would build it: `envFrom` ConfigMaps, then `env`.
/// The value is `None` where it comes from the pod itself (a field reference). Problems: a
/// ConfigMap that is not among the manifests, a variable set twice, a secret in the environment
/// (the programs read secrets from files only).
pub(super) fn container_env(
    docs: &[Doc],
    c: &Json,
    at: &str,
    problems: &mut Vec<String>,
) -> BTreeMap<String, Option<String>> {
    let mut env = BTreeMap::new();
    let mut set = |var: String, value: Option<String>, from: &str, problems: &mut Vec<String>| {
        if env.insert(var.clone(), value).is_some() {
            problems.push(format!("{at}: {var} is set twice (again by {from}): which one wins is easy to misread"));
        }
    };
    for from in list(&c["envFrom"]) {
        if let Some(name) = from["configMapRef"]["name"].as_str() {
            let prefix = from["prefix"].as_str().unwrap_or("");
            match config_map(docs, name) {
                Some(data) => {
                    for (k, v) in data {
                        set(format!("{prefix}{k}"), Some(v), &format!("ConfigMap {name}"), problems);
                    }
                }
                None => problems.push(format!("{at}: envFrom ConfigMap {name}, which no manifest defines")),
            }
        } else {
            problems.push(format!(
                "{at}: envFrom {from}: secrets reach the programs as files (*_FILE), nothing else is used"
            ));
        }
    }
    for e in list(&c["env"]) {
        let var = e["name"].as_str().unwrap_or_default().to_string();
        let from = &e["valueFrom"];
        let value = if let Some(v) = e.get("value") {
            Some(scalar(v))
        } else if let (Some(name), Some(key)) =
            (from["configMapKeyRef"]["name"].as_str(), from["configMapKeyRef"]["key"].as_str())
        {
            match config_map(docs, name).and_then(|m| m.get(key).cloned()) {
                Some(v) => Some(v),
                None => {
                    problems.push(format!("{at}: {var} from ConfigMap {name} key {key}, which no manifest defines"));
                    continue;
                }
            }
        } else if from.get("secretKeyRef").is_some() {
            problems.push(format!("{at}: {var} from a secret in the environment: mount it as a file (its _FILE twin)"));
            continue;
        } else {
            None
        };
        set(var, value, "env", problems);
    }
    env
}

/// (variable, default) of every flag of each program, from its `--help` (env.rs), once.
pub(super) fn help_env(bin: &str) -> Option<&'static BTreeMap<String, Option<String>>> {
    static ENV: OnceLock<BTreeMap<&'static str, BTreeMap<String, Option<String>>>> = OnceLock::new();
    ENV.get_or_init(|| PROGRAMS.iter().map(|(b, _)| (*b, program_env(b))).collect()).get(bin)
}

pub(super) fn source_dir(bin: &str) -> &'static str {
    SOURCES.iter().find(|(b, _)| *b == bin).map(|(_, d)| *d).unwrap_or_else(|| panic!("no source folder for {bin}"))
}

pub(super) fn reads_logging(bin: &str) -> bool {
    let telemetry = read("services/common/src/telemetry.rs");
    assert!(
        telemetry.contains("EnvFilter::try_from_default_env") && telemetry.contains("\"LOG_FORMAT\""),
        "init_tracing no longer reads RUST_LOG and LOG_FORMAT as LOGGING says: update LOGGING"
    );
    read(&format!("{}/main.rs", source_dir(bin))).contains("init_tracing()")
}

/// Every `.route("/path"` a program registers (actix-web), read from its code, and those of
/// `pipeline_common::telemetry::routes` (liveness and metrics) when the program configures them.
pub(super) fn routes(bin: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let dir = root().join(source_dir(bin));
    let mut uses_common = false;
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())).flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("source is UTF-8");
                uses_common |= text.contains("configure(telemetry::routes)");
                out.extend(routes_in(&text));
            }
        }
    }
    if uses_common {
        out.extend(routes_in(&read("services/common/src/telemetry.rs")));
    }
    out
}

fn routes_in(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(".route(\"")
        .skip(1)
        .filter_map(|piece| piece.split('"').next().filter(|p| p.starts_with('/')).map(String::from))
}

pub(super) fn points_at_itself(s: &str) -> bool {
    s.contains("127.0.0.1") || s.contains("localhost") || s.contains("[::1]")
}

pub(super) fn port_of(addr: &str) -> Option<i64> {
    addr.rsplit_once(':')?.1.parse().ok()
}

/// A probe's or a Service's port: a number, or the name of one of the container's ports.
pub(super) fn resolve_port(port: &Json, ports: &[Json]) -> Option<i64> {
    port.as_i64().or_else(|| {
        let name = port.as_str()?;
        ports.iter().find(|p| p["name"] == name).and_then(|p| p["containerPort"].as_i64())
    })
}

pub(super) fn selects(selector: &Json, labels: &Json) -> bool {
    let wanted = str_map(selector);
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels[k].as_str() == Some(v.as_str()))
}

/// Every container that runs one of the programs, with where it is.
pub(super) fn program_containers(docs: &[Doc]) -> Vec<(&Doc, &Json, &Json, &'static str)> {
    let mut out = Vec::new();
    for d in docs {
        let Some(pod) = pod_template(d) else { continue };
        for c in containers(pod) {
            if let Some(bin) = PROGRAMS.iter().map(|(b, _)| *b).find(|b| program(c) == Some(*b)) {
                out.push((d, pod, c, bin));
            }
        }
    }
    out
}
