//! results.md of a bench, from its evidence folder alone (so it can be printed again later):
//! the pipeline's end-to-end rates against the references measured beside them, the references,
//! and CPU per message per process.

use super::settings::Settings;
use crate::evidence::Evidence;
use crate::report::view::{analyse, RoundView};
use crate::stats::num;
use anyhow::Context;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// The reference's batch figure: 4 cores / 8 threads, servers in Docker on the same laptop.
const REFERENCE_RATE: f64 = 10_171.0;

fn load(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    let Some(v) = v.filter(|v| v.is_finite()) else { return "—".into() };
    let s = format!("{:.*}", digits, v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if v < 0.0 && v.abs() >= 0.5 * 10f64.powi(-(digits as i32)) { "-" } else { "" };
    format!("{sign}{grouped}{}", frac.map(|f| format!(".{f}")).unwrap_or_default())
}

/// k6 against the null-202 server.
struct NullRef {
    rate: Option<f64>,
    requests: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
    server_us: Option<f64>,
    k6_us: Option<f64>,
}

fn null_ref(refs: &Path, name: &str) -> anyhow::Result<NullRef> {
    let s = load(&refs.join(format!("{name}.json")))?;
    let cpu = load(&refs.join(format!("{name}.cpu.json")))?;
    let msgs = num(&s, &["accepted"]).unwrap_or(0.0).max(1.0);
    let per_msg = |k: &str| num(&cpu, &[k]).map(|c| c * 1e6 / msgs);
    Ok(NullRef {
        rate: num(&s, &["measured", "messages_per_s"]),
        requests: num(&s, &["measured", "rate_per_s"]),
        p50: num(&s, &["measured", "latency_ms", "p50"]),
        p99: num(&s, &["measured", "latency_ms", "p99"]),
        server_us: per_msg("server_cpu_s"),
        k6_us: per_msg("k6_cpu_s"),
    })
}

/// A server alone: the example's own line (rate, its CPU per message) and the server's CPU.
struct Alone {
    rate: Option<f64>,
    server_us: Option<f64>,
    client_us: Option<f64>,
}

/// The number just before `unit` in an example's line ("... 1234 msg/s, 5.6 µs CPU/msg ...").
pub(super) fn before(line: &str, unit: &[&str]) -> Option<f64> {
    let words: Vec<&str> = line.split_whitespace().map(|w| w.trim_end_matches(',')).collect();
    words.windows(unit.len() + 1).find(|w| w[1..] == *unit).and_then(|w| w[0].replace(',', "").parse().ok())
}

fn alone(refs: &Path, name: &str, records: u32) -> anyhow::Result<Alone> {
    let path = refs.join(format!("alone-{name}.txt"));
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let line = text.lines().last().unwrap_or("");
    let cpu = load(&refs.join(format!("alone-{name}.cpu.json")))?;
    Ok(Alone {
        rate: before(line, &["msg/s"]),
        server_us: num(&cpu, &["server_cpu_s"]).map(|c| c * 1e6 / f64::from(records.max(1))),
        client_us: before(line, &["µs", "CPU/msg"]),
    })
}

/// A pipeline run's one round, with its end-to-end rate: every message that entered stored in
/// every store, over the time from k6's start until the last store held the last one (the
/// writer's per-store counters). Kafka decouples the halves: the ingest may accept faster than
/// the stores write, and the backlog drains after k6 stops, so k6's rate alone overstates what
/// reached the stores. Only for a valid round (a redelivery counts again, so a counter is read
/// only up to the number that entered).
struct Pipeline {
    view: RoundView,
    e2e_seconds: Option<f64>,
}

impl Pipeline {
    fn e2e(&self) -> Option<f64> {
        self.e2e_seconds.map(|s| self.view.stats.messages / s)
    }
}

fn pipeline(dir: &Path, stores: usize) -> anyhow::Result<Pipeline> {
    let (ev, view) = first_round(dir)?;
    let round = ev.rounds.first().context("the run has no round")?;
    let started = round.record.k6.as_ref().map(|k| k.started_s);
    let entered = view.stats.messages;
    let series: Vec<&[(f64, f64)]> =
        round.timeline.matching("writer", "writer_store_records_total").map(|(_, points)| points).collect();
    let reached = |points: &[(f64, f64)]| points.iter().find(|(_, n)| *n >= entered).map(|(t, _)| *t);
    let done = (series.len() == stores && entered > 0.0)
        .then(|| series.iter().map(|p| reached(p)).collect::<Option<Vec<f64>>>())
        .flatten()
        .and_then(|ts| ts.into_iter().reduce(f64::max));
    let e2e_seconds = match (view.valid, started, done) {
        (true, Some(s), Some(d)) if d > s => Some(d - s),
        _ => None,
    };
    Ok(Pipeline { view, e2e_seconds })
}

/// The pipeline's knee: the single-POST run's accepted rate (a closed loop of many users holds
/// the pipeline at its limit), from which the latency section's open-loop rates are taken.
pub(super) fn knee(single: &Path) -> anyhow::Result<f64> {
    let (_, view) = first_round(single)?;
    view.stats.throughput.filter(|t| *t > 0.0).context("the single-POST run measured no rate")
}

/// A one-round experiment's evidence and the view of its round.
fn first_round(dir: &Path) -> anyhow::Result<(Evidence, RoundView)> {
    let ev = Evidence::load(dir)?;
    let view = analyse(&ev).into_iter().next().with_context(|| format!("{} has no round", dir.display()))?;
    Ok((ev, view))
}

/// The reconcile column: `exact`, or why the round is invalid.
fn verdict(v: &RoundView) -> String {
    if v.valid {
        "exact".to_string()
    } else {
        format!("INVALID: {}", crate::gates::reasons(&v.gates))
    }
}

/// A latency reference at `rate`: `NAME-RATE`, or for a bench made before the references ran at
/// every rate, `NAME` at the lowest rate.
fn reference_at(refs: &Path, name: &str, rate: u32, low: u32, ext: &str) -> Option<std::path::PathBuf> {
    let at = refs.join(format!("{name}-{rate}{ext}"));
    let old = refs.join(format!("{name}{ext}"));
    if at.exists() {
        Some(at)
    } else {
        (rate == low && old.exists()).then_some(old)
    }
}

/// The broker's own p50 and p99 at `rate`, from `broker_batches latency`'s last line.
fn broker_at(refs: &Path, rate: u32, low: u32) -> (Option<f64>, Option<f64>) {
    let Some(path) = reference_at(refs, "broker-latency", rate, low, ".txt") else { return (None, None) };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    crate::beside::latency_line(text.lines().last().unwrap_or(""))
}

/// The goal at each rate: at the lowest (5 % of the knee) p50 within 1 ms of the broker's and
/// p99 within 2× of it; above, p99 within 3× of the broker's at that rate, or 25 ms, whichever
/// is larger (the round must be valid: at 80 % that includes at most 1 % dropped iterations).
fn goal(rate: u32, low: u32, v: &RoundView, b50: Option<f64>, b99: Option<f64>) -> String {
    let ok = |c: bool| if c { "met" } else { "missed" };
    match (v.stats.p50, v.stats.p99, b50, b99) {
        (Some(p50), Some(p99), Some(b50), Some(b99)) if rate == low => format!(
            "p50 ≤ {:.2}: {}; p99 ≤ {:.2}: {}",
            b50 + 1.0,
            ok(p50 <= b50 + 1.0),
            2.0 * b99,
            ok(p99 <= 2.0 * b99)
        ),
        (_, Some(p99), _, Some(b99)) => {
            let bound = (3.0 * b99).max(25.0);
            format!("p99 ≤ {bound:.1}: {}", ok(p99 <= bound && v.valid))
        }
        _ => String::new(),
    }
}

/// The latency section: at each rate the references (the null-202 server, the broker alone), the
/// pipeline, and the pipeline's p99 split by stage from the ingest's own histograms.
fn latency(md: &mut String, out: &Path, rates: &[u32]) -> anyhow::Result<()> {
    let refs = out.join("references");
    let low = rates.first().copied().unwrap_or(0);
    let ev = Evidence::load(&out.join("open"))?;
    let views = analyse(&ev);
    writeln!(md, "\n## Latency, open loop\n")?;
    writeln!(
        md,
        "Single POSTs at fixed arrival rates (`k6/open-loop.js`): 5, 50 and 80 % of the knee (the single-POST run's \
         accepted rate). At each rate, the references: the null-202 server, and the broker's own acknowledgement of \
         one-message records sent alone with the ingest's producer settings (acks=all). Goals: at 5 %, p50 ≤ the \
         broker's + 1 ms and p99 ≤ 2 × the broker's; above, p99 ≤ 3 × the broker's at that rate (or 25 ms, whichever \
         is larger) in a valid round. The stage columns are the pipeline's p99 per stage over the measured phase, from \
         the ingest's histograms (`ingest_ring_wait_seconds`, `ingest_gather_seconds`, \
         `ingest_kafka_delivery_seconds`, `ingest_request_seconds`; buckets about 1.5× apart): the one near the \
         answer's owns the tail. The broker beside: the same acknowledgement probed at the lowest rate during each \
         round's measured phase, so under the pipeline's load on this machine; the last column sets the pipeline's \
         p99 against it.\n"
    )?;
    writeln!(
        md,
        "| requests/s | null 202 p50 / p99 | broker alone p50 / p99 | pipeline achieved/s | p50 ms | p99 ms | ring wait p99 | gathering p99 | Kafka delivery p99 | answer p99 | goal | reconcile | broker beside p50 / p99 | p99 ÷ beside |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for &rate in rates {
        let null = reference_at(&refs, "null-open", rate, low, ".json")
            .and_then(|p| null_ref(&refs, p.file_stem()?.to_str()?).ok());
        let (b50, b99) = broker_at(&refs, rate, low);
        let pair = |a: Option<f64>, b: Option<f64>| format!("{} / {}", fmt(a, 2), fmt(b, 2));
        let null_cell = null.map_or("—".to_string(), |n| pair(n.p50, n.p99));
        let Some(v) = views.iter().find(|v| v.slot.point == rate) else {
            writeln!(md, "| {rate} | {null_cell} | {} | no round | | | | | | | | | | |", pair(b50, b99))?;
            continue;
        };
        let round_dir = ev.dir.join("rounds").join(crate::round::dir_name(&v.slot));
        let stages = crate::stages::of_round(&round_dir);
        let stage = |name: &str| fmt(stages.iter().find(|s| s.name == name).and_then(|s| s.p99_ms), 1);
        let (s50, s99) = crate::beside::read(&round_dir);
        let beside = match s99 {
            Some(_) => pair(s50, s99),
            None => "—".to_string(),
        };
        let ratio = match (v.stats.p99, s99) {
            (Some(p), Some(b)) if b > 0.0 => format!("{:.1}×", p / b),
            _ => "—".to_string(),
        };
        writeln!(
            md,
            "| {rate} | {null_cell} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {beside} | {ratio} |",
            pair(b50, b99),
            fmt(v.stats.throughput, 0),
            fmt(v.stats.p50, 2),
            fmt(v.stats.p99, 2),
            stage("ring wait"),
            stage("gathering"),
            stage("Kafka delivery"),
            stage("answer"),
            goal(rate, low, v, b50, b99),
            verdict(v)
        )?;
    }
    Ok(())
}

/// The whole results.md.
pub(super) fn render(out: &Path) -> anyhow::Result<String> {
    let s: Settings = serde_json::from_value(load(&out.join("bench.json"))?)?;
    let refs = out.join("references");
    let (ns, nb) = (null_ref(&refs, "null-single")?, null_ref(&refs, "null-batch")?);
    // The registry's order, then the broker.
    let servers = s
        .stores
        .iter()
        .map(String::as_str)
        .chain(["kafka"])
        .map(|name| Ok((name, alone(&refs, name, s.records)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let slowest = servers
        .iter()
        .filter_map(|(k, a)| a.rate.map(|r| (*k, r)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .context("no server's rate in the references")?;
    let (ps, pb) = (pipeline(&out.join("single"), s.stores.len())?, pipeline(&out.join("batch"), s.stores.len())?);

    let mut md = String::new();
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    writeln!(md, "# Performance run: {name}\n")?;
    if s.profiling {
        writeln!(md, "**PROFILING RUN: not an acceptance run.**\n")?;
    }
    writeln!(md, "## End to end\n")?;
    writeln!(
        md,
        "*messages/s*: every message stored in all {} stores, over the time from k6's start until the last one was \
         (the ratio uses it). *accepted/s*: k6's measured phase at the ingest. *stored/s under load*: the writer during \
         that phase. Kafka decouples the halves: what the ingest accepts faster than the stores write drains after k6 stops.\n",
        s.stores.len()
    )?;
    writeln!(md, "| run | messages/s | accepted/s | stored/s under load | p50 ms | p99 ms | reference | ratio | goal | reconcile |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|")?;
    let rows = [
        (format!("single POSTs, {} VUs", s.vus), &ps, format!("null 202: {}/s", fmt(ns.rate, 0)), ns.rate, "≥ 0.6"),
        (
            format!("batches of {}, {} VUs", s.batch, s.batch_vus),
            &pb,
            format!("slowest server alone ({}): {}/s", slowest.0, fmt(Some(slowest.1), 0)),
            Some(slowest.1),
            "≥ 0.7",
        ),
    ];
    for (label, p, ref_text, ref_rate, goal) in rows {
        let v = &p.view;
        let ratio = p.e2e().zip(ref_rate).map(|(e, r)| e / r);
        let verdict = verdict(v);
        writeln!(
            md,
            "| pipeline, {label} | {} | {} | {} | {} | {} | {ref_text} | {} | {goal} | {verdict} |",
            fmt(p.e2e(), 0),
            fmt(v.stats.throughput, 0),
            fmt(v.stats.writer_rate, 0),
            fmt(v.stats.p50, 0),
            fmt(v.stats.p99, 0),
            fmt(ratio, 2)
        )?;
    }
    writeln!(
        md,
        "\n{} messages in {} s with batches. The reference reported {} messages/s (4 cores / 8 threads, servers in \
         Docker on the same laptop): batches here reach {} × that end to end on this machine.\n",
        fmt(Some(pb.view.stats.messages), 0),
        fmt(pb.e2e_seconds, 1),
        fmt(Some(REFERENCE_RATE), 0),
        fmt(Some(pb.e2e().unwrap_or(0.0) / REFERENCE_RATE), 2)
    )?;

    writeln!(md, "## References, measured alone in this run\n")?;
    writeln!(md, "| reference | messages/s | p50 / p99 ms | server CPU µs/msg | client CPU µs/msg |")?;
    writeln!(md, "|---|---|---|---|---|")?;
    let null_row = |md: &mut String, what: String, r: &NullRef| {
        writeln!(
            md,
            "| {what} | {} | {} / {} | {} | k6 {} |",
            fmt(r.rate, 0),
            fmt(r.p50, 1),
            fmt(r.p99, 1),
            fmt(r.server_us, 1),
            fmt(r.k6_us, 1)
        )
    };
    null_row(&mut md, format!("null 202, single POSTs, {} VUs ({} requests/s)", s.vus, fmt(ns.requests, 0)), &ns)?;
    null_row(&mut md, format!("null 202, batches of {}, {} VUs", s.batch, s.batch_vus), &nb)?;
    for (k, a) in &servers {
        let (what, how) = if *k == "kafka" {
            (
                "tansu (produce, then consume)".to_string(),
                format!("{} messages, {} to a record", fmt(Some(f64::from(s.records)), 0), s.batch),
            )
        } else {
            (
                format!("{k}'s server"),
                format!("{} batches of {}, {} in flight", s.records / s.batch.max(1), s.batch, s.in_flight),
            )
        };
        writeln!(
            md,
            "| {what} alone, {how} | {} | — | {} | {} |",
            fmt(a.rate, 0),
            fmt(a.server_us, 1),
            fmt(a.client_us, 1)
        )?;
    }

    writeln!(md, "\n## CPU per message, per process, in the pipeline runs\n")?;
    writeln!(
        md,
        "µs of CPU (user + system, /proc) from k6's start until the writer stored the last record, per message that \
         entered the pipeline.\n"
    )?;
    writeln!(md, "| process | single POSTs | goal | batches of {} | goal |", s.batch)?;
    writeln!(md, "|---|---|---|---|---|")?;
    let goals: BTreeMap<&str, (&str, &str)> = [("ingest", ("≤ 40", "≤ 8")), ("writer", ("≤ 30", "≤ 30"))].into();
    let (cs, cb) = (&ps.view.stats.cpu_us_per_msg, &pb.view.stats.cpu_us_per_msg);
    for p in ["ingest", "writer", "k6", "kafka"].into_iter().chain(s.stores.iter().map(String::as_str)) {
        let (ga, gb) = goals.get(p).copied().unwrap_or(("", ""));
        writeln!(md, "| {p} | {} | {ga} | {} | {gb} |", fmt(cs.get(p).copied(), 0), fmt(cb.get(p).copied(), 0))?;
    }
    writeln!(md, "| **all** | {} | | {} | |", fmt(Some(cs.values().sum()), 0), fmt(Some(cb.values().sum()), 0))?;
    let (st, bt) = (&ps.view.stats, &pb.view.stats);
    writeln!(
        md,
        "\nk6 used {} / {} cores; processes outside the runs {} / {} cores (single / batches).",
        fmt(st.k6_cores, 2),
        fmt(bt.k6_cores, 2),
        fmt(st.outside_cores, 2),
        fmt(bt.outside_cores, 2)
    )?;
    if !s.latency_rates.is_empty() {
        latency(&mut md, out, &s.latency_rates)?;
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::{before, fmt};

    #[test]
    fn the_examples_lines_are_read_by_their_units() {
        let store = "es: 100 batches of 100, 4 in flight: mean 12.30 ms, p99 20.00 ms per batch, 31,234 msg/s, 7.5 µs CPU/msg (this process)";
        assert_eq!(before(store, &["msg/s"]), Some(31_234.0));
        assert_eq!(before(store, &["µs", "CPU/msg"]), Some(7.5));
        let broker = "broker: 40000 messages in 400 records of ~30000 bytes: produce 90000/s, consume 120000/s, through 51429 msg/s, 3.1 µs CPU/msg (this process)";
        assert_eq!(before(broker, &["msg/s"]), Some(51_429.0));
        assert_eq!(before("no figures here", &["msg/s"]), None);
        let latency = "broker latency: 100 records of one message at 50/s: p50 1.25 ms, p99 4.50 ms";
        assert_eq!(crate::beside::latency_line(latency), (Some(1.25), Some(4.5)));
    }

    #[test]
    fn figures_are_grouped_by_thousands_and_missing_ones_are_dashes() {
        assert_eq!(fmt(Some(1_234_567.4), 0), "1,234,567");
        assert_eq!(fmt(Some(999.96), 1), "1,000.0");
        assert_eq!(fmt(Some(0.123), 2), "0.12");
        assert_eq!(fmt(Some(-1500.0), 0), "-1,500");
        assert_eq!(fmt(None, 0), "—");
        assert_eq!(fmt(Some(f64::NAN), 1), "—");
    }
}
