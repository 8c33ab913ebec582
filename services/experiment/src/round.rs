//! One round: a fresh writer with the policy's flags, `reconcile reset`, a fresh ingest, k6
//! (warm-up, then the measured phase), an id-level `reconcile count` against k6's accepted ids,
//! boot ids read at the start and again at the end, and the 1 s sampler throughout.
//!
//! A round records what happened (`round.json`) and leaves the raw evidence beside it; it does
//! not judge itself. The gates are applied by the report, from the files alone, so a re-render
//! of an old evidence folder judges it by the same rules.

use crate::faults::RoundFault;
use crate::k6::{self, K6Job, K6Run};
use crate::plan::{LoadKind, Plan, Slot};
use crate::procs::{self, Launch, Service};
use crate::sampler::Sampler;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Everything a round needs that does not change between rounds.
pub(crate) struct Ctx {
    pub http: reqwest::Client,
    pub root: PathBuf,
    pub bins: PathBuf,
    pub k6: PathBuf,
    pub plan: Plan,
    /// `host:port` of the writer's /metrics and of the ingest.
    pub writer_addr: String,
    pub ingest_addr: String,
    /// Short and unique per experiment: k6 message ids start with it (ids are cut at 64 chars).
    pub tag: String,
    pub servers: Vec<(String, u32)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ProcRecord {
    pub command: Vec<String>,
    pub pid: u32,
    pub ready_s: f64,
}

/// Boot ids read from `/healthz`: at the start of the round and after reconcile. An end value
/// that is not a boot id says why (`unreachable: ...`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Boots {
    pub writer_start: Option<String>,
    pub ingest_start: Option<String>,
    pub writer_end: Option<String>,
    pub ingest_end: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct FaultRecord {
    pub kind: Option<RoundFault>,
    pub at_s: f64,
    pub detail: String,
}

/// `round.json`: what the round did and when (seconds since its start).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct RoundRecord {
    pub slot: Option<Slot>,
    pub load: Option<LoadKind>,
    pub writer_args: Vec<String>,
    pub started_at: String,
    pub writer: Option<ProcRecord>,
    pub ingest: Option<ProcRecord>,
    pub boots: Boots,
    pub reset_exit: Option<i32>,
    pub reset_s: Option<(f64, f64)>,
    pub k6: Option<K6Run>,
    pub reconcile_exit: Option<i32>,
    pub reconcile_s: Option<(f64, f64)>,
    pub fault: Option<FaultRecord>,
    /// The round's condition: every delayed store's proxy and what it did.
    #[serde(default)]
    pub conditions: Vec<crate::condition::proxy::ProxyStats>,
    /// A step that failed before the load could run (the round is invalid with this reason).
    pub setup_error: Option<String>,
    /// Set in the `round.json` written once the load is over, cleared in the one written at the
    /// round's end: a runner stopped during a long reconcile (after an hour's soak, millions of
    /// ids) still leaves a record the report reads, marked as unfinished rather than lost.
    #[serde(default)]
    pub unfinished: Option<String>,
    pub stops: Vec<String>,
    pub servers: Vec<(String, u32)>,
    pub timeline_rows: u64,
    pub ended_s: f64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RoundError {
    #[error("round folder {0}: {1}")]
    Io(String, std::io::Error),
    #[error(transparent)]
    Sampler(#[from] crate::sampler::SampleError),
    #[error(transparent)]
    K6(#[from] crate::k6::K6Error),
}

pub(crate) fn dir_name(slot: &Slot) -> String {
    format!("{:02}-{}-{}", slot.index, crate::plan::Plan::label(slot), slot.point)
}

/// Runs one round into `dir`. Only an unusable folder, k6 or sampler is an error; anything the
/// pipeline does wrong is recorded for the gates.
pub(crate) async fn run(ctx: &Ctx, slot: &Slot, dir: &Path) -> Result<RoundRecord, RoundError> {
    std::fs::create_dir_all(dir).map_err(|e| RoundError::Io(dir.display().to_string(), e))?;
    let t0 = Instant::now();
    let mut rec = RoundRecord {
        slot: Some(slot.clone()),
        load: Some(ctx.plan.load),
        started_at: now_rfc3339(),
        servers: ctx.servers.clone(),
        ..RoundRecord::default()
    };
    let every = Duration::from_secs(ctx.plan.sample_every_s.max(1));
    let sampler = Sampler::start(&dir.join("timeline.csv"), t0, ctx.http.clone(), every)?;
    for (name, pid) in &ctx.servers {
        sampler.add_proc(name, *pid);
    }
    if ctx.plan.window_s().is_some() {
        for (name, path) in procs::server_data(&ctx.root) {
            sampler.add_dir(&name, &path);
        }
    }
    let conditions = match ctx.plan.delays_of(slot) {
        Ok(d) => crate::condition::Conditions::start(&d).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let (writer, ingest) = match &conditions {
        Ok(c) => steps(ctx, slot, dir, t0, &sampler, &mut rec, &c.writer_env).await?,
        Err(e) => {
            rec.setup_error = Some(format!("store delay proxies: {e}"));
            (None, None)
        }
    };
    rec.boots.writer_end = Some(end_boot(&ctx.http, &format!("http://{}", ctx.writer_addr)).await);
    rec.boots.ingest_end = Some(end_boot(&ctx.http, &format!("http://{}", ctx.ingest_addr)).await);
    rec.timeline_rows = sampler.finish().await?;
    // The next round's processes must be new ones: stop these (ingest first: no new input).
    if let Some(s) = ingest {
        rec.stops.push(format!("ingest {}", s.stop(Duration::from_secs(15)).await));
    }
    if let Some(s) = writer {
        rec.stops.push(format!("writer {}", s.stop(Duration::from_secs(40)).await));
    }
    if let Ok(c) = conditions {
        rec.conditions = c.stop();
    }
    rec.ended_s = t0.elapsed().as_secs_f64();
    rec.unfinished = None;
    write_json(&dir.join("round.json"), &rec)?;
    Ok(rec)
}

/// The steps up to reconcile; returns the services still to stop.
async fn steps(
    ctx: &Ctx,
    slot: &Slot,
    dir: &Path,
    t0: Instant,
    sampler: &Sampler,
    rec: &mut RoundRecord,
    condition_env: &[(String, String)],
) -> Result<(Option<Service>, Option<Service>), RoundError> {
    // The plan's flags first, the policy's after: where a flag may be given twice (the writer's
    // `--pool-job-max`), the policy's own value wins over the plan-wide one.
    let mut writer_args = ctx.plan.writer_args.clone();
    match ctx.plan.policy_def(&slot.policy) {
        Ok(p) => writer_args.extend(p.writer_args),
        Err(e) => {
            rec.setup_error = Some(e.to_string());
            return Ok((None, None));
        }
    };
    rec.writer_args = writer_args.clone();
    let cmd = WriterCmd { args: &writer_args, env: condition_env };
    let mut writer = match start_writer(ctx, dir, t0, sampler, &cmd, "writer.log").await {
        Ok((s, r)) => {
            rec.writer = Some(r);
            s
        }
        Err(e) => {
            rec.setup_error = Some(format!("writer: {e}"));
            return Ok((None, None));
        }
    };
    rec.boots.writer_start = procs::boot_id(&ctx.http, &writer.base).await.ok();

    if !ctx.plan.keep_stores {
        let r0 = t0.elapsed().as_secs_f64();
        let code = reconcile(ctx, dir, &["reset", "--yes"], "reset.json", "reset.log").await?;
        rec.reset_exit = code;
        rec.reset_s = Some((r0, t0.elapsed().as_secs_f64()));
        if code != Some(0) {
            rec.setup_error = Some(format!("reconcile reset exited {code:?} (see reset.json, reset.log)"));
            return Ok((Some(writer), None));
        }
    }

    let mut ingest_env = vec![("INGEST_LISTEN".to_string(), ctx.ingest_addr.clone())];
    ingest_env.extend(crate::paths::lab_key_env(&ctx.root));
    let base = format!("http://{}", ctx.ingest_addr);
    let bin = ctx.bins.join("ingest");
    let log = dir.join("ingest.log");
    let launch = Launch {
        name: "ingest",
        bin: &bin,
        args: &ctx.plan.ingest_args,
        env: &ingest_env,
        log: &log,
        base: &base,
        ready: "/readyz",
        timeout: Duration::from_secs(60),
    };
    let started = procs::start(&ctx.http, launch).await;
    let ingest = match started {
        Ok(s) => s,
        Err(e) => {
            rec.setup_error = Some(format!("ingest: {e}"));
            return Ok((Some(writer), None));
        }
    };
    sampler.add_proc("ingest", ingest.pid);
    sampler.add_url("ingest", &format!("{base}/metrics"));
    let mut command = vec![bin.display().to_string()];
    command.extend(ctx.plan.ingest_args.iter().cloned());
    rec.ingest = Some(ProcRecord { command, pid: ingest.pid, ready_s: t0.elapsed().as_secs_f64() });
    rec.boots.ingest_start = procs::boot_id(&ctx.http, &base).await.ok();

    let run_id = format!("{}r{:02}", ctx.tag, slot.index);
    let job = K6Job {
        k6: &ctx.k6,
        root: &ctx.root,
        dir,
        ingest_url: &base,
        plan: &ctx.plan,
        point: slot.point,
        run_id: run_id.clone(),
    };
    // The ingest's histograms when the measured phase starts and when it ends (crate::stages).
    let measured_from = Duration::from_secs_f64(k6::measured_offset(&ctx.plan));
    let first_reading = async {
        tokio::time::sleep(measured_from).await;
        crate::stages::read(&ctx.http, &base, dir, crate::stages::START).await;
    };
    let probe = async {
        if let Some(rate) = ctx.plan.broker_beside {
            let secs = crate::duration::seconds(&ctx.plan.duration).unwrap_or(60.0);
            let (bins, root) = (ctx.bins.as_path(), ctx.root.as_path());
            crate::beside::run(crate::beside::Probe { bins, root, dir, rate, from: measured_from, secs }).await;
        }
    };
    let (k6_run, fault, (), ()) = tokio::join!(
        k6::run(&job, t0, sampler),
        fault(ctx, dir, t0, sampler, slot.fault, writer.pid, &cmd),
        first_reading,
        probe
    );
    crate::stages::read(&ctx.http, &base, dir, crate::stages::END).await;
    rec.k6 = Some(k6_run?);
    if let Some((f, new_writer)) = fault {
        rec.fault = Some(f);
        if let Some(w) = new_writer {
            rec.stops.push(format!(
                "writer (killed by the fault) {}",
                std::mem::replace(&mut writer, w).stop(Duration::from_secs(1)).await
            ));
        }
    }

    let c0 = t0.elapsed().as_secs_f64();
    rec.unfinished = Some(format!("stopped during the final reconcile, started {c0:.0} s into the round"));
    write_json(&dir.join("round.json"), rec)?;
    let summary = k6::summary_path(dir).display().to_string();
    let drain = ctx.plan.drain_timeout_s.to_string();
    // k6 ids begin with the run id: with the stores kept, only this round's are judged.
    let prefix = format!("{run_id}-");
    let mut args = vec!["--drain-timeout", &drain, "count", "--expect-from", &summary];
    if ctx.plan.keep_stores {
        args.extend(["--only-prefix", &prefix]);
    }
    rec.reconcile_exit = reconcile(ctx, dir, &args, "reconcile.json", "reconcile.log").await?;
    rec.reconcile_s = Some((c0, t0.elapsed().as_secs_f64()));
    Ok((Some(writer), Some(ingest)))
}

/// How a round's writer is started: the policy's flags, and the condition's environment (the
/// store links through the slow-store proxies).
struct WriterCmd<'a> {
    args: &'a [String],
    env: &'a [(String, String)],
}

async fn start_writer(
    ctx: &Ctx,
    dir: &Path,
    t0: Instant,
    sampler: &Sampler,
    cmd: &WriterCmd<'_>,
    log: &str,
) -> Result<(Service, ProcRecord), procs::ProcError> {
    let args = cmd.args;
    let mut env = cmd.env.to_vec();
    env.push(("WRITER_METRICS_ADDR".to_string(), ctx.writer_addr.clone()));
    let base = format!("http://{}", ctx.writer_addr);
    let bin = ctx.bins.join("writer");
    let log = dir.join(log);
    let launch = Launch {
        name: "writer",
        bin: &bin,
        args,
        env: &env,
        log: &log,
        base: &base,
        ready: "/healthz",
        timeout: Duration::from_secs(90),
    };
    let s = procs::start(&ctx.http, launch).await?;
    sampler.add_proc("writer", s.pid);
    sampler.add_url("writer", &format!("{base}/metrics"));
    let mut command = vec![bin.display().to_string()];
    command.extend(args.iter().cloned());
    let pid = s.pid;
    Ok((s, ProcRecord { command, pid, ready_s: t0.elapsed().as_secs_f64() }))
}

/// The plan's deliberate fault, halfway through k6's measured phase.
async fn fault(
    ctx: &Ctx,
    dir: &Path,
    t0: Instant,
    sampler: &Sampler,
    kind: Option<RoundFault>,
    writer_pid: u32,
    writer: &WriterCmd<'_>,
) -> Option<(FaultRecord, Option<Service>)> {
    let kind = kind?;
    // Called as k6 starts: `at_s` counts from now.
    let at_s = k6::measured_offset(&ctx.plan) + 1.0 + crate::duration::seconds(&ctx.plan.duration).unwrap_or(0.0) / 2.0;
    tokio::time::sleep(Duration::from_secs_f64(at_s.max(0.0))).await;
    let at = t0.elapsed().as_secs_f64();
    let killed = procs::signal(writer_pid, nix::sys::signal::Signal::SIGKILL);
    let mut detail = format!("SIGKILL writer pid {writer_pid}: {}", if killed { "sent" } else { "FAILED" });
    let mut new = None;
    if kind == RoundFault::RestartWriter {
        // Give the kernel a moment to release the metrics port of the killed process.
        tokio::time::sleep(Duration::from_millis(500)).await;
        match start_writer(ctx, dir, t0, sampler, writer, "writer-restarted.log").await {
            Ok((s, r)) => {
                detail.push_str(&format!("; restarted as pid {}", r.pid));
                new = Some(s);
            }
            Err(e) => detail.push_str(&format!("; restart failed: {e}")),
        }
    }
    Some((FaultRecord { kind: Some(kind), at_s: at, detail }, new))
}

/// Runs `reconcile --json ARGS` with stdout in `out` and stderr in `log`; its exit code.
async fn reconcile(ctx: &Ctx, dir: &Path, args: &[&str], out: &str, log: &str) -> Result<Option<i32>, RoundError> {
    let (out, log) = (dir.join(out), dir.join(log));
    procs::reconcile(&ctx.bins, &[], args, &out, &log).await.map_err(|e| RoundError::Io(out.display().to_string(), e))
}

async fn end_boot(http: &reqwest::Client, base: &str) -> String {
    match procs::boot_id(http, base).await {
        Ok(id) => id,
        Err(e) => format!("unreachable: {e}"),
    }
}

pub(crate) fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

pub(crate) fn write_json(path: &Path, v: &impl Serialize) -> Result<(), RoundError> {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    std::fs::write(path, text + "\n").map_err(|e| RoundError::Io(path.display().to_string(), e))
}
