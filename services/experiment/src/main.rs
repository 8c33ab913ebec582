//! `experiment`: the reference's write-policy comparison as one command, with evidence a stranger can
//! audit. See docs/experiment.md.
#![forbid(unsafe_code)]

mod bench;
mod chaos;
mod chart_style;
mod charts;
mod cli;
mod condition;
mod envinfo;
mod evidence;
mod gates;
mod k6;
mod paths;
mod plan;
mod policies;
mod procs;
mod prom;
mod report;
mod round;
mod run;
mod sampler;
mod stats;
mod timeline_chart;

use clap::Parser;
use cli::{Cli, Cmd};
use std::path::Path;
use std::process::ExitCode;
use tracing::{info, warn};

const INVALID: u8 = 1;
const BAD_PLAN: u8 = 2;
const CANNOT_RUN: u8 = 3;

/// Writes report.md, verdicts.json and the charts of an evidence folder; true when every round
/// is valid. Charts are skipped (and the report says so) when no font is found.
pub fn write_report(dir: &Path, font: Option<&Path>) -> anyhow::Result<bool> {
    let ev = evidence::Evidence::load(dir)?;
    let views = report::analyse(&ev);
    let charts = match chart_style::register_font(font) {
        Ok(_) => match charts::render_all(dir, &ev, &views) {
            Ok(c) => c,
            Err(e) => {
                warn!("charts not drawn: {e}");
                Vec::new()
            }
        },
        Err(e) => {
            warn!("charts not drawn: {e}");
            Vec::new()
        }
    };
    let mut md = report::render(&ev, &views, &charts);
    if charts.is_empty() {
        md.push_str("\n(No charts: see the warning in the run's output; `experiment report DIR --font FILE` draws them later.)\n");
    }
    std::fs::write(dir.join("report.md"), md)?;
    let verdicts = serde_json::to_string_pretty(&report::verdicts_json(&views))?;
    std::fs::write(dir.join("verdicts.json"), verdicts + "\n")?;
    let valid = views.iter().filter(|v| v.valid).count();
    info!("report: {} ({valid} of {} rounds valid)", dir.join("report.md").display(), views.len());
    for v in views.iter().filter(|v| !v.valid) {
        warn!("round {} INVALID: {}", v.name, gates::reasons(&v.gates));
    }
    Ok(valid == views.len())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let work = async {
        match cli.cmd {
            Some(Cmd::Report { dir, font }) => write_report(&dir, font.as_deref()).map_err(run::RunError::Other),
            Some(Cmd::Run(args)) => run::run(&args).await.map(|(_, ok)| ok),
            Some(Cmd::Chaos(args)) => chaos::run(&args).await,
            Some(Cmd::Bench(args)) => bench::run(&args).await.map_err(run::RunError::Other),
            Some(Cmd::Ab(args)) => bench::ab::run(&args).await.map_err(run::RunError::Other),
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
