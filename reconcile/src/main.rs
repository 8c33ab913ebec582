//! `reconcile`: did every injected message arrive exactly once in all four stores?
//!
//! Exit codes: 0 all good · 1 counts or ids differ (or reset left data) · 2 bad input ·
//! 3 the pipeline did not drain in time · 4 a store or the broker could not be reached.

mod diff;
mod drain;
mod expect;

use clap::{Parser, Subcommand};
use pipeline_common::config::{KafkaArgs, StoreArgs};
use pipeline_common::stores::{self, Store, StoreKind};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "reconcile", about = "Count and compare the four stores against what was injected")]
struct Cli {
    #[command(flatten)]
    kafka: KafkaArgs,
    #[command(flatten)]
    stores: StoreArgs,
    /// Longest wait for the pipeline to drain, in seconds.
    #[arg(long, global = true, env = "RECONCILE_DRAIN_TIMEOUT", default_value_t = 120)]
    drain_timeout: u64,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Wait for drain, count every store, compare with the expected total.
    Count {
        /// The number of messages injected (acknowledged with 202).
        #[arg(long, conflicts_with = "expect_from")]
        expect: Option<u64>,
        /// A k6 summary written by k6/ scripts (its `accepted` count), or a file of ids, one per line.
        #[arg(long)]
        expect_from: Option<PathBuf>,
    },
    /// Id-level check: missing, extra, misplaced and duplicated ids, per store.
    Diff {
        /// The ids that should be stored, one per line (default: every id any store holds).
        #[arg(long)]
        ids: Option<PathBuf>,
    },
    /// Wait for drain, empty every store, and check twice that all read zero.
    Reset,
}

const MISMATCH: u8 = 1;
const BAD_INPUT: u8 = 2;
const NOT_DRAINED: u8 = 3;
const UNREACHABLE: u8 = 4;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("reconcile: {e:#}");
            ExitCode::from(UNREACHABLE)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    let stores = stores::connect(&cli.stores, &StoreKind::ALL).await?;
    for s in &stores {
        s.prepare().await?;
    }
    let expected = match &cli.cmd {
        Cmd::Count { expect, expect_from } => match (expect, expect_from) {
            (Some(n), _) => Some(*n),
            (None, Some(f)) => match expect::from_file(f) {
                Ok(n) => Some(n),
                Err(e) => return Ok(bad_input(&e, cli.json)),
            },
            (None, None) => None,
        },
        _ => None,
    };
    if let Cmd::Diff { ids } = &cli.cmd {
        let wanted = match ids.as_ref().map(|f| expect::ids_from_file(f)).transpose() {
            Ok(w) => w,
            Err(e) => return Ok(bad_input(&e, cli.json)),
        };
        let report = diff::diff(&stores, wanted).await?;
        report.print(cli.json);
        return Ok(if report.is_clean() { 0 } else { MISMATCH });
    }
    let counts = match drained(&cli, &stores).await? {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    match cli.cmd {
        Cmd::Count { .. } => Ok(print_counts(&counts, expected, cli.json)),
        Cmd::Reset => reset(&stores, cli.json).await,
        Cmd::Diff { .. } => unreachable!("handled above"),
    }
}

fn bad_input(e: &anyhow::Error, as_json: bool) -> u8 {
    if as_json {
        println!("{}", json!({ "error": "bad_input", "detail": format!("{e:#}") }));
    } else {
        eprintln!("reconcile: {e:#}");
    }
    BAD_INPUT
}

/// Waits for drain; on timeout prints which partitions lag and returns the exit code.
async fn drained(cli: &Cli, stores: &[Arc<dyn Store>]) -> anyhow::Result<Result<drain::Counts, u8>> {
    let timeout = Duration::from_secs(cli.drain_timeout);
    match drain::wait(&cli.kafka, stores, timeout, Duration::from_secs(1)).await? {
        Ok(c) => Ok(Ok(c)),
        Err(nd) => {
            let lagging: Vec<_> = nd
                .lagging
                .iter()
                .map(|p| json!({ "partition": p.partition, "committed": p.committed, "high": p.high }))
                .collect();
            if cli.json {
                println!(
                    "{}",
                    json!({ "drained": false, "lagging": lagging, "counts": counts_json(&nd.counts, None) })
                );
            } else {
                eprintln!("reconcile: not drained after {} s; lagging partitions:", cli.drain_timeout);
                for p in &nd.lagging {
                    eprintln!(
                        "  {} partition {}: committed {} of {} (lag {})",
                        cli.kafka.topic,
                        p.partition,
                        p.committed,
                        p.high,
                        p.lag()
                    );
                }
            }
            Ok(Err(NOT_DRAINED))
        }
    }
}

fn counts_json(counts: &drain::Counts, expected: Option<u64>) -> serde_json::Value {
    counts
        .iter()
        .map(|(k, n)| json!({ "store": k, "count": n, "expected": expected, "difference": expected.map(|e| *n as i64 - e as i64) }))
        .collect()
}

/// Prints the table (or JSON) and returns the exit code: 0 only if every store equals the
/// expectation (or, without one, if all four agree).
fn print_counts(counts: &drain::Counts, expected: Option<u64>, as_json: bool) -> u8 {
    let target = expected.unwrap_or(counts[0].1);
    let ok = counts.iter().all(|(_, n)| *n == target);
    if as_json {
        println!(
            "{}",
            json!({ "drained": true, "expected": expected, "ok": ok, "stores": counts_json(counts, expected) })
        );
    } else {
        println!("{:<8} {:>12} {:>12} {:>12}", "store", "count", "expected", "difference");
        for (k, n) in counts {
            let (e, d) = match expected {
                Some(e) => (e.to_string(), format!("{:+}", *n as i64 - e as i64)),
                None => ("-".into(), "-".into()),
            };
            println!("{:<8} {:>12} {:>12} {:>12}", k.name(), n, e, d);
        }
        println!("{}", if ok { "OK: every store holds the expected count" } else { "MISMATCH" });
    }
    if ok {
        0
    } else {
        MISMATCH
    }
}

async fn reset(stores: &[Arc<dyn Store>], as_json: bool) -> anyhow::Result<u8> {
    for s in stores {
        s.reset().await?;
    }
    let first = drain::count_all(stores).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = drain::count_all(stores).await?;
    let ok = first.iter().chain(&second).all(|(_, n)| *n == 0);
    if as_json {
        println!(
            "{}",
            json!({ "ok": ok, "first": counts_json(&first, Some(0)), "second": counts_json(&second, Some(0)) })
        );
    } else {
        for ((k, a), (_, b)) in first.iter().zip(&second) {
            println!("{:<8} {:>10} {:>10}", k.name(), a, b);
        }
        println!("{}", if ok { "OK: every store reads 0, twice" } else { "NOT EMPTY: something is still writing" });
    }
    Ok(if ok { 0 } else { MISMATCH })
}
