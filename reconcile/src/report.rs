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
use pipeline_common::reconcile_report::{
    CheckReport, ClassSummary, Content, DeadLetterSummary, Level as ReportLevel, StoreCount, Verdict,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Ids,
    StoresOnly,
}

impl Level {
    fn name(self) -> &'static str {
        ReportLevel::from(self).name()
    }
}

impl From<Level> for ReportLevel {
    fn from(l: Level) -> ReportLevel {
        match l {
            Level::Ids => ReportLevel::Ids,
            Level::StoresOnly => ReportLevel::StoresOnly,
        }
    }
}

/// Store counts as the reports list them.
pub(crate) fn store_counts(counts: &Counts) -> Vec<StoreCount> {
    counts.iter().map(|(k, n)| StoreCount { store: k.name().to_string(), count: *n }).collect()
}

/// Prints one answer as a line of JSON (`--json`), the form its readers parse.
pub(crate) fn print_json(answer: &impl serde::Serialize) {
    match serde_json::to_string(answer) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("reconcile: cannot print the JSON answer: {e}"),
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

    /// The report as `--json` prints it ([`CheckReport`], the type its readers parse).
    pub(crate) fn to_report(&self) -> CheckReport {
        let classes = self
            .classes
            .iter()
            .map(|(k, c)| {
                let summary = ClassSummary {
                    total: c.total,
                    examples: c.examples().map(str::to_string).collect(),
                    failure: c.severity == crate::findings::Severity::Failure,
                    fields: c.fields.iter().map(|(f, n)| (f.to_string(), *n)).collect(),
                };
                (k.clone(), summary)
            })
            .collect();
        let clean = self.is_clean();
        CheckReport {
            check: self.level.into(),
            only_prefix: self.only_prefix.clone(),
            source: self.source.clone(),
            expected: self.expected,
            content: Some(Content { compared: true, checked_against_sent: self.sent_checked }),
            dead_letters: DeadLetterSummary {
                topic: self.dlq_topic.clone(),
                absent: self.dlq_absent,
                records: self.dlq_records,
                replayed: self.dlq_replayed,
            },
            classes,
            clean,
            ok: clean,
            verdict: Verdict::of(clean),
            message: self.message(),
            seconds: self.timings.iter().map(|(k, s)| (k.clone(), (s * 1000.0).round() / 1000.0)).collect(),
            drained: self.counts.as_ref().map(|_| true),
            stores: self.counts.as_ref().map(store_counts),
        }
    }

    pub(crate) fn print(&self, as_json: bool) {
        if as_json {
            print_json(&self.to_report());
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

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
