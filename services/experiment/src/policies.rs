//! The write policies a plan can name without defining them: the reference's A/B/C (with its
//! shared pool, or one pool per store), its proposed remedies for C, and the writer's defaults.

use serde::{Deserialize, Serialize};

/// The reference's shared pool: core 12, max 24, queue 1,000, CallerRunsPolicy.
pub(crate) const SEED_POOL: &str = "12/24/1000/caller-runs";

/// A write policy: a name and the writer flags that make it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyDef {
    pub writer_args: Vec<String>,
    #[serde(default)]
    pub about: String,
}

/// The built-in policies: the reference's A/B/C with its shared pool, the same with per-store pools,
/// and `default` (the writer's own defaults, which `scripts/run` uses with its WRITER_ARGS).
pub(crate) fn builtin(name: &str) -> Option<PolicyDef> {
    if let Some(def) = remedy(name) {
        return Some(def);
    }
    let (sync, about) = match name.trim_end_matches("-per-store") {
        "A" => ("es", "A: Elasticsearch on the consumer, the rest through the pool"),
        "B" => ("none", "B: all four through the pool"),
        "C" => ("mysql", "C: MySQL on the consumer, the rest through the pool"),
        "default" if name == "default" => {
            return Some(PolicyDef {
                writer_args: Vec::new(),
                about: "the writer's defaults (plus writer_args)".into(),
            })
        }
        _ => return None,
    };
    let args: Vec<String> = if name.ends_with("-per-store") {
        vec!["--sync-stores".into(), sync.into(), "--pool".into(), "per-store".into()]
    } else {
        vec![
            "--sync-stores".into(),
            sync.into(),
            "--pool".into(),
            "shared".into(),
            "--pool-shared".into(),
            SEED_POOL.into(),
        ]
    };
    let pool = if name.ends_with("-per-store") { "per-store pools" } else { "the reference's shared pool" };
    Some(PolicyDef { writer_args: args, about: format!("{about}; {pool}") })
}

/// The reference's remedies for C's pool, as policies: a fixed limit of writes in flight per
/// store (a semaphore per backend), an adaptive one, and more consumers.
fn remedy(name: &str) -> Option<PolicyDef> {
    let per_store = |shape: &str| {
        let mut a: Vec<String> = vec!["--sync-stores".into(), "mysql".into(), "--pool".into(), "per-store".into()];
        for k in pipeline_stores::StoreKind::ALL {
            a.extend([format!("--pool-{k}"), shape.to_string()]);
        }
        a
    };
    let (writer_args, about) = match name {
        "C-fixed" => {
            (per_store("16/16/1000/block"), "C, and at most 16 writes in flight per store (a semaphore per backend)")
        }
        "C-adaptive" => {
            let mut a = per_store("4/64/1000/block");
            a.push("--pool-adaptive".into());
            (a, "C, and per store an adaptive limit of writes in flight (4 at first, 1..64, AIMD on round trips)")
        }
        "C-6" => {
            let mut a = builtin("C")?.writer_args;
            a.extend(["--consumers".into(), "6".into()]);
            (a, "C with the reference's shared pool and 6 consumers instead of 3")
        }
        _ => return None,
    };
    Some(PolicyDef { writer_args, about: about.into() })
}

pub(crate) const BUILTIN_NAMES: &str = "A, B, C (the reference's shared pool), A-per-store, B-per-store, C-per-store, \
                                 C-fixed, C-adaptive, C-6 (its remedies), default";
