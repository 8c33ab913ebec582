//! What a check found, as text or JSON: the level it was checked at, every class with its total
//! and examples, the dead-letter topic read, and the verdict.
//!
//! The level is always stated, because "OK" means something different at each: `ids` (the sets
//! were compared, and every store's content with MySQL's and, where the client logged digests,
//! with what it sent), `totals` (only counts were; an extra can hide a loss) and `stores-only`
//! (the stores agree with each other, ids and content; nothing was compared with what was
//! injected).

use crate::classify::Classes;
use crate::dlq::DeadLetters;
use crate::drain::Counts;
use crate::findings::Class;
use crate::idlog::LogCounts;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Ids,
    StoresOnly,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Ids => "ids",
            Level::StoresOnly => "stores-only",
        }
    }
}

pub(crate) struct Report {
    pub level: Level,
    /// Where the expected ids came from.
    pub source: String,
    /// Distinct expected ids per class (ids level).
    pub expected: Option<LogCounts>,
    pub classes: Classes,
    pub dlq_topic: String,
    pub dlq_absent: bool,
    pub dlq_records: u64,
    /// Dead letters `reconcile dlq replay` wrote back (not counted as dead letters).
    pub dlq_replayed: u64,
    /// Store counts at drain, when the caller has them.
    pub counts: Option<Counts>,
    /// Seconds per phase of the check (reading each store, the dead letters, classifying).
    pub timings: Vec<(String, f64)>,
    /// Ids whose stored content was compared with the digest the client logged of it.
    pub sent_checked: u64,
    /// `--only-prefix`: only ids starting with it were judged.
    pub only_prefix: Option<String>,
}

impl Report {
    pub(crate) fn new(
        level: Level,
        source: String,
        expected: Option<LogCounts>,
        classes: Classes,
        dead: &DeadLetters,
    ) -> Report {
        Report {
            level,
            source,
            expected,
            classes,
            dlq_topic: dead.topic.clone(),
            dlq_absent: dead.absent,
            dlq_records: dead.records,
            dlq_replayed: dead.replayed,
            counts: None,
            timings: Vec::new(),
            sent_checked: 0,
            only_prefix: None,
        }
    }

    pub(crate) fn is_clean(&self) -> bool {
        !self.classes.values().any(Class::fails)
    }

    fn message(&self) -> String {
        let failing: Vec<String> =
            self.classes.iter().filter(|(_, c)| c.fails()).map(|(k, c)| format!("{k} {}", c.total)).collect();
        match (self.level, failing.is_empty()) {
            (Level::Ids, true) => format!(
                "OK (checked at id level and content): every accepted id is in every store exactly once, in its \
                 place, with the same content in each{}, and nothing else{} is stored but uncertain ids",
                self.sent_note(),
                self.only_prefix.as_ref().map_or(String::new(), |p| format!(
                    " starting with `{p}` (the only ids judged; the others are counted above)"
                )),
            ),
            (Level::Ids, false) => format!("MISMATCH (checked at id level and content): {}", failing.join(", ")),
            (Level::StoresOnly, true) => "STORES AGREE on ids and content (stores-only: NOT checked against what was \
                                          injected; an id missing from every store is invisible)"
                .into(),
            (Level::StoresOnly, false) => {
                format!("STORES DISAGREE (stores-only: NOT checked against what was injected): {}", failing.join(", "))
            }
        }
    }

    /// How much of the content was checked against what the client sent.
    fn sent_note(&self) -> String {
        match (self.sent_checked, self.expected.map_or(0, |e| e.accepted + e.uncertain)) {
            (0, _) => " (the id log carries no digests: content compared between stores only)".into(),
            (n, all) if n >= all => " and as sent".into(),
            (n, all) => format!(" and as sent for the {n} of {all} ids with a digest"),
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let classes: serde_json::Map<String, Value> = self
            .classes
            .iter()
            .map(|(k, c)| {
                let ex: Vec<&str> = c.examples().collect();
                let mut v = json!({ "total": c.total, "examples": ex, "failure": c.severity == crate::findings::Severity::Failure });
                if !c.fields.is_empty() {
                    v["fields"] = json!(c.fields);
                }
                (k.clone(), v)
            })
            .collect();
        let clean = self.is_clean();
        let mut v = json!({
            "check": self.level.name(),
            "only_prefix": self.only_prefix,
            "source": self.source,
            "expected": self.expected,
            "content": { "compared": true, "checked_against_sent": self.sent_checked },
            "dead_letters": { "topic": self.dlq_topic, "absent": self.dlq_absent, "records": self.dlq_records, "replayed": self.dlq_replayed },
            "classes": classes,
            "clean": clean,
            "ok": clean,
            "verdict": if clean { "ok" } else { "mismatch" },
            "message": self.message(),
            "seconds": self.timings.iter().map(|(k, s)| (k.clone(), json!((s * 1000.0).round() / 1000.0))).collect::<serde_json::Map<_, _>>(),
        });
        if let (Some(counts), Some(map)) = (&self.counts, v.as_object_mut()) {
            let stores: Vec<Value> = counts.iter().map(|(k, n)| json!({ "store": k, "count": n })).collect();
            map.insert("drained".into(), json!(true));
            map.insert("stores".into(), json!(stores));
        }
        v
    }

    pub(crate) fn print(&self, as_json: bool) {
        if as_json {
            println!("{}", self.to_json());
            return;
        }
        println!("check: {} · {}", self.level.name(), self.source);
        if let Some(e) = &self.expected {
            println!("expected ids: {} accepted, {} uncertain, {} refused", e.accepted, e.uncertain, e.refused);
        }
        if let Some(counts) = &self.counts {
            let c: Vec<String> = counts.iter().map(|(k, n)| format!("{k}={n}")).collect();
            println!("store counts: {}", c.join(" "));
        }
        if self.dlq_absent {
            println!("dead-letter topic {}: absent (no dead letters)", self.dlq_topic);
        } else {
            println!(
                "dead-letter topic {}: {} records read, {} more replayed",
                self.dlq_topic, self.dlq_records, self.dlq_replayed
            );
        }
        if !self.timings.is_empty() {
            let t: Vec<String> = self.timings.iter().map(|(k, s)| format!("{k} {s:.1} s")).collect();
            println!("time: {}", t.join(", "));
        }
        for (name, c) in self.classes.iter().filter(|(_, c)| c.total > 0) {
            let tag = if c.fails() { "" } else { " (information)" };
            let fields: Vec<String> = c.fields.iter().map(|(f, n)| format!("{f} {n}")).collect();
            let fields = if fields.is_empty() { String::new() } else { format!(" (fields: {})", fields.join(", ")) };
            println!("{name}: {}{tag}{fields}", c.total);
            for ex in c.examples() {
                println!("  {ex}");
            }
        }
        println!("{}", self.message());
    }
}
