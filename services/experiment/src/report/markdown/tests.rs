use super::*;
use crate::plan::{Plan, Slot};

fn view(policy: &str, rep: u32, accepted: f64, stored: f64) -> RoundView {
    RoundView {
        name: format!("{rep:02}-{policy}"),
        slot: Slot { index: rep, rep, point: 250, policy: policy.into(), fault: None, condition: None },
        conditions: Vec::new(),
        stats: RoundStats { throughput: Some(accepted), writer_rate: Some(stored), ..RoundStats::default() },
        gates: Vec::new(),
        valid: true,
    }
}

/// Under the reference's shape Kafka lets the ingest accept faster than the writer stores: the
/// policy whose writer keeps up wins, not the one whose ingest answers fastest.
#[test]
fn policies_are_ranked_by_what_reaches_every_store() {
    let plan = Plan { policies: vec!["A".into(), "B".into()], rounds: 2, ..Plan::default() };
    let ev = Evidence { dir: "x".into(), plan, env: None, warmed: None, warm_round: None, rounds: Vec::new() };
    let views = vec![
        view("A", 1, 1000.0, 400.0),
        view("B", 1, 800.0, 790.0),
        view("A", 2, 1010.0, 420.0),
        view("B", 2, 820.0, 800.0),
    ];
    let mut md = String::new();
    comparisons(&mut md, &ev, &views);
    assert!(md.contains("**B over A** (load 250): +93.9 % in median end-to-end rate (795 vs 410 messages/s)"), "{md}");
    assert!(md.contains("do not overlap"), "{md}");
    let mut md = String::new();
    per_policy(&mut md, &ev, &views);
    let row = |p: &str| md.lines().find(|l| l.starts_with(&format!("| {p} |"))).unwrap_or_default().to_string();
    assert!(row("B").contains("| 795 (790–800) | 1.00 |"), "{md}");
    assert!(row("A").contains("| 410 (400–420) | 0.52 |"), "{md}");
}

#[test]
fn end_to_end_is_the_lower_rate() {
    let s = |a, w| RoundStats { throughput: a, writer_rate: w, ..RoundStats::default() };
    assert_eq!(s(Some(1000.0), Some(400.0)).end_to_end(), Some(400.0));
    assert_eq!(s(Some(300.0), Some(310.0)).end_to_end(), Some(300.0), "a backlog from the warm-up drained");
    assert_eq!(s(None, Some(310.0)).end_to_end(), Some(310.0));
    assert_eq!(s(Some(300.0), None).end_to_end(), Some(300.0));
    assert_eq!(s(None, None).end_to_end(), None);
}
