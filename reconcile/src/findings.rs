//! One class of findings ("missing from es", "dead-lettered (accepted)"...): a total and a few
//! examples.
//!
//! The examples are the smallest ids of the class, so two runs over the same data print the same
//! examples, without sorting millions of ids to get them: a bounded ordered map costs
//! O(log EXAMPLES) per id. Details ("in messages_03", "es: mapping error") are formatted only for
//! ids that make it into the examples, which keeps a class of two million ids cheap.

use std::collections::BTreeMap;

/// Examples kept per class.
pub(crate) const EXAMPLES: usize = 20;

/// Whether a non-zero class breaks the promise (exit 1) or only informs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Severity {
    Failure,
    Info,
}

#[derive(Debug, Clone)]
pub(crate) struct Class {
    pub severity: Severity,
    pub total: u64,
    /// id → the example as printed, the smallest ids only.
    examples: BTreeMap<Box<str>, String>,
    /// For content classes: how many ids differ in each field.
    pub fields: BTreeMap<&'static str, u64>,
}

impl Class {
    pub(crate) fn new(severity: Severity) -> Class {
        Class { severity, total: 0, examples: BTreeMap::new(), fields: BTreeMap::new() }
    }

    /// Counts `id` as differing in `fields`.
    pub(crate) fn add_fields(&mut self, id: &str, fields: &[&'static str], detail: impl FnOnce() -> String) {
        for f in fields {
            *self.fields.entry(f).or_default() += 1;
        }
        self.add_with(id, detail);
    }

    /// The ids of the examples, smallest first.
    pub(crate) fn example_ids(&self) -> impl Iterator<Item = &str> {
        self.examples.keys().map(|k| &**k)
    }

    /// Replaces the example of `id` (kept only if `id` is an example already).
    pub(crate) fn set_example(&mut self, id: &str, example: String) {
        if let Some(e) = self.examples.get_mut(id) {
            *e = example;
        }
    }

    /// Counts `id`; its example is the id itself.
    pub(crate) fn add(&mut self, id: &str) {
        self.add_with(id, || id.to_string());
    }

    /// Counts `id`; `detail` formats its example, and is called only if the id is kept.
    pub(crate) fn add_with(&mut self, id: &str, detail: impl FnOnce() -> String) {
        self.total += 1;
        let full = self.examples.len() >= EXAMPLES;
        if full && self.examples.last_key_value().is_some_and(|(max, _)| id >= &**max) {
            return;
        }
        if self.examples.contains_key(id) {
            return;
        }
        self.examples.insert(id.into(), detail());
        if self.examples.len() > EXAMPLES {
            self.examples.pop_last();
        }
    }

    /// Counts a finding with an example that is not an id (kept by the same rule).
    pub(crate) fn add_example(&mut self, key: &str, example: String) {
        self.add_with(key, || example);
    }

    pub(crate) fn examples(&self) -> impl Iterator<Item = &str> {
        self.examples.values().map(String::as_str)
    }

    pub(crate) fn fails(&self) -> bool {
        self.severity == Severity::Failure && self.total > 0
    }

    /// The total and the examples, as repair's and replay's reports print a class.
    pub(crate) fn to_examples(&self) -> pipeline_common::reconcile_report::Examples {
        pipeline_common::reconcile_report::Examples {
            total: self.total,
            examples: self.examples().map(str::to_string).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_smallest_ids_and_counts_all() {
        let mut c = Class::new(Severity::Failure);
        for i in (0..100).rev() {
            c.add_with(&format!("id-{i:03}"), || format!("id-{i:03} (detail)"));
        }
        assert_eq!(c.total, 100);
        let ex: Vec<&str> = c.examples().collect();
        assert_eq!(ex.len(), EXAMPLES);
        assert_eq!(ex[0], "id-000 (detail)");
        assert_eq!(ex[EXAMPLES - 1], "id-019 (detail)");
    }

    #[test]
    fn details_are_formatted_only_for_kept_ids() {
        let mut c = Class::new(Severity::Info);
        for i in 0..EXAMPLES {
            c.add(&format!("a{i:02}"));
        }
        c.add_with("zzz", || panic!("a larger id than every example is not formatted"));
        assert_eq!(c.total as usize, EXAMPLES + 1);
        assert!(!c.fails(), "info classes never fail");
    }
}
