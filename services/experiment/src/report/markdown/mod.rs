//! `report.md`: every round with its gate verdicts, then per policy (valid rounds only) the
//! median, min and max of throughput, latency, CPU per message per process and pool activity,
//! side by side with the ratio to the best; for a gradient, the knee.
//!
//! `report.md` reads top to bottom as this file does (its tests are in tests.rs); the crossover
//! section is `crossover.rs`. What it shows comes from the report's model (`report::view`,
//! `report::crossover`), and its numbers read as `report::format` writes them.

/// `pub(super)` for the crossover's tests, which read its model, its section and its chart.
pub(super) mod crossover;

use crate::evidence::Evidence;
use crate::gates::Verdict;
use crate::plan::LoadKind;
use crate::report::format::{f, med_range};
use crate::report::view::{cells, valid_of, RoundView};
use crate::stats::{self, processes, spread, RoundStats};
use std::collections::BTreeMap;
use std::fmt::Write;

pub(crate) fn render(ev: &Evidence, views: &[RoundView], charts: &[String]) -> String {
    let plan = &ev.plan;
    let mut md = String::new();
    let name = ev.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let _ = writeln!(md, "# Experiment `{name}`\n");
    let load = match plan.load {
        LoadKind::Closed => format!("closed loop, {} VUs", plan.vus),
        LoadKind::Open => format!("open loop at {:?} requests/s (≤ {} VUs)", plan.rates, plan.max_vus),
        LoadKind::Batch => format!("closed loop, {} VUs, {} messages per request", plan.vus, plan.batch),
    };
    let _ = writeln!(
        md,
        "Policies {} × {} rounds, interleaved{}; {load}; measured {} after warm-up {}. Plan: `plan.toml`; machine: `env.json`.\n",
        plan.policies.join(", "),
        plan.rounds,
        plan.shuffle_seed.map(|s| format!(" (shuffled, seed {s})")).unwrap_or_default(),
        plan.duration,
        plan.warmup
    );
    if let Some(env) = &ev.env {
        let get = |k: &str| env.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string();
        let _ = writeln!(
            md,
            "Machine: {} × {} cores, kernel {}; commit `{}`; binaries `{}`.\n",
            get("cpu_model"),
            env.get("cores").map(|v| v.to_string()).unwrap_or_default(),
            get("kernel"),
            get("git_sha"),
            get("profile")
        );
    }
    match &ev.warmed {
        Some(w) => {
            let each: Vec<String> = w.iter().map(crate::warm::line).collect();
            let _ = writeln!(
                md,
                "Servers warmed before the first round, each store written straight through its sink until its \
                 server's CPU per message settled (`warmup.json`): {}.\n",
                each.join("; ")
            );
        }
        None => {
            let _ = writeln!(md, "Servers not warmed beyond the k6 warm-up (no `warmup.json`).\n");
        }
    }
    if let Some(r) = &ev.warm_round {
        let _ = writeln!(
            md,
            "Then one round of the pipeline, not measured (`{}/`{}; k6 exit {}, reconcile exit {}).\n",
            crate::warm::ROUND_DIR,
            r.slot.as_ref().map(|s| format!(": policy {} at {}", s.policy, s.point)).unwrap_or_default(),
            r.k6.as_ref().and_then(|k| k.exit_code).map_or("none".into(), |c| c.to_string()),
            r.reconcile_exit.map_or("none".into(), |c| c.to_string()),
        );
    }
    if plan.keep_stores {
        let _ = writeln!(
            md,
            "**Stores kept** (`keep_stores`): no round emptied them first; each round's reconcile judged only its \
             own ids (`reconcile --only-prefix`) and counted the others (`rounds/*/reconcile.json`).\n"
        );
    }
    if !plan.conditions.is_empty() {
        let each: Vec<String> = plan
            .conditions
            .iter()
            .enumerate()
            .map(|(i, c)| format!("d{} = `{}`", i + 1, crate::plan::Plan::condition_name(c)))
            .collect();
        let _ = writeln!(
            md,
            "**Conditions swept:** {}; `POLICY@dN` is a policy under condition N: stores made slow by a proxy \
             between the writer and the server (a condition, not a fault: the rounds are judged by the same gates).\n",
            each.join(", ")
        );
    }
    if !plan.store_delay.is_empty() {
        let _ = writeln!(
            md,
            "**Condition of every round:** stores made slow by a proxy between the writer and the server: `{}` \
             (a condition, not a fault: the rounds are judged by the same gates; each round's measured delay is under \
             \"Every round\").\n",
            plan.store_delay.join(",")
        );
    }
    let valid = views.iter().filter(|v| v.valid).count();
    let _ = writeln!(
        md,
        "**{valid} of {} rounds valid.** Invalid rounds are listed with their reason and left out of every median.\n",
        views.len()
    );

    per_policy(&mut md, ev, views);
    comparisons(&mut md, ev, views);
    if let Some(x) = crate::report::crossover::build(ev, views) {
        crossover::render(&mut md, &x);
    }
    cpu_table(&mut md, ev, views);
    pool_table(&mut md, ev, views);
    if plan.load == LoadKind::Open {
        gradient(&mut md, ev, views);
    }
    rounds_table(&mut md, views);
    if !charts.is_empty() {
        let _ = writeln!(md, "## Charts\n");
        for c in charts {
            let _ = writeln!(md, "![{c}]({c})\n");
        }
    }
    let _ = writeln!(
        md,
        "How to read this report, and what each gate guards against: `docs/guides/experiment.md` in the repository."
    );
    md
}

fn per_policy(md: &mut String, ev: &Evidence, views: &[RoundView]) {
    let cells = cells(ev, views);
    let medians: Vec<Option<f64>> = cells
        .iter()
        .map(|c| {
            spread(&valid_of(views, c).iter().filter_map(|v| v.stats.end_to_end()).collect::<Vec<_>>()).map(|s| s.0)
        })
        .collect();
    let _ = writeln!(md, "## Per policy (valid rounds: median, and min–max over the rounds)\n");
    let _ = writeln!(
        md,
        "| policy | load | valid | messages/s | writer stored/s | end-to-end/s | vs best | drain after k6, s | p50 ms | p95 ms | p99 ms | caller-runs | rejections | peak queue | CPU µs/msg (all processes) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, c) in cells.iter().enumerate() {
        let vs = valid_of(views, c);
        let all = views.iter().filter(|v| v.slot.policy == c.0 && v.slot.point == c.1).count();
        let col = |get: &dyn Fn(&RoundStats) -> Option<f64>, d| {
            med_range(&vs.iter().filter_map(|v| get(&v.stats)).collect::<Vec<_>>(), d)
        };
        let best =
            cells.iter().zip(&medians).filter(|(o, _)| o.1 == c.1).filter_map(|(_, m)| *m).fold(f64::NAN, f64::max);
        let ratio = medians[i].filter(|_| best.is_finite() && best > 0.0).map(|m| format!("{:.2}", m / best));
        let _ = writeln!(
            md,
            "| {} | {} | {}/{all} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.0,
            c.1,
            vs.len(),
            col(&|s| s.throughput, 0),
            col(&|s| s.writer_rate, 0),
            col(&|s| s.end_to_end(), 0),
            ratio.unwrap_or_else(|| "–".into()),
            col(&|s| s.drain_after_s, 0),
            col(&|s| s.p50, 1),
            col(&|s| s.p95, 1),
            col(&|s| s.p99, 1),
            col(&|s| Some(s.caller_runs()), 0),
            col(&|s| Some(s.rejected()), 0),
            col(&|s| Some(s.peak_queue()), 0),
            col(&|s| s.cpu_total(), 0),
        );
    }
    let _ = writeln!(
        md,
        "\n*load*: VUs (closed loop) or target requests/s (open loop). *messages/s*: accepted (202) by the ingest in k6's measured phase. *writer stored/s*: records the writer stored in all four stores per second of the measured phase (Kafka decouples it from the ingest's rate). *end-to-end/s*: the lower of the two, what the pipeline sustained into every store; policies are ranked and compared by it. *vs best*: its median end-to-end rate over the best policy's at the same load. *drain after k6*: how long it kept storing after the load stopped (the backlog). *caller-runs*, *rejections*: counted over the measured phase, all pools. *peak queue*: the deepest any pool's queue got (the writer's own peak gauge).\n"
    );
}

/// Every pair of policies at the same load: the ratio of median throughputs and whether the
/// rounds' ranges overlap (if they do, the difference is within the round-to-round spread).
fn comparisons(md: &mut String, ev: &Evidence, views: &[RoundView]) {
    let cells = cells(ev, views);
    let ranges: Vec<Option<stats::Spread>> = cells
        .iter()
        .map(|c| spread(&valid_of(views, c).iter().filter_map(|v| v.stats.end_to_end()).collect::<Vec<_>>()))
        .collect();
    let mut lines = Vec::new();
    for (i, a) in cells.iter().enumerate() {
        for (j, b) in cells.iter().enumerate() {
            let (Some(ra), Some(rb)) = (ranges[i], ranges[j]) else { continue };
            if i == j || a.1 != b.1 || ra.0 < rb.0 || (ra.0 == rb.0 && i > j) {
                continue;
            }
            let overlap = stats::ranges_overlap(ra, rb);
            let n = (valid_of(views, a).len(), valid_of(views, b).len());
            lines.push(format!(
                "- **{} over {}** (load {}): {:+.1} % in median end-to-end rate ({:.0} vs {:.0} messages/s); {}",
                a.0,
                b.0,
                a.1,
                (ra.0 / rb.0 - 1.0) * 100.0,
                ra.0,
                rb.0,
                if n.0 < 2 || n.1 < 2 {
                    "too few valid rounds to judge the spread".to_string()
                } else if overlap {
                    format!(
                        "the rounds' ranges overlap ({:.0}–{:.0} vs {:.0}–{:.0}): within the round-to-round spread",
                        ra.1, ra.2, rb.1, rb.2
                    )
                } else {
                    format!("the rounds' ranges do not overlap ({:.0}–{:.0} vs {:.0}–{:.0})", ra.1, ra.2, rb.1, rb.2)
                }
            ));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(md, "## Policies compared (valid rounds)\n\n{}\n", lines.join("\n"));
    }
}

fn cpu_table(md: &mut String, ev: &Evidence, views: &[RoundView]) {
    let _ = writeln!(md, "## CPU µs per message, per process (median over valid rounds)\n");
    let _ = writeln!(md, "| policy | load | {} | total |", processes().join(" | "));
    let _ = writeln!(md, "|---|---|{}---|", "---|".repeat(processes().len()));
    for c in cells(ev, views) {
        let vs = valid_of(views, &c);
        let cols: Vec<String> = processes()
            .iter()
            .map(|p| {
                f(
                    spread(&vs.iter().filter_map(|v| v.stats.cpu_us_per_msg.get(*p).copied()).collect::<Vec<_>>())
                        .map(|s| s.0),
                    0,
                )
            })
            .collect();
        let total = f(spread(&vs.iter().filter_map(|v| v.stats.cpu_total()).collect::<Vec<_>>()).map(|s| s.0), 0);
        let _ = writeln!(md, "| {} | {} | {} | {total} |", c.0, c.1, cols.join(" | "));
    }
    let _ = writeln!(
        md,
        "\nCPU time (user + system, from /proc) from k6's start until the writer stored its last record, divided by every message that entered the pipeline (warm-up included). A process missing from the table was not found (its pid file).\n"
    );
}

fn pool_table(md: &mut String, ev: &Evidence, views: &[RoundView]) {
    let _ = writeln!(md, "## Pools (median over valid rounds; measured phase)\n");
    let _ = writeln!(md, "| policy | load | pool | caller-runs | caller-runs/min | rejections | peak queue | mean active | peak active |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    let secs = crate::duration::seconds(&ev.plan.duration).unwrap_or(60.0).max(1.0);
    for c in cells(ev, views) {
        let vs = valid_of(views, &c);
        let mut pools: Vec<String> = vs.iter().flat_map(|v| v.stats.pools.keys().cloned()).collect();
        pools.sort();
        pools.dedup();
        for p in pools {
            let get = |g: &dyn Fn(&stats::PoolStats) -> f64| {
                spread(&vs.iter().filter_map(|v| v.stats.pools.get(&p).map(g)).collect::<Vec<_>>()).map(|s| s.0)
            };
            let _ = writeln!(
                md,
                "| {} | {} | {p} | {} | {} | {} | {} | {} | {} |",
                c.0,
                c.1,
                f(get(&|x| x.caller_runs), 0),
                f(get(&|x| x.caller_runs * 60.0 / secs), 0),
                f(get(&|x| x.rejected), 0),
                f(get(&|x| x.peak_queue), 0),
                f(get(&|x| x.mean_active), 1),
                f(get(&|x| x.peak_active), 0)
            );
        }
    }
    let _ = writeln!(md);
}

fn gradient(md: &mut String, ev: &Evidence, views: &[RoundView]) {
    let _ = writeln!(md, "## Gradient: the knee (highest rate at which every round passed every gate)\n");
    let mut knees: BTreeMap<String, Option<u32>> = BTreeMap::new();
    for p in &ev.plan.labels() {
        let knee = ev
            .plan
            .rates
            .iter()
            .filter(|&&r| {
                let all: Vec<&RoundView> = views.iter().filter(|v| &v.slot.policy == p && v.slot.point == r).collect();
                !all.is_empty() && all.iter().all(|v| v.valid)
            })
            .max()
            .copied();
        knees.insert(p.clone(), knee);
    }
    for (p, k) in knees {
        let _ =
            writeln!(md, "- {p}: {}", k.map(|r| format!("{r} requests/s")).unwrap_or_else(|| "no rate passed".into()));
    }
    let _ = writeln!(md);
}

fn rounds_table(md: &mut String, views: &[RoundView]) {
    let _ = writeln!(md, "## Every round\n");
    let _ = writeln!(md, "| round | policy | load | messages/s | writer stored/s | p50 ms | p99 ms | caller-runs | rejections | outside load, cores | verdict | reasons and warnings |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for v in views {
        let notes: Vec<String> = v
            .gates
            .iter()
            .filter(|g| g.verdict != Verdict::Pass)
            .map(|g| {
                format!(
                    "{} {}: {}",
                    if g.verdict == Verdict::Fail { "✗" } else { "⚠" },
                    g.name,
                    g.detail.replace('|', "/")
                )
            })
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} | {} | {} |",
            v.name,
            v.slot.policy,
            v.slot.point,
            f(v.stats.throughput, 0),
            f(v.stats.writer_rate, 0),
            f(v.stats.p50, 1),
            f(v.stats.p99, 1),
            v.stats.caller_runs(),
            v.stats.rejected(),
            f(v.stats.outside_cores, 2),
            if v.valid { "valid" } else { "**INVALID**" },
            if notes.is_empty() { "all gates passed".into() } else { notes.join("<br>") }
        );
    }
    let _ = writeln!(md);
    let measured: Vec<String> = views
        .iter()
        .filter(|v| !v.conditions.is_empty())
        .map(|v| {
            let each: Vec<String> = v
                .conditions
                .iter()
                .map(|c| {
                    let mean = if c.chunks > 0 { c.delay_s * 1000.0 / c.chunks as f64 } else { 0.0 };
                    format!(
                        "`{}`: {} requests held {mean:.1} ms on average, at most {} at once",
                        c.condition, c.chunks, c.peak_inflight
                    )
                })
                .collect();
            format!("- {}: {}", v.name, each.join("; "))
        })
        .collect();
    if !measured.is_empty() {
        let _ = writeln!(md, "Condition per round, as the proxies measured it:\n\n{}\n", measured.join("\n"));
    }
}

#[cfg(test)]
mod tests;
