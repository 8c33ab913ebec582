use super::*;

/// An hour of 1-minute windows in which nothing drifts: ours at 100 MiB, 50 fds, 20 threads.
fn steady() -> Soak {
    let windows = (0..60)
        .map(|w| {
            let mut win = Window { start_s: f64::from(w) * 60.0, secs: 60.0, requests: 30000.0, ..Window::default() };
            for p in JUDGED {
                win.procs.insert(
                    p.to_string(),
                    ProcWindow {
                        rss_bytes: Some(100.0 * 1048576.0),
                        fds: Some(50.0),
                        threads: Some(20.0),
                        cpu_us_per_msg: Some(40.0),
                    },
                );
            }
            win
        })
        .collect();
    Soak {
        round: "01-default-500".into(),
        target_rate: 500,
        window_s: 60.0,
        edge: 10,
        windows,
        first: (Some(5.0), Some(20.0)),
        last: (Some(5.0), Some(25.0)),
        checks: Vec::new(),
    }
}

fn verdict(s: &Soak, valid: bool) -> (bool, Vec<String>) {
    let c = checks(s, valid);
    (c.iter().all(|c| c.ok), c.iter().filter(|c| !c.ok).map(|c| c.what.clone()).collect())
}

#[test]
fn a_steady_soak_is_flat() {
    let (flat, failed) = verdict(&steady(), true);
    assert!(flat, "{failed:?}");
}

#[test]
fn a_lost_message_or_failed_gate_is_not_flat() {
    let (flat, failed) = verdict(&steady(), false);
    assert!(!flat);
    assert_eq!(failed, ["the round passed every gate"]);
}

#[test]
fn p99_over_one_and_a_half_times_is_not_flat() {
    let s = Soak { last: (Some(5.0), Some(31.0)), ..steady() };
    let (flat, failed) = verdict(&s, true);
    assert!(!flat);
    assert!(failed[0].starts_with("p99"), "{failed:?}");
}

#[test]
fn rss_growth_over_five_percent_an_hour_is_not_flat() {
    // The writer grows 8 % over the 50 minutes between the edges: 9.6 % per hour.
    let mut s = steady();
    for w in &mut s.windows[50..] {
        if let Some(p) = w.procs.get_mut("writer") {
            p.rss_bytes = Some(108.0 * 1048576.0);
        }
    }
    let (flat, failed) = verdict(&s, true);
    assert!(!flat);
    assert_eq!(failed, ["writer: RSS grows < 5 % per hour"]);
    // 3 % over the same span is 3.6 % per hour: flat.
    for w in &mut s.windows[50..] {
        if let Some(p) = w.procs.get_mut("writer") {
            p.rss_bytes = Some(103.0 * 1048576.0);
        }
    }
    assert!(verdict(&s, true).0);
}

#[test]
fn a_descriptor_or_thread_leak_is_not_flat() {
    let mut s = steady();
    // A leak: one more descriptor every ten minutes, one more thread from minute 45 on.
    for (w, win) in s.windows.iter_mut().enumerate() {
        if let Some(p) = win.procs.get_mut("ingest") {
            p.fds = Some(50.0 + (w / 10) as f64);
        }
        if let Some(p) = win.procs.get_mut("writer").filter(|_| w >= 45) {
            p.threads = Some(21.0);
        }
    }
    let (_, failed) = verdict(&s, true);
    assert_eq!(failed, ["ingest: open file descriptors do not grow", "writer: threads do not grow"]);
}

#[test]
fn a_connection_opened_and_closed_is_not_a_leak() {
    // The writer's descriptors move between 60 and 65 all hour (store connections opened and
    // closed): a last edge that touches 66 once, with its typical count within the first
    // edge's range, has not grown.
    let mut s = steady();
    for (w, win) in s.windows.iter_mut().enumerate() {
        if let Some(p) = win.procs.get_mut("writer") {
            p.fds = Some(if w == 57 { 66.0 } else { 60.0 + (w % 6) as f64 });
        }
    }
    let (flat, failed) = verdict(&s, true);
    assert!(flat, "{failed:?}");
}

#[test]
fn too_few_windows_or_missing_samples_are_not_flat() {
    let s = Soak { windows: steady().windows[..15].to_vec(), ..steady() };
    assert!(!verdict(&s, true).0);
    let mut s = steady();
    for w in &mut s.windows {
        w.procs.remove("ingest");
    }
    let (flat, failed) = verdict(&s, true);
    assert!(!flat);
    assert_eq!(failed.len(), 3, "{failed:?}");
}

#[test]
fn the_report_names_every_check() {
    let mut s = steady();
    s.checks = checks(&s, true);
    let md = render(&s);
    assert!(md.contains("Verdict: **flat**"), "{md}");
    for c in &s.checks {
        assert!(md.contains(&c.what), "{}", c.what);
    }
    assert_eq!(md.matches("\n| 59 |").count(), 4, "a row per window in each table");
}
