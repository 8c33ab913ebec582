//! `experiment prefill`: adds N messages to every store the way production would, through
//! Kafka and the writer (a produced backlog the writer drains, not k6), so that rounds run with
//! `--keep-stores` measure the pipeline against stores that already hold millions of messages.
//!
//! The stores must agree on their count before (so "before + N" is what each must hold after);
//! the writer is the one the rounds use, with the same topic and group, so its offsets are
//! committed past the backlog when it stops and the next round's writer starts where it ended.
//! Evidence in OUT/: `prefill.json` (counts before and after, seconds, CPU per message of the
//! writer and of each server while draining), the producer's and the writer's logs, the counts.

use crate::args::{Common, Places};
use crate::backlog;
use crate::procs::{self, Launch};
use anyhow::Context;
use clap::Args;
use pipeline_common::procstat::cpu_seconds;
use pipeline_common::reconcile_report::Answer;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::info;

#[derive(Args, Clone, Debug)]
pub(crate) struct PrefillArgs {
    /// Messages to add to every store (ids new: `broker-PID-...`), rounded up to whole records
    /// of 100.
    #[arg(long)]
    pub messages: u32,
    /// Extra writer flags, one string (split at spaces).
    #[arg(long, allow_hyphen_values = true)]
    pub writer_args: Option<String>,
    /// Longest wait for the writer to store the whole backlog, in seconds.
    #[arg(long, default_value_t = 7200)]
    pub drain_timeout: u64,
    /// Evidence folder (default k6/out/prefill-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub places: Places,
}

/// `prefill.json`.
#[derive(Debug, Serialize)]
struct Filled {
    before: u64,
    added: u64,
    after: u64,
    /// From the writer's start until reconcile counted `after` in every store.
    seconds: f64,
    /// CPU µs per message added, while draining: the writer and each server.
    cpu_us_per_msg: BTreeMap<String, f64>,
}

/// Servers up and binaries built unless told not to (as a run does), then the fill.
pub(crate) async fn run(args: &PrefillArgs) -> anyhow::Result<bool> {
    let common = &args.common;
    let root = crate::paths::root(common.root.as_deref())?;
    let _lock = crate::run::lock_for(common)?;
    let bins = crate::run::prepare(common, &root, &["writer", "reconcile"])?;
    let producer = crate::bench::examples(common, &root, &["broker_batches"])?.join("broker_batches");
    let out = args.out.clone().unwrap_or_else(|| root.join("k6/out").join(format!("prefill-{}", crate::run::stamp())));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    let before = agreed_count(&bins, &out, "before").await?;
    info!("prefill: every store holds {before}; producing {} messages", backlog::whole_records(args.messages)?);
    let added = backlog::produce(&producer, args.messages, &[], &root, &out.join("produce.log")).await?;
    let servers = procs::server_pids(&root);
    let cpu = |pid| cpu_seconds(Some(pid)).unwrap_or(0.0);
    let cpu0: Vec<f64> = servers.iter().map(|(_, p)| cpu(*p)).collect();
    let t0 = Instant::now();
    let writer_args = crate::args::words(args.writer_args.as_deref().unwrap_or_default());
    let env = [("WRITER_METRICS_ADDR".to_string(), args.places.writer_metrics_addr.clone())];
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().context("HTTP client")?;
    let launch = Launch {
        name: "writer",
        bin: &bins.join("writer"),
        args: &writer_args,
        env: &env,
        log: &out.join("writer.log"),
        base: &format!("http://{}", args.places.writer_metrics_addr),
        ready: "/healthz",
        timeout: Duration::from_secs(90),
    };
    let writer = procs::start(&http, launch).await?;
    let after = before + u64::from(added);
    let (expect, drain) = (after.to_string(), args.drain_timeout.to_string());
    let count = ["--drain-timeout", &drain, "count", "--expect", &expect];
    let code = procs::reconcile(&bins, &[], &count, &out.join("after.json"), &out.join("after.log")).await?;
    let seconds = t0.elapsed().as_secs_f64();
    let wcpu = cpu(writer.pid);
    let cpu1: Vec<f64> = servers.iter().map(|(_, p)| cpu(*p)).collect();
    writer.stop(Duration::from_secs(30)).await;
    anyhow::ensure!(code == Some(0), "the stores do not hold {after} each; see {}", out.join("after.log").display());

    let per_msg = |s: f64| s * 1e6 / f64::from(added.max(1));
    let mut cpu_us_per_msg = BTreeMap::from([("writer".to_string(), per_msg(wcpu))]);
    for (((name, _), a), b) in servers.iter().zip(cpu0).zip(cpu1) {
        cpu_us_per_msg.insert(name.clone(), per_msg(b - a));
    }
    let filled = Filled { before, added: added.into(), after, seconds, cpu_us_per_msg };
    crate::round::write_json(&out.join("prefill.json"), &filled)?;
    info!(
        "prefill: every store holds {after} ({:.0} messages/s); evidence in {}",
        f64::from(added) / seconds,
        out.display()
    );
    Ok(true)
}

/// The one count every store holds (`reconcile count`, drained first); an error when they
/// differ, since then no "before + N" is right for all of them.
async fn agreed_count(bins: &Path, out: &Path, name: &str) -> anyhow::Result<u64> {
    let (json, log) = (out.join(format!("{name}.json")), out.join(format!("{name}.log")));
    let code = procs::reconcile(bins, &[], &["count"], &json, &log).await?;
    let text = std::fs::read_to_string(&json).with_context(|| format!("reading {}", json.display()))?;
    let v = Answer::parse(&text).with_context(|| format!("{} is not reconcile's JSON", json.display()))?;
    let counts: Vec<u64> = v.totals().into_iter().flat_map(|t| &t.stores).map(|s| s.count).collect();
    match counts.first() {
        Some(&n)
            if code == Some(0)
                && counts.len() == crate::procs::stores().kinds().len()
                && counts.iter().all(|&c| c == n) =>
        {
            Ok(n)
        }
        _ => anyhow::bail!(
            "the stores do not agree on a count ({counts:?}; see {}): `reconcile repair` or `reconcile reset` first",
            log.display()
        ),
    }
}
