//! What a bench is asked for (`BenchArgs`, the command line) and what its table needs of it
//! (`Settings`, kept in OUT/bench.json). Its own file because the references (`refs.rs`) and the
//! table (`table.rs`) read these while `mod.rs` runs both: in `mod.rs` they would make the
//! folder's files import each other in a circle.

use crate::args::Common;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct BenchArgs {
    /// Single POSTs: closed-loop virtual users (the reference's protocol).
    #[arg(long, default_value_t = 250)]
    pub vus: u32,
    /// Each measured phase (k6 duration).
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// The pipeline runs' warm-up, ROUNDSxDURATION or 0.
    #[arg(long, default_value = "3x10s")]
    pub warmup: String,
    /// Messages per batch POST, per store batch and per broker record.
    #[arg(long, default_value_t = 100)]
    pub batch: u32,
    /// Batch POSTs: closed-loop virtual users.
    #[arg(long, default_value_t = 20)]
    pub batch_vus: u32,
    /// Each store alone: batches in flight at once.
    #[arg(long, default_value_t = 4)]
    pub in_flight: u32,
    /// Each server alone: messages written (stores) or produced and consumed (broker).
    #[arg(long, default_value_t = 40_000)]
    pub records: u32,
    /// The pipeline runs' longest wait for the stores to drain, in seconds: with batches the
    /// ingest accepts faster than the stores write and the backlog drains after k6 stops.
    #[arg(long, default_value_t = 900)]
    pub drain_timeout: u64,
    /// Skip the servers' warm-up and the unmeasured warming round before the first pipeline run
    /// (see `experiment --help`): for a check that the bench runs (CI), not for figures.
    #[arg(long)]
    pub no_warm_servers: bool,
    /// Label the run a profiling run (perf attached by hand): not an acceptance run.
    #[arg(long)]
    pub profiling: bool,
    /// The pipeline runs report the timing gates (rate, dropped, p99) as warnings instead of
    /// judging by them: for a check that the bench runs and the stores agree (CI's debug build).
    #[arg(long)]
    pub no_timing_gates: bool,
    /// Where the null-202 server listens.
    #[arg(long, env = "BENCH_NULL_LISTEN", default_value = "127.0.0.1:18090")]
    pub null_listen: String,
    /// Evidence folder (default k6/out/bench-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print results.md again from a finished bench's evidence folder, and exit.
    #[arg(long, conflicts_with = "out")]
    pub table: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// The settings a table needs, kept in OUT/bench.json so `--table` needs nothing else.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Settings {
    pub vus: u32,
    pub batch: u32,
    pub batch_vus: u32,
    pub in_flight: u32,
    pub records: u32,
    pub profiling: bool,
    /// The stores the bench ran with (--stores, env STORES; all of the registry by default).
    pub stores: Vec<String>,
    /// The open-loop rates (requests/s) of the latency section: 5, 50 and 80 % of the knee.
    #[serde(default)]
    pub latency_rates: Vec<u32>,
}
