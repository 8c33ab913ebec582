//! Every answer as reconcile printed it with `json!` before these types existed: each parses as
//! its own kind and prints back byte for byte, so the file format did not change. The answers are
//! files of their own (examples/): JSON, which the one-list-of-stores check does not read.

use super::*;

const CHECK: &str = include_str!("examples/check.json");
const STORES_ONLY: &str = include_str!("examples/stores_only.json");
const TOTALS: &str = include_str!("examples/totals.json");
const TOTALS_NONE: &str = include_str!("examples/totals_none.json");
const RESET: &str = include_str!("examples/reset.json");
const REPAIR: &str = include_str!("examples/repair.json");
const TOPIC_REPLAY: &str = include_str!("examples/topic_replay.json");
const DLQ_REPLAY: &str = include_str!("examples/dlq_replay.json");
const DLQ_LIST: &str = include_str!("examples/dlq_list.json");
const IDS: &str = include_str!("examples/ids.json");
const NOT_DRAINED: &str = include_str!("examples/not_drained.json");
const ERROR: &str = include_str!("examples/error.json");

fn round_trip(text: &str) -> Answer {
    // The files end with a newline; reconcile prints the document and then one.
    let text = text.trim_end();
    let a = Answer::parse(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(a.to_string(), text, "prints back as it was read");
    a
}

#[test]
fn every_answer_parses_as_its_kind_and_prints_back_unchanged() {
    assert!(matches!(round_trip(CHECK), Answer::Check(_)));
    assert!(matches!(round_trip(STORES_ONLY), Answer::Check(r) if r.check == Level::StoresOnly));
    assert!(matches!(round_trip(TOTALS), Answer::Totals(_)));
    assert!(matches!(round_trip(TOTALS_NONE), Answer::Totals(_)));
    assert!(matches!(round_trip(RESET), Answer::Reset(_)));
    assert!(matches!(round_trip(REPAIR), Answer::Repair(_)));
    assert!(matches!(round_trip(TOPIC_REPLAY), Answer::TopicReplay(_)));
    assert!(matches!(round_trip(DLQ_REPLAY), Answer::DlqReplay(_)));
    assert!(matches!(round_trip(DLQ_LIST), Answer::DlqList(_)));
    assert!(matches!(round_trip(IDS), Answer::Ids(_)));
    assert!(matches!(round_trip(NOT_DRAINED), Answer::NotDrained(_)));
    assert!(matches!(round_trip(ERROR), Answer::Error(_)));
}

#[test]
fn readers_find_classes_stores_and_partitions_by_name() {
    let a = round_trip(CHECK);
    let r = a.check().unwrap_or_else(|| panic!("a check: {a}"));
    assert_eq!(r.total(&names::missing("es")), 1);
    assert_eq!(r.total(&names::missing("mongo")), 0, "a class the report lacks counts 0");
    assert_eq!(
        r.failing().map(|(k, c)| (k, c.total)).collect::<Vec<_>>(),
        [("mismatched (redis)", 2), ("missing from es", 1)]
    );
    assert_eq!((r.count_of("es"), r.count_of("redis")), (Some(7), None), "a store not checked is absent");
    assert_eq!(r.seconds[0], ("read mysql".to_string(), 0.25), "phases in the order they ran");

    let a = round_trip(TOPIC_REPLAY);
    let r = a.topic_replay().unwrap_or_else(|| panic!("a topic replay: {a}"));
    assert_eq!(r.store("mysql").map(|s| s.to_write.get(&10)), Some(Some(&1)));

    let a = round_trip(NOT_DRAINED);
    let lag: Vec<String> = a.not_drained().into_iter().flat_map(|n| &n.lagging).map(ToString::to_string).collect();
    assert_eq!(lag, ["p3 120/200"]);
}

#[test]
fn the_last_answer_of_an_appended_file_is_read_and_garbage_is_none() {
    let text = format!("{ERROR}\nnot json\n{TOTALS}\n{{\"cut");
    assert!(matches!(Answer::last_in(&text), Ok(Answer::Totals(_))));
    assert!(Answer::last_in("{\"unknown\": 1}\n").is_err());
    assert!(Answer::parse("{\"check\": \"sideways\"}").is_err(), "an unknown level is no answer");
}
