//! What a check found, as text or JSON: the level it was checked at, every class with its total
//! and examples, the dead-letter topic read, and the verdict.
//!
//! The level is always stated, because "OK" means something different at each: `ids` (the sets
//! were compared), `totals` (only counts were; an extra can hide a loss) and `stores-only` (the
//! stores agree with each other; nothing was compared with what was injected).

use crate::class::Class;
use crate::classify::Classes;
use crate::dlq::DeadLetters;
use crate::drain::Counts;
use crate::idlog::LogCounts;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
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

pub struct Report {
    pub level: Level,
    /// Where the expected ids came from.
    pub source: String,
    /// Distinct expected ids per class (ids level).
    pub expected: Option<LogCounts>,
    pub classes: Classes,
    pub dlq_topic: String,
    pub dlq_absent: bool,
    pub dlq_records: u64,
    /// Store counts at drain, when the caller has them.
    pub counts: Option<Counts>,
    /// Seconds per phase of the check (reading each store, the dead letters, classifying).
    pub timings: Vec<(String, f64)>,
}

impl Report {
    pub fn new(
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
            counts: None,
            timings: Vec::new(),
        }
    }

    pub fn is_clean(&self) -> bool {
        !self.classes.values().any(Class::fails)
    }

    fn message(&self) -> String {
        let failing: Vec<String> =
            self.classes.iter().filter(|(_, c)| c.fails()).map(|(k, c)| format!("{k} {}", c.total)).collect();
        match (self.level, failing.is_empty()) {
            (Level::Ids, true) => "OK (checked at id level): every accepted id is in every store exactly once, in its \
                                   place, and nothing else is stored but uncertain ids"
                .into(),
            (Level::Ids, false) => format!("MISMATCH (checked at id level): {}", failing.join(", ")),
            (Level::StoresOnly, true) => "STORES AGREE (stores-only: NOT checked against what was injected; an id \
                                          missing from every store is invisible)"
                .into(),
            (Level::StoresOnly, false) => {
                format!("STORES DISAGREE (stores-only: NOT checked against what was injected): {}", failing.join(", "))
            }
        }
    }

    pub fn to_json(&self) -> Value {
        let classes: serde_json::Map<String, Value> = self
            .classes
            .iter()
            .map(|(k, c)| {
                let ex: Vec<&str> = c.examples().collect();
                (k.clone(), json!({ "total": c.total, "examples": ex, "failure": c.severity == crate::class::Severity::Failure }))
            })
            .collect();
        let clean = self.is_clean();
        let mut v = json!({
            "check": self.level.name(),
            "source": self.source,
            "expected": self.expected,
            "dead_letters": { "topic": self.dlq_topic, "absent": self.dlq_absent, "records": self.dlq_records },
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

    pub fn print(&self, as_json: bool) {
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
            println!("dead-letter topic {}: {} records read", self.dlq_topic, self.dlq_records);
        }
        if !self.timings.is_empty() {
            let t: Vec<String> = self.timings.iter().map(|(k, s)| format!("{k} {s:.1} s")).collect();
            println!("time: {}", t.join(", "));
        }
        for (name, c) in self.classes.iter().filter(|(_, c)| c.total > 0) {
            let tag = if c.fails() { "" } else { " (information)" };
            println!("{name}: {}{tag}", c.total);
            for ex in c.examples() {
                println!("  {ex}");
            }
        }
        println!("{}", self.message());
    }
}
