//! `experiment bench`: the performance figures in one go, on this machine, back to back, as one
//! table (docs/guides/experiment.md, "The performance figures", explains each column). Release builds unless told otherwise.
//!
//! 1. The load generator's own limit: k6 against a server that only answers 202
//!    (`ingest/examples/null_202.rs`), single POSTs and batch POSTs.
//! 2. Each server alone: every store of the registry with batches, some in flight
//!    (`stores/examples/store_batches.rs`, after an unmeasured quarter of the work so a server that
//!    compiles as it serves is warm), and the broker, produced then consumed as the ingest and the
//!    writer use it (`ingest/examples/broker_batches.rs`); the server's CPU from /proc.
//! 3. The pipeline: the reference's protocol (single POSTs, closed loop, warm-up) and batches,
//!    each a one-round experiment: fresh processes, id-level reconcile, gates, CPU per message.
//! 4. Latency, open loop: the pipeline's knee is the single-POST run's accepted rate; the
//!    null-202 server and the broker's own acknowledgement, and the pipeline, each at 5, 50 and
//!    80 % of it (one open-loop experiment, a point per rate), with the pipeline's p99 split by
//!    the ingest's own histograms into its stages (`crate::stages`), and the broker probed beside
//!    each rate's measured phase (`crate::beside`): whose tail it is.
//!
//! Evidence in OUT: results.md, bench.json (the settings), references/ (k6 summaries, example
//! output, CPU per reference), single/, batch/ and open/ (the experiments' evidence folders).
//! `experiment bench --table OUT` prints the table again from the evidence alone.
//!
//! Exit: 0 both pipeline runs valid · 1 a pipeline run failed a gate · 3 could not run.

pub(crate) mod ab;
mod refs;
mod settings;
mod table;

pub(crate) use settings::BenchArgs;

use crate::args::{Common, RunArgs};
use crate::plan::LoadKind;
use anyhow::Context;
use settings::Settings;
use std::path::{Path, PathBuf};
use tracing::info;

/// Runs the bench (or only prints a finished one's table); true when both pipeline runs were valid.
pub(crate) async fn run(args: &BenchArgs) -> anyhow::Result<bool> {
    if let Some(dir) = &args.table {
        print!("{}", table::render(dir)?);
        return Ok(true);
    }
    let common = &args.common;
    let root = crate::paths::root(common.root.as_deref())?;
    let out = args.out.clone().unwrap_or_else(|| root.join("k6/out").join(format!("bench-{}", crate::run::stamp())));
    if out.join("bench.json").exists() {
        anyhow::bail!("{} already holds a bench; choose another --out", out.display());
    }
    std::fs::create_dir_all(out.join("references")).with_context(|| format!("creating {}", out.display()))?;
    let out = out.canonicalize()?;
    let settings = Settings {
        vus: args.vus,
        batch: args.batch,
        batch_vus: args.batch_vus,
        in_flight: args.in_flight,
        records: args.records,
        profiling: args.profiling,
        stores: crate::procs::stores().kinds().iter().map(|k| k.name().to_string()).collect(),
        latency_rates: Vec::new(),
    };
    let save = |s: &Settings| -> anyhow::Result<()> {
        Ok(std::fs::write(out.join("bench.json"), serde_json::to_string_pretty(s)? + "\n")?)
    };
    save(&settings)?;

    let lock = crate::run::lock_for(common)?;
    let bins = crate::run::prepare(common, &root, &["writer", "ingest", "reconcile"])?;
    let examples = examples(common, &root, &["null_202", "broker_batches", "store_batches"])?;
    let k6 = crate::paths::k6(common.k6.as_deref())?;
    let refs = refs::Refs { root: &root, examples: &examples, k6: &k6, dir: &out.join("references") };
    refs.null_202(args).await?;
    refs.servers_alone(args).await?;

    // The pipeline runs: one-round experiments of the writer's defaults, inside our hold of the
    // lock, with the binaries and servers prepared above.
    // Every other flag as a bare `experiment` has it (clap's defaults and the environment).
    let defaults = crate::args::run_defaults()?;
    let inner =
        Common { no_build: true, no_stack: true, bin_dir: Some(bins.clone()), k6: Some(k6.clone()), ..common.clone() };
    // The servers are warmed (and a warming round run) before the first pipeline run only: the
    // later runs follow a whole measured run of the same servers, which is what the warming
    // round stands in for.
    let mut warm = !args.no_warm_servers;
    let mut experiment = |name: &str, load: LoadKind, vus: u32, rates: Option<Vec<u32>>| RunArgs {
        policies: Some(vec!["default".into()]),
        rounds: Some(1),
        load: Some(load),
        vus: Some(vus),
        rates,
        batch: (load == LoadKind::Batch).then_some(args.batch),
        duration: Some(args.duration.clone()),
        warmup: Some(args.warmup.clone()),
        drain_timeout: Some(args.drain_timeout),
        out: Some(out.join(name)),
        no_timing_gates: args.no_timing_gates,
        no_warm_servers: !std::mem::replace(&mut warm, false),
        common: inner.clone(),
        ..defaults.clone()
    };
    let held = &lock;
    let run = |a: RunArgs| async move {
        crate::run::run_in(&a, Some(held)).await.map(|(_, ok)| ok).map_err(|e| match e {
            crate::run::RunError::Plan(e) => anyhow::Error::from(e),
            crate::run::RunError::Other(e) => e,
        })
    };
    let mut valid = true;
    for (name, load, vus) in [("single", LoadKind::Closed, args.vus), ("batch", LoadKind::Batch, args.batch_vus)] {
        info!("pipeline: {name}");
        valid &= run(experiment(name, load, vus, None)).await?;
    }

    // The latency section: rates from the knee this run measured.
    let knee = table::knee(&out.join("single"))?;
    let mut settings = settings;
    settings.latency_rates = [5.0, 50.0, 80.0].iter().map(|p| (knee * p / 100.0).round().max(1.0) as u32).collect();
    save(&settings)?;
    refs.latency(args, &settings.latency_rates).await?;
    info!("pipeline: open loop at {:?} requests/s (5, 50, 80 % of the knee, {knee:.0}/s)", settings.latency_rates);
    // Beside each rate's measured phase, the broker probed lightly: its p99 under the round's
    // load, where the references above are taken alone (crate::beside).
    let mut open = experiment("open", LoadKind::Open, args.vus, Some(settings.latency_rates.clone()));
    open.broker_beside = Some(crate::beside::BENCH_RATE);
    valid &= run(open).await?;
    drop(lock);

    let md = table::render(&out)?;
    std::fs::write(out.join("results.md"), &md)?;
    print!("{md}");
    info!("results: {}", out.join("results.md").display());
    Ok(valid)
}

/// The reference servers and clients (and the writer's backlog producer) are examples of the
/// ingest and store crates: built unless `--no-build`, found in `<bin-dir>/examples`.
pub(crate) fn examples(common: &Common, root: &Path, names: &[&str]) -> anyhow::Result<PathBuf> {
    let dir = common.bin_dir.clone().unwrap_or_else(|| root.join("target").join(&common.profile)).join("examples");
    if !common.no_build {
        // The one build of every entry point (scripts/build) builds the examples too.
        info!("build: scripts/build {}", common.profile);
        let st = std::process::Command::new("scripts/build")
            .arg(&common.profile)
            .current_dir(root)
            .status()
            .context("starting scripts/build")?;
        anyhow::ensure!(st.success(), "building the examples failed ({st}); output above");
    }
    for n in names {
        anyhow::ensure!(dir.join(n).exists(), "no {n} in {} (build it, or drop --no-build)", dir.display());
    }
    Ok(dir)
}
