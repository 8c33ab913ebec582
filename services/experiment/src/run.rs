//! A whole experiment: the lock, the stack, the build, the evidence folder (`plan.toml`,
//! `env.json`), every round in schedule order, then the report.

use crate::args::{Common, RunArgs};
use crate::round::{self, Ctx};
use anyhow::{bail, Context};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// Why the run could not happen (exit code 2 for a bad plan, 3 for the rest).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Holds the machine-wide lock for the whole run: load runs must never overlap on 2 cores, and
/// they share ports and the default store namespace with `experiment chaos` and scripts/run.
fn lock(path: &Path, wait: Duration) -> anyhow::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let start = Instant::now();
    let mut said = false;
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < wait => {
                if !said {
                    info!("another load run holds {}; waiting (at most {} s)", path.display(), wait.as_secs());
                    said = true;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                bail!("{} still locked after {} s", path.display(), wait.as_secs())
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
    }
}

/// Runs one preparation command in the checkout, its output on ours.
pub(crate) fn step(root: &Path, what: &str, cmd: &str, args: &[&str]) -> anyhow::Result<()> {
    info!("{what}: {cmd} {}", args.join(" "));
    let st = Command::new(cmd).args(args).current_dir(root).status().with_context(|| format!("starting {cmd}"))?;
    if !st.success() {
        bail!("{what} failed ({st}); output above");
    }
    Ok(())
}

/// `YYYYMMDD-HHMMSS` (UTC), for evidence folder names.
pub(crate) fn stamp() -> String {
    let fmt = time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    time::OffsetDateTime::now_utc().format(&fmt).unwrap_or_else(|_| "now".into())
}

/// The machine-wide load lock, held until dropped.
pub(crate) fn lock_for(common: &Common) -> anyhow::Result<File> {
    let path = common.lock.clone().unwrap_or_else(|| crate::paths::cache_dir().join("load.lock"));
    lock(&path, Duration::from_secs(common.lock_wait))
}

/// The servers up and `bins` built (unless told otherwise); the folder that holds them.
pub(crate) fn prepare(common: &Common, root: &Path, bins: &[&str]) -> anyhow::Result<PathBuf> {
    if !common.no_stack {
        step(root, "servers", "scripts/stack", &["up"])?;
    }
    if !common.no_build {
        // The one build of every entry point (scripts/build): a build here after scripts/run or
        // scripts/bench finds everything fresh.
        step(root, "build", "scripts/build", &[common.profile.as_str()])?;
    }
    let dir = common.bin_dir.clone().unwrap_or_else(|| root.join("target").join(&common.profile));
    for b in bins {
        if !dir.join(b).exists() {
            bail!("no {} binary in {} (build it, or drop --no-build)", b, dir.display());
        }
    }
    Ok(dir)
}

/// Runs the plan; returns the evidence folder and whether every round was valid.
pub(crate) async fn run(args: &RunArgs) -> Result<(PathBuf, bool), RunError> {
    run_in(args, None).await
}

/// [`run`], inside a caller that already holds the load lock (`held`): `experiment bench` runs
/// its references and its pipeline runs under one hold, so no other load run slips in between.
pub(crate) async fn run_in(args: &RunArgs, held: Option<&File>) -> Result<(PathBuf, bool), RunError> {
    let common = &args.common;
    let root = crate::paths::root(common.root.as_deref()).map_err(anyhow::Error::from)?;
    let file = match &args.plan {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?),
        None => None,
    };
    let plan = args.plan(file.as_deref())?;
    plan.validate()?;
    let out = args.out.clone().unwrap_or_else(|| root.join("k6/out").join(format!("experiment-{}", stamp())));
    if out.join("plan.toml").exists() {
        return Err(anyhow::anyhow!("{} already holds an experiment; choose another --out", out.display()).into());
    }
    std::fs::create_dir_all(out.join("rounds")).with_context(|| format!("creating {}", out.display()))?;
    // Absolute: k6 runs in the checkout, reconcile here, and both read the paths the other wrote.
    let out = out.canonicalize().with_context(|| format!("resolving {}", out.display()))?;
    let _lock = match held {
        Some(_) => None,
        None => Some(lock_for(common)?),
    };
    let bins = prepare(common, &root, &["writer", "ingest", "reconcile"])?;
    let k6 = crate::paths::k6(common.k6.as_deref()).map_err(anyhow::Error::from)?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().context("HTTP client")?;
    // Someone else's writer or ingest on our addresses would be measured instead of ours (the
    // reference's first lesson): refuse to start rather than mark every round invalid.
    for addr in [&args.places.writer_metrics_addr, &args.places.ingest_listen] {
        if http.get(format!("http://{addr}/healthz")).send().await.is_ok() {
            return Err(anyhow::anyhow!(
                "something already answers http://{addr}/healthz (another writer or ingest?): stop it, or use \
                 --writer-metrics-addr / --ingest-listen (and a private store namespace)"
            )
            .into());
        }
    }

    std::fs::write(out.join("plan.toml"), plan.to_toml()).context("writing plan.toml")?;
    let env = crate::envinfo::collect(&http, &root, &bins, &k6, &common.profile).await;
    round::write_json(&out.join("env.json"), &env).map_err(anyhow::Error::from)?;
    if plan.warm_servers {
        info!("warming every store's server until its CPU per message is steady (--no-warm-servers skips)");
        let warmed = crate::warm::run(&root, crate::warm::Rule::default()).await.context("warming the servers")?;
        round::write_json(&out.join(crate::warm::FILE), &warmed).map_err(anyhow::Error::from)?;
    }
    let servers = crate::procs::server_pids(&root);
    if servers.len() < 5 {
        warn!("sampling {} of the 5 servers' CPU ({:?}); the others' pid files were not found", servers.len(), servers);
    }
    let tag = format!("x{:x}", time::OffsetDateTime::now_utc().unix_timestamp() % 0xFF_FFFF);
    let ctx = Ctx {
        http,
        root: root.clone(),
        bins,
        k6,
        plan: plan.clone(),
        writer_addr: args.places.writer_metrics_addr.clone(),
        ingest_addr: args.places.ingest_listen.clone(),
        tag,
        servers,
    };
    let schedule = plan.schedule();
    if plan.warming_round() {
        // The stores' warm-up leaves OpenSearch dearer in the first round than in the second
        // (docs/results/performance-log.md, "Fresh servers and warm ones"): the first slot runs once more,
        // unmeasured, so every measured round follows a whole round of the pipeline.
        if let Some(first) = schedule.first() {
            // Round 0, with no fault: its own k6 run id, so no id of it reappears in round 1.
            let first = crate::plan::Slot { index: 0, fault: None, ..first.clone() };
            let first = &first;
            let dir = out.join(crate::warm::ROUND_DIR);
            info!("warming round: policy {} at {}, not measured ({})", first.policy, first.point, dir.display());
            let rec = round::run(&ctx, first, &dir).await.map_err(anyhow::Error::from)?;
            info!(
                "warming round done in {:.0} s: k6 exit {:?}, reconcile exit {:?}",
                rec.ended_s,
                rec.k6.as_ref().and_then(|k| k.exit_code),
                rec.reconcile_exit
            );
        }
    }
    info!("{} rounds; evidence in {}", schedule.len(), out.display());
    for slot in &schedule {
        let dir = out.join("rounds").join(round::dir_name(slot));
        info!("round {}/{}: policy {} at {} ({})", slot.index, schedule.len(), slot.policy, slot.point, dir.display());
        let rec = round::run(&ctx, slot, &dir).await.map_err(anyhow::Error::from)?;
        info!(
            "round {} done in {:.0} s: k6 exit {:?}, reconcile exit {:?}{}",
            slot.index,
            rec.ended_s,
            rec.k6.as_ref().and_then(|k| k.exit_code),
            rec.reconcile_exit,
            rec.setup_error.as_ref().map(|e| format!(", SETUP FAILED: {e}")).unwrap_or_default()
        );
    }
    let all_valid = crate::report::write_report(&out, args.places.font.as_deref())?;
    Ok((out, all_valid))
}
