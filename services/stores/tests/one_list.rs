//! The list of stores exists once: the `registry!` call in `src/registry.rs`. This test reads
//! every file of the repository a store name may appear in (code, tests, scripts, compose/check,
//! docs, README) and fails where a list of stores is written by hand instead of being read from
//! `StoreKind::ALL` (Rust) or `writer --list-stores` (scripts):
//!
//! - in code and scripts, a line that names three or more stores (comments aside: a why-comment
//!   may compare stores; the integration tests of `services/` and `reconcile/` aside: they
//!   exercise particular stores on purpose);
//! - in Markdown, a table with a row or a column per store that lacks one of them (such a table
//!   may exist, one row per store, but it must be complete: a fifth store fails here until its
//!   row is written).
//!
//! Deployment files (the servers themselves: `scripts/stack`, compose's services and their init
//! files, `.env.example`) are exempt: a new store brings its server there, which is the "plus
//! deployment files" of docs/explanation/architecture.md's steps.

use pipeline_stores::StoreKind;
use std::path::{Path, PathBuf};

/// Files that start or configure the servers: a new store adds its server to them by hand.
const DEPLOYMENT: &[&str] = &[
    "scripts/stack",
    "scripts/opensearch/",
    "scripts/prometheus/",
    "scripts/requirements.txt",
    "scripts/compose-secrets",
    // Parses the compose file with each store's profile (compose/check's stores test holds the
    // list to the registry's).
    "compose/smoke",
    "compose/docker-compose.yml",
    "compose/Dockerfile",
    "compose/mysql/",
    "compose/mongo/",
    "compose/prometheus/",
    "compose/grafana/",
    ".env.example",
    // The one list itself.
    "services/stores/src/registry.rs",
    // This test names stores to test its own detector.
    "services/stores/tests/one_list.rs",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The stores a piece of text names, by their flag name or their label, as whole words.
fn named(text: &str) -> Vec<StoreKind> {
    let words: Vec<String> =
        text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    StoreKind::ALL
        .into_iter()
        .filter(|k| words.iter().any(|w| w == k.name() || *w == k.label().to_lowercase()))
        .collect()
}

/// The store a table cell is, when the cell is nothing but a store's name or label.
fn cell_store(cell: &str) -> Option<StoreKind> {
    let c = cell.trim().trim_matches(|c| c == '*' || c == '`' || c == ' ').to_lowercase();
    StoreKind::ALL.into_iter().find(|k| c == k.name() || c == k.label().to_lowercase())
}

/// Problems in one code or script file: lines naming three stores or more.
fn code_problems(path: &str, text: &str) -> Vec<String> {
    let comment = |l: &str| ["//", "#", "/*", "*", "--"].iter().any(|c| l.trim_start().starts_with(c));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !comment(l) && named(l).len() >= 3)
        .map(|(i, l)| format!("{path}:{}: a hand-written list of stores: {}", i + 1, l.trim()))
        .collect()
}

/// Problems in one Markdown file: per-store tables that lack a store.
fn table_problems(path: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with('|') {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].trim_start().starts_with('|') {
            i += 1;
        }
        let rows: Vec<Vec<&str>> =
            lines[start..i].iter().map(|l| l.trim().trim_matches('|').split('|').collect()).collect();
        let header: Vec<StoreKind> = rows[0].iter().filter_map(|c| cell_store(c)).collect();
        let firsts: Vec<StoreKind> =
            rows.iter().skip(2).filter_map(|r| r.first().and_then(|c| cell_store(c))).collect();
        for (what, found) in [("column", header), ("row", firsts)] {
            if found.len() >= 2 {
                let lacking: Vec<&str> =
                    StoreKind::ALL.into_iter().filter(|k| !found.contains(k)).map(|k| k.label()).collect();
                if !lacking.is_empty() {
                    out.push(format!("{path}:{}: a table with a {what} per store lacks {lacking:?}", start + 1));
                }
            }
        }
    }
    out
}

/// The files to read: every file git knows, but deployment files, binaries and data.
fn files() -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .expect("git ls-files (the test reads the checkout)");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|f| !f.is_empty())
        .filter(|f| !DEPLOYMENT.iter().any(|d| f.starts_with(d)))
        .filter(|f| !(f.contains("/tests/") && (f.starts_with("services/") || f.starts_with("reconcile/"))))
        .filter(|f| {
            !f.ends_with(".png") && !f.ends_with(".lock") && !f.ends_with(".json") && !f.starts_with("migrations/")
        })
        .map(String::from)
        .collect()
}

#[test]
fn no_list_of_stores_is_written_by_hand() {
    let mut problems = Vec::new();
    let mut read = 0;
    for f in files() {
        let Ok(text) = std::fs::read_to_string(root().join(&f)) else { continue };
        read += 1;
        problems.extend(if f.ends_with(".md") { table_problems(&f, &text) } else { code_problems(&f, &text) });
    }
    assert!(read > 50, "read only {read} files: is this a git checkout?");
    assert!(
        problems.is_empty(),
        "the list of stores is the registry's (services/stores/src/registry.rs): read StoreKind::ALL, \
         `writer --list-stores` or PIPELINE_STORES instead, or complete the table:\n{}",
        problems.join("\n")
    );
}

/// The detector itself: it must see a hand-written list and an incomplete table, and pass a
/// line or table that is fine.
#[test]
fn the_detector_sees_a_hand_written_list_and_an_incomplete_table() {
    let [a, b, c, ..] = StoreKind::ALL;
    let list = format!("for s in {} {} {}; do", a.name(), b.name(), c.name());
    assert_eq!(code_problems("x", &list).len(), 1, "{list}");
    assert!(code_problems("x", &format!("write {} and {}", a.name(), b.label())).is_empty());
    let incomplete = format!("| store | what |\n|---|---|\n| {} | x |\n| {} | y |\n", a.label(), b.label());
    assert_eq!(table_problems("x", &incomplete).len(), 1);
    let rows: String = StoreKind::ALL.iter().map(|k| format!("| {} | x |\n", k.label())).collect();
    assert!(table_problems("x", &format!("| store | what |\n|---|---|\n{rows}")).is_empty());
    let cols: Vec<&str> = StoreKind::ALL.iter().take(2).map(|k| k.name()).collect();
    assert_eq!(table_problems("x", &format!("| run | {} |\n|---|---|---|\n", cols.join(" | "))).len(), 1);
}
