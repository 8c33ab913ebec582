//! `experiment`: the reference's write-policy comparison as one command, with evidence a stranger can
//! audit. See docs/guides/experiment.md.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

mod args;
mod backlog;
mod bench;
mod beside;
mod chaos;
mod chart_style;
mod cli;
mod condition;
mod duration;
mod envinfo;
mod evidence;
mod faults;
mod gates;
mod k6;
mod paths;
mod plan;
mod policies;
mod prefill;
mod procs;
mod prom;
mod report;
mod round;
mod run;
mod sampler;
mod soak;
mod stages;
mod stats;
mod warm;

use clap::Parser;
use cli::{Cli, Cmd};
use std::process::ExitCode;

const INVALID: u8 = 1;
const BAD_PLAN: u8 = 2;
const CANNOT_RUN: u8 = 3;

#[tokio::main]
async fn main() -> ExitCode {
    let _logs = pipeline_common::telemetry::init_tracing();
    let cli = Cli::parse();
    procs::select_stores(match &cli.cmd {
        Some(Cmd::Run(a)) => a.places.stores.clone(),
        Some(Cmd::Soak(a)) => a.places.stores.clone(),
        Some(Cmd::Prefill(a)) => a.places.stores.clone(),
        Some(Cmd::Chaos(a)) => a.stores.selection.clone(),
        Some(Cmd::Ab(a)) => a.stores.selection.clone(),
        Some(Cmd::Bench(_) | Cmd::Report { .. }) => pipeline_stores::StoreArgs::from_env().selection,
        None => cli.run.places.stores.clone(),
    });
    let work = async {
        match cli.cmd {
            Some(Cmd::Report { dir, font }) => {
                report::write_report(&dir, font.as_deref()).map_err(run::RunError::Other)
            }
            Some(Cmd::Run(args)) => run::run(&args).await.map(|(_, ok)| ok),
            Some(Cmd::Soak(args)) => run::run(&args.run_args()).await.map(|(_, ok)| ok),
            Some(Cmd::Chaos(args)) => chaos::run(&args).await,
            Some(Cmd::Bench(args)) => bench::run(&args).await.map_err(run::RunError::Other),
            Some(Cmd::Ab(args)) => bench::ab::run(&args).await.map_err(run::RunError::Other),
            Some(Cmd::Prefill(args)) => prefill::run(&args).await.map_err(run::RunError::Other),
            None => run::run(&cli.run).await.map(|(_, ok)| ok),
        }
    };
    // On SIGINT or SIGTERM the run is dropped, not abandoned: every process it started is
    // killed (kill_on_drop) and every server a chaos scenario froze is sent SIGCONT (its drop).
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("experiment: cannot watch SIGTERM: {e}");
            return ExitCode::from(CANNOT_RUN);
        }
    };
    let outcome = tokio::select! {
        o = work => o,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("experiment: interrupted (SIGINT); the processes it started are stopped");
            return ExitCode::from(130);
        }
        _ = term.recv() => {
            eprintln!("experiment: terminated (SIGTERM); the processes it started are stopped");
            return ExitCode::from(143);
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(INVALID),
        Err(run::RunError::Plan(e)) => {
            eprintln!("experiment: {e}");
            ExitCode::from(BAD_PLAN)
        }
        Err(run::RunError::Other(e)) => {
            eprintln!("experiment: {e:#}");
            ExitCode::from(CANNOT_RUN)
        }
    }
}
