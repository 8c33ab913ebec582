//! The plan's unit tests: durations, the schedule, conditions, the TOML round trip, policies.

use super::*;
use crate::policies::SEED_POOL;

#[test]
fn durations_and_warmups() {
    assert_eq!(seconds("60s").ok(), Some(60.0));
    assert_eq!(seconds("1m30s").ok(), Some(90.0));
    assert_eq!(seconds("500ms").ok(), Some(0.5));
    assert!(seconds("ten").is_err());
    assert_eq!(warmup("3x10s").ok(), Some((3, "10s".to_string())));
    assert_eq!(warmup("0").ok(), Some((0, "0s".to_string())));
    assert!(warmup("ax10s").is_err());
}

#[test]
fn the_schedule_interleaves_and_numbers_faults() {
    let plan = Plan {
        policies: vec!["A".into(), "C".into()],
        rounds: 2,
        faults: vec!["3:kill-writer".parse().expect("fault")],
        ..Plan::default()
    };
    plan.validate().expect("valid");
    let s = plan.schedule();
    let names: Vec<&str> = s.iter().map(|x| x.policy.as_str()).collect();
    assert_eq!(names, ["A", "C", "A", "C"]);
    assert_eq!(s[2].fault, Some(RoundFault::KillWriter));
    assert_eq!(s[2].rep, 2);
}

#[test]
fn a_condition_sweep_multiplies_the_rounds_and_labels_them() {
    let plan = Plan {
        policies: vec!["C".into(), "C-adaptive".into()],
        rounds: 2,
        conditions: vec!["".into(), "es=50ms".into()],
        ..Plan::default()
    };
    plan.validate().expect("valid");
    let s = plan.schedule();
    assert_eq!(s.len(), 8);
    assert_eq!(Plan::label(&s[2]), "C@d2");
    assert!(plan.delays_of(&s[0]).expect("none").is_empty());
    assert_eq!(plan.delays_of(&s[3]).expect("es")[0].to_string(), "es=50ms");
    let both = Plan { store_delay: vec!["es=1ms".into()], ..plan };
    assert!(matches!(both.validate(), Err(PlanError::ConditionsAndDelay)));
}

#[test]
fn a_plan_survives_its_toml() {
    let mut plan = Plan { shuffle_seed: Some(7), ..Plan::default() };
    plan.policy.insert("X".into(), PolicyDef { writer_args: vec!["--consumers".into(), "1".into()], about: "".into() });
    let back = Plan::from_toml(&plan.to_toml()).expect("parse");
    assert_eq!(back, plan);
}

#[test]
fn policies_are_the_seeds() {
    let a = builtin("A").expect("A");
    assert_eq!(a.writer_args[..2], ["--sync-stores".to_string(), "es".to_string()]);
    assert!(a.writer_args.contains(&SEED_POOL.to_string()));
    assert!(builtin("C-per-store").expect("C").writer_args.contains(&"per-store".to_string()));
    let adaptive = builtin("C-adaptive").expect("C-adaptive").writer_args;
    assert!(adaptive.contains(&"--pool-adaptive".to_string()) && adaptive.contains(&"--pool-es".to_string()));
    assert_eq!(builtin("C-6").expect("C-6").writer_args.last().map(String::as_str), Some("6"));
    assert!(Plan { policies: vec!["Z".into()], ..Plan::default() }.validate().is_err());
}

/// Every plan shipped in `plans/` parses, validates and names only known policies: a user
/// copying one from the README or docs/guides/experiment.md must not meet a typo first.
#[test]
fn every_shipped_plan_is_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plans");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("plans/").flatten() {
        let path = entry.path();
        let text = std::fs::read_to_string(&path).expect("readable");
        let plan = Plan::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        plan.validate().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for p in &plan.policies {
            plan.policy_def(p).unwrap_or_else(|e| panic!("{}: policy {p}: {e}", path.display()));
        }
        seen += 1;
    }
    assert!(seen >= 3, "plans/ holds {seen} plans");
}

#[test]
fn a_soak_needs_one_open_loop_rate_and_two_windows() {
    let soak = Plan {
        policies: vec!["default".into()],
        rounds: 1,
        load: LoadKind::Open,
        rates: vec![500],
        duration: "1h".into(),
        window: "1m".into(),
        sample_every_s: 10,
        ..Plan::default()
    };
    soak.validate().expect("a soak");
    assert_eq!(soak.window_s(), Some(60.0));
    // The servers are warmed, but no soak-long round runs before the soak: its warm-up is one.
    assert!(soak.warm_servers && !soak.warming_round());
    assert!(Plan::default().warming_round(), "minute-long rounds follow a whole warming round");
    assert!(!Plan { warm_servers: false, ..Plan::default() }.warming_round());
    let bad = [
        Plan { load: LoadKind::Closed, ..soak.clone() },
        Plan { rates: vec![500, 600], ..soak.clone() },
        Plan { window: "40m".into(), ..soak.clone() },
        Plan { window: "500ms".into(), ..soak.clone() },
    ];
    for p in bad {
        assert!(matches!(p.validate(), Err(PlanError::Window(_))), "{:?} {:?}", p.load, p.window);
    }
    assert!(matches!(Plan { sample_every_s: 0, ..soak.clone() }.validate(), Err(PlanError::SampleEvery)));
    let back = Plan::from_toml(&soak.to_toml()).expect("round trip");
    assert_eq!(back, soak);
    // An old evidence folder's plan (no window) still reads, with the 1 s sampler.
    assert_eq!(Plan::from_toml("policies = [\"A\"]").expect("old plan").sample_every_s, 1);
}
