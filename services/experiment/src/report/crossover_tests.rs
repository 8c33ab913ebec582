use super::charts::crossover::draw;
use super::crossover::build;
use super::markdown::crossover::render;
use super::view::RoundView;
use crate::evidence::Evidence;
use crate::plan::{Plan, Slot};
use crate::stats::PoolStats;
use crate::stats::RoundStats;

/// A round of `policy` under condition `n` (1..): its end-to-end rate and caller-runs in a 60 s phase.
fn round(policy: &str, n: u32, rep: u32, rate: f64, caller_runs: f64, valid: bool) -> RoundView {
    let pool =
        PoolStats { caller_runs, peak_queue: if caller_runs > 0.0 { 1000.0 } else { 40.0 }, ..PoolStats::default() };
    RoundView {
        name: format!("{rep:02}-{policy}@d{n}"),
        slot: Slot { index: rep, rep, point: 250, policy: format!("{policy}@d{n}"), fault: None, condition: Some(n) },
        conditions: Vec::new(),
        stats: RoundStats {
            throughput: Some(rate + 100.0),
            writer_rate: Some(rate),
            pools: [("shared".to_string(), pool)].into(),
            ..RoundStats::default()
        },
        gates: Vec::new(),
        valid,
    }
}

fn sweep() -> (Evidence, Vec<RoundView>) {
    let plan = Plan {
        policies: vec!["B".into(), "C".into(), "C-adaptive".into()],
        rounds: 3,
        duration: "60s".into(),
        conditions: vec!["".into(), "es=100ms".into()],
        ..Plan::default()
    };
    let ev = Evidence { dir: "x".into(), plan, env: None, warmed: None, warm_round: None, rounds: Vec::new() };
    let mut views = Vec::new();
    for rep in 1..=3 {
        let r = f64::from(rep);
        // No delay: all three within each other's spread.
        views.push(round("B", 1, rep, 2000.0 + 10.0 * r, 0.0, true));
        views.push(round("C", 1, rep, 2010.0 + 10.0 * r, 0.0, true));
        views.push(round("C-adaptive", 1, rep, 2020.0 + 10.0 * r, 0.0, true));
        // A slow Elasticsearch: the reference's pool runs jobs on the caller, the adaptive one wins.
        views.push(round("B", 2, rep, 400.0 + 10.0 * r, 9000.0, true));
        views.push(round("C", 2, rep, 600.0 + 10.0 * r, 3000.0, rep != 2));
        views.push(round("C-adaptive", 2, rep, 1000.0 + 10.0 * r, 0.0, true));
    }
    (ev, views)
}

#[test]
fn each_policy_is_a_row_and_each_condition_a_column() {
    let (ev, views) = sweep();
    let x = build(&ev, &views).expect("a sweep has a crossover");
    assert_eq!(x.policies, ["B", "C", "C-adaptive"]);
    let c = &x.cells[1][1];
    assert_eq!((c.rounds, c.valid), (3, 2), "C under d2: the invalid round counted, left out of the median");
    assert_eq!(c.end_to_end, Some((620.0, 610.0, 630.0)));
    assert_eq!(c.caller_runs_per_min, Some(3000.0));
    assert_eq!(c.peak_queue, Some(1000.0));
    assert_eq!(x.cells[2][1].end_to_end, Some((1020.0, 1010.0, 1030.0)));

    let mut md = String::new();
    render(&mut md, &x);
    assert!(md.contains("| policy | d1 `none` | d2 `es=100ms` |"), "{md}");
    assert!(md.contains("| C | 2030 (2020–2040) / 2030 | 620 (610–630) / 620 (2/3 valid) |"), "{md}");
    assert!(md.contains("| B | 0 | 9000 |"), "caller-runs per minute: {md}");
    // Under d1 the winner's lead is spread; under d2 it is apart from the next and from C.
    assert!(
        md.contains("- d1 `none`: **C-adaptive** 2040 (2030–2050)/s; +0 % over C (2030/s), ranges overlap"),
        "{md}"
    );
    assert!(
        md.contains("- d2 `es=100ms`: **C-adaptive** 1020 (1010–1030)/s; +65 % over C (620/s), ranges apart"),
        "{md}"
    );
}

#[test]
fn the_reference_is_named_when_it_is_not_the_runner_up() {
    let (ev, mut views) = sweep();
    // B's rounds under d2 now beat C's: the winner is compared with B (next) and with C.
    for v in views.iter_mut().filter(|v| v.slot.policy == "B@d2") {
        v.stats.writer_rate = v.stats.writer_rate.map(|r| r + 500.0);
        v.stats.throughput = v.stats.throughput.map(|r| r + 500.0);
    }
    let x = build(&ev, &views).expect("a sweep");
    let mut md = String::new();
    render(&mut md, &x);
    assert!(
        md.contains(
            "**C-adaptive** 1020 (1010–1030)/s; +11 % over B (920/s), ranges apart; +65 % over C (620/s), ranges apart"
        ),
        "{md}"
    );
}

#[test]
fn no_sweep_no_crossover() {
    let (mut ev, views) = sweep();
    ev.plan.conditions.clear();
    assert!(build(&ev, &views).is_none());
}

#[test]
fn the_chart_is_drawn() {
    let Ok(_) = crate::chart_style::register_font(None) else {
        // The charts need a TrueType font (fonts-dejavu-core); without one the report says so.
        assert!(!std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists());
        return;
    };
    let (ev, views) = sweep();
    let x = build(&ev, &views).expect("a sweep");
    let path = std::env::temp_dir().join(format!("crossover-{}.png", std::process::id()));
    draw(&path, &x).expect("drawn");
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if std::env::var_os("KEEP_CHART").is_none() {
        let _ = std::fs::remove_file(&path);
    }
    assert!(size > 10_000, "a 1200×1000 PNG with lines: {size} bytes");
}
