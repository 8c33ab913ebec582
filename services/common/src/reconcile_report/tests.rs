//! Every answer as reconcile printed it with `json!` before these types existed: each parses as
//! its own kind and prints back byte for byte, so the file format did not change.

use super::*;

const CHECK: &str = r#"{"check":"ids","only_prefix":null,"source":"k6 id log x.ids","expected":{"accepted":5,"uncertain":2,"refused":1},"content":{"compared":true,"checked_against_sent":7},"dead_letters":{"topic":"t.dlq","absent":false,"records":1,"replayed":0},"classes":{"dead-lettered (accepted)":{"total":0,"examples":[],"failure":true},"mismatched (redis)":{"total":2,"examples":["a-1 (body)","a-2"],"failure":true,"fields":{"body":1,"unreadable":1}},"missing from es":{"total":1,"examples":["a-4"],"failure":true}},"clean":false,"ok":false,"verdict":"mismatch","message":"MISMATCH (checked at id level and content): missing from es 1","seconds":{"read mysql":0.25,"classify":0.001},"drained":true,"stores":[{"store":"mysql","count":8},{"store":"es","count":7}]}"#;
const STORES_ONLY: &str = r#"{"check":"stores-only","only_prefix":null,"source":"no expected set (--stores-only)","expected":null,"content":{"compared":true,"checked_against_sent":0},"dead_letters":{"topic":"t.dlq","absent":true,"records":0,"replayed":0},"classes":{},"clean":true,"ok":true,"verdict":"ok","message":"STORES AGREE","seconds":{}}"#;
const TOTALS: &str = r#"{"check":"totals","source":"--expect 100","drained":true,"expected":{"accepted":100,"uncertain":0},"ok":false,"verdict":"mismatch","message":"MISMATCH (totals only: ids not checked)","stores":[{"store":"mysql","count":101,"expected":100,"difference":1},{"store":"es","count":99,"expected":100,"difference":-1}]}"#;
const TOTALS_NONE: &str = r#"{"check":"totals","source":"no expectation","drained":true,"expected":null,"ok":true,"verdict":"ok","message":"STORES AGREE on totals","stores":[{"store":"mysql","count":3,"expected":null,"difference":null}]}"#;
const RESET: &str = r#"{"ok":true,"first":[{"store":"mysql","count":0,"expected":0,"difference":0}],"second":[{"store":"mysql","count":0,"expected":0,"difference":0}]}"#;
const REPAIR: &str = r#"{"repair":true,"dry_run":true,"reference":"mysql","reference_ids":20,"stores":[{"store":"redis","missing":{"total":0,"examples":[]},"mismatched":{"total":2,"examples":["a","b"]},"newer_than_reference":{"total":0,"examples":[]},"extra":{"total":1,"examples":["x"]},"repaired":0,"deleted":0,"refused":{"total":0,"examples":[]},"still_different":{"total":0,"examples":[]}}],"ok":false,"message":"DRY RUN: 2 messages would be written; nothing was changed"}"#;
const TOPIC_REPLAY: &str = r#"{"replay":"topic","topic":"t","range":"from earliest","dry_run":true,"partitions":[{"partition":0,"low":0,"high":10,"start":0,"end":10,"gone":null,"records":10,"messages":12,"undecodable":0},{"partition":1,"low":5,"high":9,"start":5,"end":9,"gone":{"from":0,"to":5},"records":4,"messages":4,"undecodable":1}],"records":14,"messages":16,"undecodable":{"total":1,"examples":["1:6"]},"stores":[{"store":"mysql","to_write":{"0":4,"1":5,"10":1},"to_write_total":10,"written":0,"held":6,"refused":{"total":0,"examples":[]},"unversioned_other_content":{"total":0,"examples":[]},"verify":null},{"store":"es","to_write":{},"to_write_total":0,"written":0,"held":16,"refused":{"total":0,"examples":[]},"unversioned_other_content":{"total":0,"examples":[]},"verify":{"checked":16,"missing":{"total":0,"examples":[]},"older":{"total":0,"examples":[]},"different":{"total":0,"examples":[]}}}],"ok":false,"message":"DRY RUN: 10 messages would be written; nothing was changed"}"#;
const DLQ_REPLAY: &str = r#"{"replay":true,"topic":"t.dlq","group":"t.dlq.replay","dry_run":false,"written":{"mysql":20},"refused_again":{"es":{"total":1,"examples":["a (es: mapping)"]}},"not_replayable":{"total":0,"examples":[]},"ok":false,"message":"REPLAYED 20; 1 REFUSED AGAIN"}"#;
const DLQ_LIST: &str = r#"{"topic":"t.dlq","exists":true,"records":1,"shown":[{"at":"0:0","time":"2026-12-07T10:00:00Z","store":"mysql","id":"a","error":"mysql: too long","replayable":true,"replayed":false},{"at":"0:1","time":"-","store":"decode","id":null,"error":"not a message","replayable":false,"replayed":false}],"counts":[{"store":"mysql","error":"mysql: too long","pending":1,"replayed":0}],"replay_group":"t.dlq.replay"}"#;
const IDS: &str = r#"{"source":"k6 id log x.ids","ids":{"accepted":3,"uncertain":1,"refused":0},"written":["x.accepted.ids","x.uncertain.ids","x.refused.ids"]}"#;
const NOT_DRAINED: &str = r#"{"drained":false,"lagging":[{"partition":3,"committed":120,"high":200}],"counts":[{"store":"mysql","count":5}]}"#;
const ERROR: &str = r#"{"error":"bad_input","detail":"diff needs the expected ids"}"#;

fn round_trip(text: &str) -> Answer {
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
