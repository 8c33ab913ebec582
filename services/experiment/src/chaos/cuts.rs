//! The partition scenarios' verdicts that the monitor's samples give, for every cut of a
//! writer's host (a `CutStart` event with its writer's metrics port, and its `CutEnd`):
//!
//! - the writer owned partitions when it was cut (else the cut proved nothing);
//! - the cut stopped them: some partitions stood still with records waiting from 1 s into the
//!   cut (those are the cut writer's: everyone else's keep moving under the load);
//! - a cut from everything or from the broker: those partitions moved again *before the heal*
//!   (the group gave them to the live writers), and after the heal the writer owns partitions
//!   again and takes records (it rejoined); from the broker only, what the zombie stored in
//!   MySQL after it lost the broker and after the group had moved its partitions, and that it
//!   stored something then: after the takeover when one of its stores was held back meanwhile
//!   (a `hold-STORE` cut), else at all (without it, there was no zombie to judge);
//! - a cut from one store: that store's /metrics on the cut writer moved (retries, errors,
//!   writes over 1 s, a growing queue: it backed off and waited, it did not drop or skip), and
//!   the stopped partitions moved again after the heal (it caught up).
//!
//! Like [`super::verdict`], it reads the evidence only (samples and events), so the verdict can
//! be recomputed from an evidence folder.

use super::hosts::HOLD;
use super::monitor::Sample;
use super::record::{Check, Event, EventKind};

/// Sum of the series of `family` (those whose labels contain `label`, when given) that writer
/// `port` reported in `s`; `None` when the writer did not answer that sample.
fn family(s: &Sample, port: &str, family: &str, label: Option<&str>) -> Option<f64> {
    let m = s.w.get(port)?;
    let open = format!("{family}{{");
    Some(
        m.iter()
            .filter(|(k, _)| (k.as_str() == family || k.starts_with(&open)) && label.is_none_or(|l| k.contains(l)))
            .map(|(_, v)| v)
            .sum(),
    )
}

/// The writer's value of `fam` in its last answer at or before `t`.
fn last_at(samples: &[Sample], t: f64, port: &str, fam: &str, label: Option<&str>) -> Option<f64> {
    samples.iter().filter(|s| s.t <= t).filter_map(|s| family(s, port, fam, label)).next_back()
}

/// Partitions whose committed offset stood still over `[a, b]` with records waiting at `b`,
/// judged on samples spanning most of that window (none when the samples are too sparse).
pub(super) fn stood_still(samples: &[Sample], a: f64, b: f64) -> Vec<usize> {
    let w: Vec<&Sample> = samples.iter().filter(|s| s.t >= a && s.t <= b).collect();
    let (Some(first), Some(last)) = (w.first(), w.last()) else { return Vec::new() };
    if last.t - first.t < 0.7 * (b - a) {
        return Vec::new();
    }
    (0..last.committed.len())
        .filter(|p| {
            let c0 = first.committed.get(*p);
            w.iter().all(|s| s.committed.get(*p) == c0) && last.high.get(*p) > last.committed.get(*p)
        })
        .collect()
}

/// Seconds after `from` until partition `p` committed past where it stood at `from`.
pub(super) fn moved_after(samples: &[Sample], p: usize, from: f64) -> Option<f64> {
    let base = samples.iter().rfind(|s| s.t <= from)?.committed.get(p).copied()?;
    samples.iter().find(|s| s.t > from && s.committed.get(p).is_some_and(|c| *c > base)).map(|s| s.t - from)
}

fn check(ok: bool, what: String, detail: String) -> Check {
    Check { ok, check: what, detail: if ok { String::new() } else { detail } }
}

/// Seconds after the heal `t2` of a cut that began at `t1` until writer `port` owned
/// partitions again and took records after that: its rejoin.
///
/// The writer's own gauge lags while its consumer is blocked (a write waiting on a cut link
/// serves no rebalance callback), and records it had fetched before the cut may still be taken
/// after the heal: so a rejoin counts from the heal, or from when the writer showed it had lost
/// its partitions (owning none), if that came later.
pub(super) fn rejoined(samples: &[Sample], port: &str, t1: f64, t2: f64) -> Option<f64> {
    let owns = |s: &Sample| family(s, port, "writer_assigned_partitions", None);
    let lost = samples.iter().find(|s| s.t > t1 && owns(s) == Some(0.0)).map_or(t2, |s| s.t.max(t2));
    samples.iter().filter(|s| s.t > lost).find_map(|s| {
        let taken = family(s, port, "writer_records_total", None)?;
        let mut later =
            samples.iter().filter(|l| l.t > s.t).filter_map(|l| family(l, port, "writer_records_total", None));
        (owns(s)? > 0.0 && later.any(|r| r > taken)).then_some(s.t - t2)
    })
}

/// Notes and checks of every writer cut in `events`.
pub(super) fn notes(samples: &[Sample], events: &[Event]) -> (Vec<String>, Vec<Check>) {
    let (mut notes, mut checks) = (Vec::new(), Vec::new());
    for (i, start) in events.iter().enumerate().filter(|(_, e)| e.kind == EventKind::CutStart) {
        let Some(cut) = &start.cut else { continue };
        let Some(port) = cut.metrics_port.map(|p| p.to_string()) else { continue };
        if cut.what.starts_with(HOLD) {
            // Part of a cut from the broker: judged with it, below.
            continue;
        }
        let end = events[i..].iter().find(|e| {
            e.kind == EventKind::CutEnd && e.cut.as_ref().is_some_and(|c| c.host == cut.host && c.what == cut.what)
        });
        let Some(t2) = end.map(|e| e.t) else { continue };
        let (t1, host, what) = (start.t, cut.host.as_str(), cut.what.as_str());
        let tag = format!("{host} cut from {what} at +{:.0} s", t1 - samples.first().map_or(t1, |s| s.t));
        let owned = last_at(samples, t1, &port, "writer_assigned_partitions", None).unwrap_or(0.0);
        checks.push(check(
            owned > 0.0,
            format!("{tag}: it owned partitions when cut ({owned:.0})"),
            "it owned none: the cut proved nothing".into(),
        ));
        let (a, b) = (t1 + 1.0, t1 + (t2 - t1 - 1.0).min(9.0));
        let stopped = stood_still(samples, a, b);
        let names = |ps: &[usize]| ps.iter().map(|p| format!("p{p}")).collect::<Vec<_>>().join(", ");
        checks.push(check(
            !stopped.is_empty(),
            format!(
                "{tag}: the cut stopped its partitions ({} stood still from +1 s to +{:.0} s)",
                names(&stopped),
                b - t1
            ),
            "every partition kept moving: the cut did not bite (or the monitor missed it)".into(),
        ));
        if what == "all" || what == "kafka" {
            let moved: Vec<(usize, Option<f64>)> = stopped.iter().map(|p| (*p, moved_after(samples, *p, b))).collect();
            let before_heal = !moved.is_empty() && moved.iter().all(|(_, x)| x.is_some_and(|x| b + x < t2));
            let each: Vec<String> = moved
                .iter()
                .map(|(p, x)| format!("p{p} {}", x.map(|x| format!("+{:.1} s", b + x - t1)).unwrap_or("never".into())))
                .collect();
            checks.push(check(
                before_heal,
                format!(
                    "{tag}: its partitions moved to the live writers before the heal ({}, heal at +{:.0} s)",
                    each.join(", "),
                    t2 - t1
                ),
                format!("not all moved during the cut: {}", each.join(", ")),
            ));
            let rejoin = rejoined(samples, &port, t1, t2);
            checks.push(check(
                rejoin.is_some(),
                format!(
                    "{tag}: it rejoined after the heal (owns partitions and takes records{})",
                    rejoin.map(|x| format!(", {x:.1} s after the heal")).unwrap_or_default()
                ),
                "it never owned partitions and took records again".into(),
            ));
            if what == "kafka" {
                let mysql = Some("store=\"mysql\"");
                let stored = |t| last_at(samples, t, &port, "writer_store_records_total", mysql);
                let total = stored(t2).zip(stored(t1)).map(|(b, a)| b - a);
                let first_move = moved.iter().filter_map(|(_, x)| *x).map(|x| b + x).reduce(f64::min);
                let late = first_move.and_then(|m| stored(t2).zip(stored(m)).map(|(b, a)| b - a));
                let n = |v: Option<f64>| v.map_or("?".into(), |n| format!("{n:.0}"));
                notes.push(format!(
                    "{tag}: the zombie stored {} messages in MySQL after it lost the broker, {} of them after the group \
                     had moved its first partition",
                    n(total),
                    n(late)
                ));
                let held = events.iter().any(|e| {
                    e.kind == EventKind::CutStart
                        && (t1 - 5.0..=t2).contains(&e.t)
                        && e.cut.as_ref().is_some_and(|c| c.host == cut.host && c.what.starts_with(HOLD))
                });
                let (wrote, when) = if held {
                    (late, "after the group had moved its partitions")
                } else {
                    (total, "after it lost the broker")
                };
                checks.push(check(
                    wrote.is_some_and(|n| n > 0.0),
                    format!("{tag}: the zombie wrote {when} ({} messages in MySQL)", n(wrote)),
                    "no zombie writes to judge (a bigger burst before the cut, or a longer hold)".into(),
                ));
            }
        } else {
            let lab = format!("store=\"{what}\"");
            let delta = |fam: &str| {
                let after = last_at(samples, t2 + 2.0, &port, fam, Some(&lab)).unwrap_or(0.0);
                after - last_at(samples, t1, &port, fam, Some(&lab)).unwrap_or(0.0)
            };
            let bucket = |le: &str| {
                let l = format!("le=\"{le}\"");
                let at = |t| {
                    samples.iter().filter(|s| s.t <= t).filter_map(|s| s.w.get(&port)).next_back().map_or(0.0, |m| {
                        m.iter()
                            .filter(|(k, _)| {
                                k.starts_with("writer_store_write_seconds_bucket{")
                                    && k.contains(&lab)
                                    && k.contains(&l)
                            })
                            .map(|(_, v)| v)
                            .sum::<f64>()
                    })
                };
                at(t2 + 2.0) - at(t1)
            };
            let (retries, errors) = (delta("writer_store_retries_total"), delta("writer_store_errors_total"));
            let slow = bucket("+Inf") - bucket("1");
            let queue = |from: f64, to: f64| {
                samples
                    .iter()
                    .filter(|s| s.t >= from && s.t <= to)
                    .filter_map(|s| family(s, &port, "writer_pool_queue_depth", Some(&lab)))
                    .fold(0.0f64, f64::max)
            };
            let (qpre, qmax) = (queue(t1 - 5.0, t1), queue(t1, t2));
            let backed_off = retries + errors + slow > 0.0 || qmax > qpre;
            checks.push(check(
                backed_off,
                format!(
                    "{tag}: {what} on the cut writer backed off (retries +{retries:.0}, errors +{errors:.0}, writes over 1 s \
                     +{slow:.0}, queue depth {qpre:.0} → max {qmax:.0})"
                ),
                "no retry, error, slow write or queue growth for that store: the writer did not wait for it".into(),
            ));
            let after: Vec<(usize, Option<f64>)> = stopped.iter().map(|p| (*p, moved_after(samples, *p, t2))).collect();
            let each: Vec<String> = after
                .iter()
                .map(|(p, x)| format!("p{p} {}", x.map(|x| format!("{x:.1} s")).unwrap_or("never".into())))
                .collect();
            checks.push(check(
                !after.is_empty() && after.iter().all(|(_, x)| x.is_some()),
                format!("{tag}: its partitions caught up after the heal ({})", each.join(", ")),
                format!("not every stopped partition moved again: {}", each.join(", ")),
            ));
        }
    }
    (notes, checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::record::CutInfo;
    use std::collections::BTreeMap;

    fn s(t: f64, committed: &[i64], high: &[i64], assigned: Option<f64>, records: f64) -> Sample {
        let mut w = BTreeMap::new();
        if let Some(a) = assigned {
            let m: BTreeMap<String, f64> = [
                ("writer_assigned_partitions{consumer=\"0\"}".to_string(), a),
                ("writer_records_total".to_string(), records),
            ]
            .into();
            w.insert("29466".to_string(), m);
        }
        Sample { t, committed: committed.to_vec(), high: high.to_vec(), error: None, w }
    }

    fn cut(kind: EventKind, t: f64) -> Event {
        let cut = Some(CutInfo { host: "w3".into(), metrics_port: Some(29466), what: "all".into() });
        Event { t, kind, label: "cut".into(), progress: None, cut }
    }

    /// A whole-host cut of w3 (partition 1 its own): stopped at once, moved at +20 s by the
    /// group, w3 back with a partition and records after the heal at +30 s. Then the same with
    /// partition 1 moving only after the heal: the takeover check fails.
    #[test]
    fn a_cut_writers_partitions_must_move_before_the_heal_and_it_must_rejoin() {
        let mut samples = Vec::new();
        for i in 0..=60 {
            let t = f64::from(i);
            let p1 = if i < 1 {
                10
            } else if i < 20 {
                11
            } else {
                11 + i64::from(i)
            };
            let w3 = if (1..31).contains(&i) { None } else { Some(1.0) };
            samples.push(s(t, &[i64::from(i) * 2, p1], &[i64::from(i) * 2 + 5, 100 + i64::from(i)], w3, f64::from(i)));
        }
        let events = vec![cut(EventKind::CutStart, 0.5), cut(EventKind::CutEnd, 30.5)];
        let (_, checks) = notes(&samples, &events);
        assert_eq!(checks.len(), 4, "{checks:?}");
        assert!(checks.iter().all(|c| c.ok), "{checks:?}");
        assert!(checks[1].check.contains("p1 stood still"), "{checks:?}");
        let late: Vec<Sample> = samples
            .into_iter()
            .map(|mut x| {
                if x.t < 35.0 {
                    x.committed[1] = 11;
                }
                x
            })
            .collect();
        let (_, checks) = notes(&late, &events);
        assert!(!checks[2].ok, "moved only after the heal: {checks:?}");
    }
}
