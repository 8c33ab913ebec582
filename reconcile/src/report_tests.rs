//! The report as reconcile builds it is the type its readers parse: it prints, parses back as
//! the same kind of answer and prints again unchanged.

use super::*;
use crate::classify::{self, Classes};
use crate::findings::Severity;
use pipeline_common::reconcile_report::{names, Answer};
use pipeline_stores::StoreKind;

fn round_trip(printed: &str) -> Answer {
    let answer = Answer::parse(printed).unwrap_or_else(|e| panic!("{e}: {printed}"));
    assert_eq!(answer.to_string(), printed, "parsed and printed again, the same JSON");
    answer
}

fn classes() -> Classes {
    let mut c = Classes::new();
    let mut missing = Class::new(Severity::Failure);
    missing.add("a-4");
    c.insert(classify::missing(StoreKind::Es), missing);
    let mut changed = Class::new(Severity::Failure);
    changed.add_fields("a-1", &["body", "version"], || "a-1 (body: ...)".into());
    c.insert(classify::mismatched(StoreKind::Redis), changed);
    let mut stored = Class::new(Severity::Info);
    stored.add("u-1");
    c.insert(classify::UNCERTAIN_STORED.into(), stored);
    c
}

#[test]
fn a_check_report_parses_as_the_readers_type_and_prints_back_the_same() {
    let dead = DeadLetters { topic: "t.dlq".into(), records: 2, replayed: 1, ..DeadLetters::default() };
    let expected = LogCounts { accepted: 5, uncertain: 1, refused: 0 };
    let mut report = Report::new(Level::Ids, "k6 id log x.ids".into(), Some(expected), classes(), &dead);
    report.counts = Some(vec![(StoreKind::Mysql, 6), (StoreKind::Es, 5)]);
    report.timings = vec![("read mysql".into(), 0.123_456), ("classify".into(), 2.0)];
    report.sent_checked = 6;
    report.only_prefix = Some("run-".into());
    let printed = serde_json::to_string(&report.to_report()).unwrap_or_else(|e| panic!("{e}"));
    let answer = round_trip(&printed);
    let back = answer.check().unwrap_or_else(|| panic!("a check report: {printed}"));
    assert_eq!(back, &report.to_report());
    assert_eq!(back.total(&names::missing("es")), 1);
    assert_eq!(back.class(&names::mismatched("redis")).map(|c| c.fields.len()), Some(2));
    assert_eq!(back.failing().count(), 2, "the information class does not fail");
    assert_eq!((back.count_of("es"), back.count_of("mongo")), (Some(5), None));
    assert_eq!(back.seconds[0], ("read mysql".to_string(), 0.123), "rounded to ms, in the order run");
    assert!(!back.ok && back.verdict == pipeline_common::reconcile_report::Verdict::Mismatch);

    let stores_only = Report::new(Level::StoresOnly, "no expected set".into(), None, Classes::new(), &dead);
    let printed = serde_json::to_string(&stores_only.to_report()).unwrap_or_else(|e| panic!("{e}"));
    let answer = round_trip(&printed);
    assert_eq!(answer.level(), Some(ReportLevel::StoresOnly));
    assert!(answer.check().is_some_and(|r| r.stores.is_none() && r.ok), "{printed}");
}
