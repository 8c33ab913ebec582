//! `experiment ab`: two builds (or two sets of flags) against each other, alternating A B A B so
//! that drift of the machine falls on both, one line per run. This is how a change is measured
//! before `experiment bench` accepts it (docs/results/performance-log.md names the command of each figure).
//!
//! - `--part ingest`: the ingest alone under k6, into a topic nobody reads: k6's accepted rate and
//!   latency, CPU per message of the ingest and the broker.
//! - `--part pipeline`: the same with a writer on its own group (the writer of the same folder).
//! - `--part writer`: a backlog of `--messages` produced beforehand (100 to a record, as the ingest
//!   sends them), then the writer timed until reconcile counts every message in every store; CPU
//!   per message of the writer and of every server.
//!
//! Every run has a fresh topic and group; each side writes to a store namespace of its own
//! (`ab_a`, `ab_b`: an older writer refuses a database a newer one migrated), reset before its run.
//! Evidence in OUT (default k6/out/ab-<time>): results.txt and each run's logs.

use crate::args::Common;
use crate::plan::LoadKind;
use crate::procs::{self, Launch, Service};
use crate::stats::num;
use anyhow::{bail, Context};
use pipeline_common::config::KafkaArgs;
use pipeline_common::procstat::cpu_seconds;
use pipeline_stores::StoreArgs;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::info;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    Ingest,
    Pipeline,
    Writer,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct AbArgs {
    /// Folder of build A: its ingest, writer and reconcile (e.g. target/release copied on the old commit).
    pub a: PathBuf,
    /// Folder of build B (may be the same folder, with other --b-args).
    pub b: PathBuf,
    /// What is measured: the ingest alone, the pipeline (ingest and writer), or the writer
    /// draining a produced backlog.
    #[arg(long, value_enum, default_value = "pipeline")]
    pub part: Part,
    /// The k6 load of ingest and pipeline runs: closed (single POSTs, 250 VUs), open (single POSTs
    /// at --rate a second, up to 250 in flight) or batch (20 VUs × 100). An open loop holds the
    /// load fixed, so CPU per message and the tail compare at the same rate; a closed loop's rate
    /// moves with the build, and CPU per message with it.
    #[arg(long, value_enum, default_value = "closed")]
    pub load: LoadKind,
    /// Requests per second of an open-loop run (`--load open`, which needs it).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), required_if_eq("load", "open"))]
    pub rate: Option<u32>,
    /// A/B pairs.
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// k6 duration of an ingest or pipeline run (default 15s for the ingest, 30s for the pipeline).
    #[arg(long)]
    pub duration: Option<String>,
    /// The writer's backlog, in messages (every id new), rounded up to whole records of 100.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u32,
    /// Extra flags for A's measured service (the ingest; the writer with --part writer), one string.
    #[arg(long, allow_hyphen_values = true, default_value = "")]
    pub a_args: String,
    /// Extra flags for B's measured service, one string.
    #[arg(long, allow_hyphen_values = true, default_value = "")]
    pub b_args: String,
    /// Where each run's ingest listens.
    #[arg(long, env = "AB_INGEST_LISTEN", default_value = "127.0.0.1:18089")]
    pub ingest_listen: String,
    /// Where each run's writer serves /metrics and /healthz.
    #[arg(long, env = "AB_WRITER_METRICS_ADDR", default_value = "127.0.0.1:19466")]
    pub writer_metrics_addr: String,
    /// Evidence folder (default k6/out/ab-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// k6, the checkout, the lock; the build flags say where the backlog producer (an example
    /// of this checkout) is built, not A or B.
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub stores: StoreArgs,
}

impl AbArgs {
    /// What clap cannot say: a rate is only for an open loop (a closed one sets its own).
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.rate.is_some() && self.load != LoadKind::Open {
            bail!("--rate is the open loop's (--load open); a closed or batch load sets its own rate");
        }
        Ok(())
    }
}

struct Side<'a> {
    label: String,
    bins: &'a Path,
    args: Vec<String>,
    stores: StoreArgs,
}

struct Ab<'a> {
    args: &'a AbArgs,
    root: PathBuf,
    k6: PathBuf,
    producer: PathBuf,
    out: PathBuf,
    http: reqwest::Client,
}

/// Runs the pairs, printing and keeping one line per run.
pub(crate) async fn run(args: &AbArgs) -> anyhow::Result<bool> {
    args.check()?;
    let common = &args.common;
    let root = crate::paths::root(common.root.as_deref())?;
    let out = args.out.clone().unwrap_or_else(|| root.join("k6/out").join(format!("ab-{}", crate::run::stamp())));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let _lock = crate::run::lock_for(common)?;
    if !common.no_stack {
        crate::run::step(&root, "servers", "scripts/stack", &["up"])?;
    }
    let mut sides = Vec::new();
    for (name, bins, extra) in [("A", &args.a, &args.a_args), ("B", &args.b, &args.b_args)] {
        for bin in ["ingest", "writer", "reconcile"] {
            anyhow::ensure!(bins.join(bin).exists(), "no {bin} in {} (build {name})", bins.display());
        }
        let mut stores = args.stores.clone();
        pipeline_stores::isolate(&mut stores, &format!("ab_{}", name.to_lowercase()), pipeline_stores::Slot::Bench)
            .await
            .with_context(|| format!("{name}'s namespace in every store"))?;
        sides.push(Side { label: name.into(), bins, args: crate::args::words(extra), stores });
    }
    let producer =
        if args.part == Part::Writer { super::examples(common, &root, &["broker_batches"])? } else { PathBuf::new() };
    let ab = Ab {
        args,
        k6: crate::paths::k6(common.k6.as_deref())?,
        producer: producer.join("broker_batches"),
        out: out.canonicalize()?,
        root,
        http: reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?,
    };
    let mut results = std::fs::File::create(ab.out.join("results.txt"))?;
    let name = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
    let head = format!(
        "experiment ab --part {} --load {}; A={} B={}",
        name(&args.part),
        name(&args.load),
        args.a.display(),
        args.b.display()
    );
    println!("{head}");
    writeln!(results, "{head}")?;
    for r in 1..=args.rounds {
        for side in &sides {
            let line = match args.part {
                Part::Writer => ab.writer(side, r).await?,
                _ => ab.load(side, r).await?,
            };
            println!("{line}");
            writeln!(results, "{line}")?;
        }
    }
    info!("results: {}", ab.out.join("results.txt").display());
    Ok(true)
}

fn per_msg(cpu: f64, n: f64) -> String {
    format!("{:.1}", cpu * 1e6 / n.max(1.0))
}

impl Ab<'_> {
    /// A fresh topic and group; the environment every process of the run gets.
    async fn fresh(&self, side: &Side<'_>, r: u32) -> anyhow::Result<(PathBuf, Vec<(String, String)>)> {
        let tag = format!("ab_{}_{}_{r}", crate::run::stamp(), side.label.to_lowercase());
        let dir = self.out.join(format!("{}{r}", side.label));
        std::fs::create_dir_all(&dir)?;
        pipeline_common::kafka::ensure_topic(&self.args.kafka, &tag, self.args.kafka.partitions).await?;
        let mut env: Vec<(String, String)> = side.stores.env();
        env.extend([
            ("KAFKA_TOPIC".to_string(), tag.clone()),
            ("KAFKA_GROUP".to_string(), format!("{tag}_w")),
            ("WRITER_METRICS_ADDR".to_string(), self.args.writer_metrics_addr.clone()),
        ]);
        Ok((dir, env))
    }

    async fn start(
        &self,
        name: &str,
        side: &Side<'_>,
        args: &[String],
        env: &[(String, String)],
        dir: &Path,
    ) -> anyhow::Result<Service> {
        let (addr, ready) = match name {
            "ingest" => (&self.args.ingest_listen, "/readyz"),
            _ => (&self.args.writer_metrics_addr, "/healthz"),
        };
        let mut env = env.to_vec();
        env.push(("INGEST_LISTEN".into(), self.args.ingest_listen.clone()));
        env.extend(crate::paths::lab_key_env(&self.root));
        let launch = Launch {
            name,
            bin: &side.bins.join(name),
            args,
            env: &env,
            log: &dir.join(format!("{name}.log")),
            base: &format!("http://{addr}"),
            ready,
            timeout: Duration::from_secs(90),
        };
        Ok(procs::start(&self.http, launch).await?)
    }

    /// An ingest or pipeline run: k6 against the side's ingest (and writer).
    async fn load(&self, side: &Side<'_>, r: u32) -> anyhow::Result<String> {
        let (dir, env) = self.fresh(side, r).await?;
        let pipeline = self.args.part == Part::Pipeline;
        let writer = match pipeline {
            true => Some(self.start("writer", side, &[], &env, &dir).await?),
            false => None,
        };
        let ingest = self.start("ingest", side, &side.args, &env, &dir).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let kafka = procs::server_pid(&self.root, "kafka");
        let pids = [Some(ingest.pid), kafka, writer.as_ref().map(|w| w.pid)];
        let cpu0 = pids.map(|p| p.and_then(|p| cpu_seconds(Some(p))).unwrap_or(0.0));
        let default = if pipeline { "30s" } else { "15s" };
        let (summary, ids) = (dir.join("summary.json"), dir.join("ids.log"));
        let base = format!("http://{}", self.args.ingest_listen);
        let mut k6_env = crate::k6::base_env(&self.root, &base, &summary, &ids, &format!("ab{}{r}", side.label));
        k6_env.push(("DURATION".into(), self.args.duration.clone().unwrap_or_else(|| default.into())));
        let script = match (self.args.load, self.args.rate) {
            (LoadKind::Batch, _) => {
                k6_env.extend([("VUS".into(), "20".into()), ("BATCH".into(), "100".into())]);
                "k6/batch.js"
            }
            (LoadKind::Open, Some(rate)) => {
                k6_env.extend([
                    ("RATE".into(), rate.to_string()),
                    ("PRE_VUS".into(), "50".into()),
                    ("MAX_VUS".into(), "250".into()),
                    ("WARMUP_ROUNDS".into(), "0".into()),
                ]);
                "k6/open-loop.js"
            }
            _ => {
                k6_env.extend([("VUS".into(), "250".into()), ("WARMUP_ROUNDS".into(), "0".into())]);
                "k6/closed-loop.js"
            }
        };
        let status = crate::k6::spawn(&self.k6, &self.root, script, &k6_env, &dir.join("k6.log"))?.wait().await?;
        let cpu1 = pids.map(|p| p.and_then(|p| cpu_seconds(Some(p))).unwrap_or(0.0));
        ingest.stop(Duration::from_secs(10)).await;
        if let Some(w) = writer {
            w.stop(Duration::from_secs(10)).await;
        }
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&summary)
                .with_context(|| format!("k6 ({status}) wrote no summary; see {}", dir.join("k6.log").display()))?,
        )?;
        let n = num(&s, &["accepted"]).unwrap_or(0.0);
        let mut line = format!(
            "{}#{r}: {:.0} msg/s accepted, p50 {:.0} p99 {:.0} ms; CPU µs/msg: ingest {}, kafka {}",
            side.label,
            num(&s, &["measured", "messages_per_s"]).unwrap_or(0.0),
            num(&s, &["measured", "latency_ms", "p50"]).unwrap_or(0.0),
            num(&s, &["measured", "latency_ms", "p99"]).unwrap_or(0.0),
            per_msg(cpu1[0] - cpu0[0], n),
            per_msg(cpu1[1] - cpu0[1], n),
        );
        if pipeline {
            write!(line, ", writer {}", per_msg(cpu1[2] - cpu0[2], n))?;
        }
        if self.args.load == LoadKind::Open {
            // A round that could not keep the rate measured less than it says.
            write!(line, "; dropped {:.0}", num(&s, &["measured", "dropped_iterations"]).unwrap_or(0.0))?;
        }
        Ok(line)
    }

    /// A writer run: the backlog produced, the stores reset, the writer timed until reconcile
    /// counts every message in every store.
    async fn writer(&self, side: &Side<'_>, r: u32) -> anyhow::Result<String> {
        let (dir, env) = self.fresh(side, r).await?;
        let reset =
            procs::reconcile(side.bins, &env, &["reset", "--yes"], &dir.join("reset.json"), &dir.join("reset.log"))
                .await?;
        anyhow::ensure!(reset == Some(0), "reconcile reset exited {reset:?}; see {}", dir.join("reset.log").display());
        // What was produced, not what was asked: whole records of 100.
        let n = crate::backlog::produce(&self.producer, self.args.messages, &env, &self.root, &dir.join("produce.log"))
            .await?;
        let servers = procs::server_pids(&self.root);
        let cpu0: Vec<f64> = servers.iter().map(|(_, p)| cpu_seconds(Some(*p)).unwrap_or(0.0)).collect();
        let t0 = Instant::now();
        let writer = self.start("writer", side, &side.args, &env, &dir).await?;
        let expect = n.to_string();
        let count = ["count", "--expect", &expect, "--drain-timeout", "900"];
        let code = procs::reconcile(side.bins, &env, &count, &dir.join("count.json"), &dir.join("count.log")).await?;
        let secs = t0.elapsed().as_secs_f64();
        let wcpu = cpu_seconds(Some(writer.pid)).unwrap_or(0.0);
        let cpu1: Vec<f64> = servers.iter().map(|(_, p)| cpu_seconds(Some(*p)).unwrap_or(0.0)).collect();
        writer.stop(Duration::from_secs(10)).await;
        anyhow::ensure!(code == Some(0), "reconcile count exited {code:?}; see {}", dir.join("count.log").display());
        let n = f64::from(n);
        let mut line = format!("{}#{r}: {:.0} msg/s; CPU µs/msg: writer {}", side.label, n / secs, per_msg(wcpu, n));
        for (((name, _), c0), c1) in servers.iter().zip(cpu0).zip(cpu1) {
            write!(line, ", {name} {}", per_msg(c1 - c0, n))?;
        }
        Ok(line)
    }
}
