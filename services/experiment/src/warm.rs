//! Warming the servers before the first round, until each is steady.
//!
//! A server measured cold costs more per message than the same server a few minutes later: a
//! JVM (OpenSearch) compiles its hot paths while it serves, caches and buffer pools fill. The
//! k6 warm-up alone is too short to get there at the rate this machine allows, so a run on a
//! freshly started stack would report other figures than a run on a warm one. Here each store
//! is written in chunks, straight through its own sink (the code path the writer uses), while
//! its server's CPU is read from /proc, until the server's CPU per message has stopped falling:
//! the last few chunks within a small spread of each other. The stores are left empty (the
//! round resets them anyway). What was done goes to `warmup.json` and the report.
//!
//! The stores' warm-up alone is not enough for OpenSearch: the first round after it still costs
//! it more per message than the second. So the experiment then runs its first round once
//! unmeasured ([`ROUND_DIR`]), and the measured rounds all follow a whole round of the pipeline.

use anyhow::Context;
use pipeline_common::procstat::cpu_seconds;
use pipeline_stores::{Overwrite, StoreArgs, StoreKind};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;
use tracing::info;

/// The evidence file of the warm-up, beside `env.json`.
pub(crate) const FILE: &str = "warmup.json";

/// The folder of the unmeasured round that follows the stores' warm-up (`run.rs`), beside
/// `rounds/` so that no table or chart counts it.
pub(crate) const ROUND_DIR: &str = "warm-round";

/// When a server counts as warm, and how much may be written to get there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// Seconds of writing per chunk: one CPU-per-message reading. By time, not by count: /proc
    /// counts CPU in ticks of 10 ms, and a server that spends 5 µs per message (Redis) would
    /// use a handful of ticks on a few thousand messages, too coarse to judge a 15 % spread.
    pub chunk_s: f64,
    /// Messages per store batch, taken in turn, and batches in flight: the writer's batches
    /// range from one message (an idle pipeline) to hundreds (a backlog), and a JVM compiles
    /// per request what it runs per request, so the warm-up sends every size.
    pub batches: &'static [usize],
    pub in_flight: usize,
    /// The server counts as steady once the median of the last `settle` chunks is no more than
    /// `spread` (0.15: 15 %) below the median of the `settle` before it: it stopped getting
    /// cheaper. Medians of windows, not single chunks: OpenSearch's readings jump ±40 % from
    /// chunk to chunk (merges, refreshes) long after its JIT has done most of its work.
    pub settle: usize,
    pub spread: f64,
    /// Most chunks per store: a server that never settles is reported as such, not waited on.
    pub max_chunks: usize,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule { chunk_s: 2.0, batches: &[1, 10, 100], in_flight: 4, settle: 10, spread: 0.15, max_chunks: 60 }
    }
}

/// One store's warm-up, as kept in `warmup.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Warmed {
    pub store: String,
    /// Seconds of writing per chunk.
    pub chunk_s: f64,
    /// Messages written in all.
    pub messages: usize,
    /// The server's CPU per message in each chunk, µs (empty when its process was not found:
    /// the chunks were written, but nothing was measured).
    pub server_us: Vec<f64>,
    /// Chunks written.
    pub chunks: usize,
    /// Whether the last chunks settled within the rule's spread.
    pub steady: bool,
    pub seconds: f64,
}

/// Whether the server stopped getting cheaper: the median of the last `settle` readings is no
/// more than `spread` below the median of the `settle` before them.
pub(crate) fn steady(readings: &[f64], settle: usize, spread: f64) -> bool {
    if settle == 0 || readings.len() < 2 * settle {
        return false;
    }
    let median = |w: &[f64]| {
        let mut w = w.to_vec();
        w.sort_by(f64::total_cmp);
        w[w.len() / 2]
    };
    let n = readings.len();
    let (before, last) = (median(&readings[n - 2 * settle..n - settle]), median(&readings[n - settle..]));
    last > 0.0 && last * (1.0 + spread) >= before
}

/// Warms the server of every store of the run, all at once; the stores are left empty.
///
/// At once, not one after the other: a chunk is a span of time, not of work, so four stores in
/// turn took four times the wall time (at least `2 × settle` chunks each: 40 s a store with
/// the default rule, before every experiment, bench and their tests). Each reading is one
/// server's own CPU per message (its process from /proc), which the others' load beside it does
/// not change much; what it may add is noise, and the rule judges medians of windows for that.
pub(crate) async fn run(root: &Path, rule: Rule) -> anyhow::Result<Vec<Warmed>> {
    let args = StoreArgs::from_env();
    let stores =
        pipeline_stores::connect(&args, crate::procs::stores().kinds()).await.context("connecting to the stores")?;
    // In the registry's order, whichever finishes first.
    futures::future::try_join_all(stores.iter().map(|store| warm_one(root, store.as_ref(), rule))).await
}

/// One store's warm-up: chunks until its server is steady (or the rule's most), then emptied.
async fn warm_one(root: &Path, store: &dyn pipeline_stores::Store, rule: Rule) -> anyhow::Result<Warmed> {
    let kind = store.kind();
    store.prepare().await.with_context(|| format!("preparing {kind}"))?;
    let pid = crate::procs::server_pid(root, kind.name());
    let t0 = Instant::now();
    let mut next_id = 0;
    let mut warmed = Warmed {
        store: kind.name().into(),
        chunk_s: rule.chunk_s,
        messages: 0,
        server_us: Vec::new(),
        chunks: 0,
        steady: false,
        seconds: 0.0,
    };
    while warmed.chunks < rule.max_chunks {
        let cpu0 = cpu_seconds(pid);
        let n = write_chunk(store, &mut next_id, rule).await?;
        warmed.chunks += 1;
        warmed.messages += n;
        if let (Some(a), Some(b)) = (cpu0, cpu_seconds(pid)) {
            warmed.server_us.push((b - a) * 1e6 / n.max(1) as f64);
        }
        warmed.steady = steady(&warmed.server_us, rule.settle, rule.spread);
        // Without a server process to read, the rule's least is written and nothing judged.
        if warmed.steady || (pid.is_none() && warmed.chunks >= rule.settle) {
            break;
        }
    }
    store.reset().await.with_context(|| format!("emptying {kind} after its warm-up"))?;
    warmed.seconds = t0.elapsed().as_secs_f64();
    info!("warm-up: {}", line(&warmed));
    Ok(warmed)
}

/// Writes batches of new messages (ids from `next_id` on, which it moves past the last one),
/// `in_flight` at a time, for the rule's chunk time; returns how many it wrote.
async fn write_chunk(store: &dyn pipeline_stores::Store, next_id: &mut usize, rule: Rule) -> anyhow::Result<usize> {
    let first = *next_id;
    use futures::stream::{self, StreamExt, TryStreamExt};
    let kind = store.kind();
    let until = Instant::now() + std::time::Duration::from_secs_f64(rule.chunk_s);
    let sizes = if rule.batches.is_empty() { &[1][..] } else { rule.batches };
    // Batch i starts at id first + i × the largest size: ids stay unique whatever the mix.
    let stride = sizes.iter().copied().max().unwrap_or(1).max(1);
    let written: Vec<usize> = stream::iter((0..).map(|i| (first + i * stride, sizes[i % sizes.len()].max(1))))
        .take_while(|_| std::future::ready(Instant::now() < until))
        .map(|(from, batch)| async move {
            let msgs = messages(kind, from, batch);
            let refused = store.write(&msgs, Overwrite::Older).await.with_context(|| format!("warming {kind}"))?;
            anyhow::ensure!(
                refused.is_empty(),
                "{kind} refused {} warm-up messages: {:?}",
                refused.len(),
                refused.first()
            );
            Ok(msgs.len())
        })
        .buffer_unordered(rule.in_flight.max(1))
        .try_collect()
        .await?;
    *next_id = first + written.len() * stride;
    Ok(written.iter().sum())
}

/// Messages like the load's (~150 bytes of body), numbered from `from`.
fn messages(kind: StoreKind, from: usize, n: usize) -> Vec<pipeline_common::Message> {
    let now = pipeline_common::message::normalize_sent_at(time::OffsetDateTime::now_utc());
    (from..from + n)
        .map(|i| pipeline_common::Message {
            id: format!("warm-{kind}-{i:09}"),
            sender: format!("user-{}", i % 97),
            recipient: format!("user-{}", i % 89),
            body: format!("warm-up message {i}: {}", "lorem ipsum ".repeat(10)),
            sent_at: now,
            version: 1,
        })
        .collect()
}

/// One store's warm-up in words, for the log and the report.
pub(crate) fn line(w: &Warmed) -> String {
    let label = StoreKind::ALL.iter().find(|k| k.name() == w.store).map(|k| k.label()).unwrap_or(&w.store);
    let each: Vec<String> = w.server_us.iter().map(|u| format!("{u:.0}")).collect();
    let cpu = if each.is_empty() {
        "server CPU not read (no pid file)".to_string()
    } else {
        format!("server CPU per message {} µs", each.join(" → "))
    };
    let verdict = match (w.steady, w.server_us.is_empty()) {
        (true, _) => "steady",
        (false, true) => "not judged",
        (false, false) => "NOT steady",
    };
    format!("{label}: {} messages in {} chunks of {:.0} s, {cpu}: {verdict}", w.messages, w.chunks, w.chunk_s)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_is_when_the_server_stopped_getting_cheaper() {
        // A JVM settling: falling, then flat.
        let r = [343.0, 250.0, 190.0, 165.0, 160.0, 158.0, 159.0, 157.0, 161.0];
        assert!(!steady(&r[..5], 3, 0.15), "too few readings for two windows");
        assert!(!steady(&r[..6], 3, 0.15), "median 250 → 160: still falling");
        assert!(!steady(&r[..7], 3, 0.15), "median 190 → 159");
        assert!(steady(&r[..8], 3, 0.15), "median 165 → 158: within 15 %");
        assert!(steady(&r, 3, 0.15));
        assert!(steady(&[100.0, 100.0, 100.0, 130.0, 120.0, 140.0], 3, 0.15), "dearer is not colder");
        assert!(!steady(&[0.0; 6], 3, 0.15), "no CPU read is not a reading");
        assert!(!steady(&r, 0, 0.15));
        // OpenSearch's first chunks on a fresh stack (2026-12-03): noisy, but no longer
        // falling from the seventh on (medians 100 → 87).
        let es = [375.0, 170.0, 100.0, 76.0, 136.0, 87.0, 77.0, 97.0, 75.0];
        assert!(!steady(&es[..6], 3, 0.15), "median 170 → 87");
        assert!(steady(&es[..7], 3, 0.15));
    }

    #[test]
    fn a_line_names_every_reading_and_the_verdict() {
        let w = Warmed {
            store: "es".into(),
            chunk_s: 2.0,
            messages: 23_000,
            server_us: vec![300.0, 180.0, 170.0, 165.0],
            chunks: 4,
            steady: true,
            seconds: 8.4,
        };
        assert_eq!(
            line(&w),
            "Elasticsearch: 23000 messages in 4 chunks of 2 s, server CPU per message 300 → 180 → 170 → 165 µs: steady"
        );
        let blind = Warmed { server_us: vec![], steady: false, ..w.clone() };
        assert!(line(&blind).ends_with("server CPU not read (no pid file): not judged"));
        let never = Warmed { steady: false, ..w };
        assert!(line(&never).ends_with("NOT steady"));
    }
}
