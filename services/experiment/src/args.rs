//! The flags of a run, apart from the command line's shape (`cli.rs`), so that the commands that
//! make runs of their own (bench, soak, chaos, ab) read them without importing the command line.

use crate::plan::{Fault, LoadKind, Plan};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Clone, Debug, Default)]
pub(crate) struct RunArgs {
    /// A plan file (TOML, the format of an evidence folder's plan.toml); flags override it.
    #[arg(long, env = "EXPERIMENT_PLAN")]
    pub plan: Option<PathBuf>,
    /// Write policies, comma separated: A, B, C (the reference's, with its shared pool 12/24/1000/caller-runs),
    /// A-per-store, B-per-store, C-per-store, default (the writer's defaults), or a [policy.NAME] of the plan.
    #[arg(long, value_delimiter = ',')]
    pub policies: Option<Vec<String>>,
    /// Rounds: each policy runs this many times, interleaved (A B C, A B C, ...).
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Closed loop (fixed VUs, the reference's), open loop (fixed arrival rates, see --rates) or batch
    /// (closed loop of batch POSTs, see --batch).
    #[arg(long, value_enum)]
    pub load: Option<LoadKind>,
    /// Closed loop and batch: virtual users.
    #[arg(long)]
    pub vus: Option<u32>,
    /// Batch load: messages per request (`--load batch`).
    #[arg(long)]
    pub batch: Option<u32>,
    /// Open loop: target requests per second, comma separated; several make a gradient.
    #[arg(long, value_delimiter = ',')]
    pub rates: Option<Vec<u32>>,
    /// Open loop: most VUs k6 may use to hold a rate.
    #[arg(long)]
    pub max_vus: Option<u32>,
    /// The measured phase (k6 duration: 60s, 2m).
    #[arg(long)]
    pub duration: Option<String>,
    /// Warm-up before the measured phase, ROUNDSxDURATION (3x10s) or 0.
    #[arg(long)]
    pub warmup: Option<String>,
    /// Shuffle the policy order within each round with this seed.
    #[arg(long)]
    pub shuffle_seed: Option<u64>,
    /// Extra writer flags for every policy, one string (split at spaces).
    #[arg(long, allow_hyphen_values = true)]
    pub writer_args: Option<String>,
    /// Ingest flags for every round, one string (split at spaces).
    #[arg(long, allow_hyphen_values = true)]
    pub ingest_args: Option<String>,
    /// Longest wait for the pipeline to drain before reconcile, in seconds.
    #[arg(long)]
    pub drain_timeout: Option<u64>,
    /// Gate: highest k6 error rate of a valid round (0.001 = 0.1 %).
    #[arg(long)]
    pub max_error_rate: Option<f64>,
    /// Gate (open loop): lowest achieved/target rate of a valid round.
    #[arg(long)]
    pub min_rate_ratio: Option<f64>,
    /// Gate (open loop): most dropped iterations, as a share of the planned ones.
    #[arg(long)]
    pub max_dropped_ratio: Option<f64>,
    /// Gate: highest p99 latency of a valid round, in ms (none by default).
    #[arg(long)]
    pub max_p99_ms: Option<f64>,
    /// Report the timing gates (rate, dropped, p99) as warnings instead of judging by them: for a
    /// check of the orchestration and the stores (a debug build), not for figures.
    #[arg(long)]
    pub no_timing_gates: bool,
    /// Gate: a median latency below this (ms) with non-202 answers means a dead app.
    #[arg(long)]
    pub fast_error_ms: Option<f64>,
    /// A deliberate fault, ROUND:KIND (round counted 1.. in run order; KIND kill-writer or
    /// restart-writer), to check that the gates catch it. Repeatable.
    #[arg(long = "fault")]
    pub faults: Vec<Fault>,
    /// A condition of every round: stores made slow by a proxy between the writer and each
    /// server, STORE=BASE[±JITTER][+PER*inflight][@RATE/s], comma separated (es=20ms±5ms,mongo=10ms).
    /// Not a fault: the rounds stay valid and the report names the condition.
    #[arg(long, value_delimiter = ',')]
    pub store_delay: Option<Vec<String>>,
    /// A sweep over conditions, separated by `;` (each a --store-delay value, `none` for none):
    /// every policy runs under each, e.g. `none;es=50ms;es=200ms`. Rounds are labelled POLICY@dN.
    #[arg(long, value_delimiter = ';')]
    pub conditions: Option<Vec<String>>,

    /// Open loop, one rate: split the measured phase into windows of this length and judge the
    /// round for drift (a soak; `experiment soak` sets it).
    #[arg(long)]
    pub window: Option<String>,
    /// Seconds between the sampler's samples (default 1).
    #[arg(long)]
    pub sample_every: Option<u64>,
    /// Skip the servers' warm-up before the first round (writing to each store until its
    /// server's CPU per message is steady): figures then depend on whether the servers were warm.
    #[arg(long)]
    pub no_warm_servers: bool,
    /// Leave the stores as they are before each round (e.g. pre-filled by `experiment
    /// prefill`); each round's reconcile judges only its own ids. Needs --no-warm-servers.
    #[arg(long)]
    pub keep_stores: bool,
    /// Probe the broker's acknowledgement beside each round's measured phase at this many
    /// one-message records per second (the bench's latency table shows it beside each rate).
    #[arg(long, value_name = "RATE")]
    pub broker_beside: Option<u32>,

    /// Evidence folder (default k6/out/experiment-<time>).
    #[arg(long, env = "EXPERIMENT_OUT")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub places: Places,
}

/// `experiment soak`: a one-round plan (the open loop at `--rate`, windows, a slower sampler)
/// run like any other, so its evidence re-renders with `experiment report`.
#[derive(Args, Clone, Debug)]
pub(crate) struct SoakArgs {
    /// Requests per second, held for the whole soak (e.g. half the pipeline's knee).
    #[arg(long)]
    pub rate: u32,
    /// The measured phase (k6 duration: 1h, 90m).
    #[arg(long, default_value = "1h")]
    pub duration: String,
    /// Length of a window: the unit of the per-window tables and of the verdict's edges.
    #[arg(long, default_value = "1m")]
    pub window: String,
    /// Warm-up at the same rate before the measured phase (ROUNDSxDURATION, or 0). Long enough
    /// for our processes' memory to reach its working set (about 10 minutes at 1,600/s here),
    /// so that the verdict's first edge is not the climb to it.
    #[arg(long, default_value = "1x10m")]
    pub warmup: String,
    /// Seconds between samples of /metrics, /proc and the servers' data.
    #[arg(long, default_value_t = 10)]
    pub sample_every: u64,
    /// Skip the servers' warm-up before the soak (see `experiment --help`).
    #[arg(long)]
    pub no_warm_servers: bool,
    /// Report the timing gates (rate, dropped, p99) as warnings instead of judging by them: for a
    /// check of the soak's machinery on a shared machine (its test), not for a verdict.
    #[arg(long)]
    pub no_timing_gates: bool,
    /// The write policy (default: the writer's defaults).
    #[arg(long, default_value = "default")]
    pub policy: String,
    /// Most VUs k6 may use to hold the rate.
    #[arg(long, default_value_t = 500)]
    pub max_vus: u32,
    /// Extra writer flags, one string (split at spaces).
    #[arg(long, allow_hyphen_values = true)]
    pub writer_args: Option<String>,
    /// Ingest flags, one string (split at spaces).
    #[arg(long, allow_hyphen_values = true)]
    pub ingest_args: Option<String>,
    /// Evidence folder (default k6/out/experiment-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub places: Places,
}

impl SoakArgs {
    /// The plan of the soak, as run flags.
    pub(crate) fn run_args(&self) -> RunArgs {
        RunArgs {
            policies: Some(vec![self.policy.clone()]),
            rounds: Some(1),
            load: Some(LoadKind::Open),
            rates: Some(vec![self.rate]),
            max_vus: Some(self.max_vus),
            duration: Some(self.duration.clone()),
            warmup: Some(self.warmup.clone()),
            window: Some(self.window.clone()),
            sample_every: Some(self.sample_every),
            no_warm_servers: self.no_warm_servers,
            no_timing_gates: self.no_timing_gates,
            writer_args: self.writer_args.clone(),
            ingest_args: self.ingest_args.clone(),
            out: self.out.clone(),
            common: self.common.clone(),
            places: self.places.clone(),
            ..RunArgs::default()
        }
    }
}

/// Where a run's services listen, which stores they use, and how its charts are drawn (`run` and
/// `soak` alike).
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct Places {
    /// The stores of the run, comma separated (MySQL required): given to every writer and
    /// reconcile the run starts; only their servers are warmed and sampled.
    #[arg(long, env = "STORES", value_name = "STORE,...", default_value = "all")]
    pub stores: pipeline_stores::Selection,
    /// Where each round's ingest listens.
    #[arg(long, env = "EXPERIMENT_INGEST_LISTEN", default_value = "127.0.0.1:8080")]
    pub ingest_listen: String,
    /// Where each round's writer serves /metrics and /healthz.
    #[arg(long, env = "EXPERIMENT_WRITER_METRICS_ADDR", default_value = "127.0.0.1:9464")]
    pub writer_metrics_addr: String,
    /// TrueType font for the charts' text (default: DejaVu Sans or Liberation Sans from the system).
    #[arg(long, env = "EXPERIMENT_FONT")]
    pub font: Option<PathBuf>,
}

/// What every load run needs besides its plan: which binaries, where the checkout and k6 are,
/// the machine-wide lock.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct Common {
    /// Binaries to build and use: release (for figures) or debug (quick checks).
    #[arg(long, env = "PROFILE", default_value = "release", value_parser = ["release", "debug"])]
    pub profile: String,
    /// Do not build; use the binaries already in --bin-dir (or target/<profile>).
    #[arg(long)]
    pub no_build: bool,
    /// Do not run `scripts/stack up` first (the servers are already up, or not native).
    #[arg(long)]
    pub no_stack: bool,
    /// Folder with the writer, ingest and reconcile binaries (default target/<profile>).
    #[arg(long, env = "PIPELINE_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,
    /// The k6 binary (default: the stack's venv under $PIPELINE_CACHE).
    #[arg(long, env = "K6_BIN")]
    pub k6: Option<PathBuf>,
    /// The checkout (default: found upwards from the current folder).
    #[arg(long, env = "PIPELINE_ROOT")]
    pub root: Option<PathBuf>,
    /// Lock file held for the whole run, so load runs (experiments, chaos) never overlap on
    /// this machine. Default $PIPELINE_CACHE/load.lock.
    #[arg(long, env = "EXPERIMENT_LOCK")]
    pub lock: Option<PathBuf>,
    /// Longest wait for the lock, in seconds.
    #[arg(long, env = "EXPERIMENT_LOCK_WAIT", default_value_t = 1800)]
    pub lock_wait: u64,
}

/// A flag's one string of flags, split at spaces.
pub(crate) fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

impl RunArgs {
    /// The plan: the reference's protocol, then the plan file, then the flags.
    pub(crate) fn plan(&self, file: Option<&str>) -> Result<Plan, crate::plan::PlanError> {
        let mut p = match file {
            Some(text) => Plan::from_toml(text)?,
            None => Plan::default(),
        };
        macro_rules! set {
            ($field:ident) => {
                if let Some(v) = &self.$field {
                    p.$field = v.clone();
                }
            };
        }
        set!(policies);
        set!(rounds);
        set!(load);
        set!(vus);
        set!(batch);
        set!(rates);
        set!(max_vus);
        set!(duration);
        set!(warmup);
        set!(store_delay);
        set!(window);
        if let Some(v) = self.sample_every {
            p.sample_every_s = v;
        }
        if self.no_warm_servers {
            p.warm_servers = false;
        }
        if self.keep_stores {
            p.keep_stores = true;
        }
        if self.broker_beside.is_some() {
            p.broker_beside = self.broker_beside;
        }
        if let Some(c) = &self.conditions {
            p.conditions = c.iter().map(|c| if c.trim() == "none" { String::new() } else { c.clone() }).collect();
        }
        if self.shuffle_seed.is_some() {
            p.shuffle_seed = self.shuffle_seed;
        }
        if let Some(w) = &self.writer_args {
            p.writer_args = words(w);
        }
        if let Some(w) = &self.ingest_args {
            p.ingest_args = words(w);
        }
        if let Some(v) = self.drain_timeout {
            p.drain_timeout_s = v;
        }
        if let Some(v) = self.max_error_rate {
            p.gates.max_error_rate = v;
        }
        if let Some(v) = self.min_rate_ratio {
            p.gates.min_rate_ratio = v;
        }
        if let Some(v) = self.max_dropped_ratio {
            p.gates.max_dropped_ratio = v;
        }
        if self.max_p99_ms.is_some() {
            p.gates.max_p99_ms = self.max_p99_ms;
        }
        if let Some(v) = self.fast_error_ms {
            p.gates.fast_error_ms = v;
        }
        if self.no_timing_gates {
            p.gates.judge_timing = false;
        }
        if !self.faults.is_empty() {
            p.faults = self.faults.clone();
        }
        if self.rates.is_some() && self.load.is_none() {
            p.load = LoadKind::Open;
        }
        Ok(p)
    }
}

/// The run flags as a bare `experiment` has them (clap's defaults and the environment), for the
/// runs another command makes.
pub(crate) fn run_defaults() -> Result<RunArgs, clap::Error> {
    #[derive(clap::Parser)]
    struct Bare {
        #[command(flatten)]
        run: RunArgs,
    }
    Ok(<Bare as clap::Parser>::try_parse_from(["experiment"])?.run)
}
