//! `--stores` under compose: MySQL's server always runs; each optional store of the registry is a
//! compose profile named as the store is in `STORES`, holding its server (and its exporter), which
//! the writer and reconcile wait for when the profile is enabled and do without when it is not.
//! The programs' `STORES` default, the registry's full list, is env.rs's to check.

use crate::{compose, read, services, store_profiles};
use pipeline_stores::REQUIRED;
use serde_json::json;

#[test]
fn every_optional_store_is_a_profile_the_pipeline_waits_for_when_enabled() {
    let c = compose();
    let all = services(&c);
    let mut problems = Vec::new();
    for p in store_profiles() {
        let servers: Vec<&String> = all
            .iter()
            .filter(|(name, s)| s["profiles"] == json!([p]) && !name.ends_with("-exporter"))
            .map(|(name, _)| name)
            .collect();
        let [server] = servers[..] else {
            problems.push(format!("profile {p}: servers {servers:?}, want the store's one"));
            continue;
        };
        for user in ["writer", "reconcile"] {
            let dep = &all[user]["depends_on"][server.as_str()];
            if dep["condition"] != "service_healthy" || dep["required"] != false {
                problems.push(format!("{user} must wait for {server} when profile {p} is on, only then: {dep}"));
            }
        }
    }
    // The system of record has no profile, and nothing of the pipeline starts without it.
    let mysql = REQUIRED.name();
    if all.get(mysql).is_none_or(|s| s.get("profiles").is_some()) {
        problems.push(format!("{mysql}: its server must be a service outside every profile"));
    }
    for user in ["writer", "reconcile"] {
        let dep = &all[user]["depends_on"][mysql];
        if dep["condition"] != "service_healthy" || dep.get("required").is_some() {
            problems.push(format!("{user} must always wait for {mysql}: {dep}"));
        }
    }
    // compose/.env, made by scripts/compose-secrets, enables every store by default.
    let script = read("scripts/compose-secrets");
    let line = script.lines().find(|l| l.contains("printf 'COMPOSE_PROFILES=")).unwrap_or_default();
    let enabled: Vec<&str> =
        line.split('=').nth(1).and_then(|v| v.split('\\').next()).unwrap_or("").split(',').collect();
    if enabled != store_profiles() {
        problems.push(format!("scripts/compose-secrets enables {enabled:?} by default, want {:?}", store_profiles()));
    }
    // compose/smoke parses the file with every store's profile (as v1 runs it).
    let smoke = read("compose/smoke");
    let line = smoke.lines().find(|l| l.starts_with("stores=\"")).unwrap_or_default();
    let named: Vec<&str> = line.split(' ').filter(|w| !w.starts_with("stores=") && !w.starts_with("--")).collect();
    let named: Vec<&str> = named.iter().map(|w| w.trim_end_matches('"')).collect();
    if named != store_profiles() {
        problems.push(format!("compose/smoke parses with the profiles {named:?}, want {:?}", store_profiles()));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
