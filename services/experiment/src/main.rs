//! `experiment`: the reference's write-policy comparison as one command, with evidence a stranger can
//! audit. See docs/guides/experiment.md.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

mod args;
mod backlog;
mod bench;
mod chaos;
mod chart_style;
mod charts;
mod cli;
mod condition;
mod crossover;
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
mod timeline_chart;
mod warm;

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
    // A soak is also judged for drift; its verdict decides the exit code with the gates.
    let soak = soak::analyse(&ev, views.first().is_some_and(|v| v.valid));
    if let Some(s) = &soak {
        md.push_str(&soak::render(s));
        if !charts.is_empty() {
            if let Err(e) = soak::draw(&dir.join("soak.png"), s) {
                warn!("soak chart not drawn: {e}");
            }
        }
        let checks: Vec<serde_json::Value> =
            s.checks.iter().map(|c| serde_json::json!({ "check": c.what, "ok": c.ok, "detail": c.detail })).collect();
        let json = serde_json::json!({ "round": s.round, "flat": s.flat(), "checks": checks });
        std::fs::write(dir.join("soak.json"), serde_json::to_string_pretty(&json)? + "\n")?;
        info!("soak: {}", if s.flat() { "flat" } else { "NOT flat (report.md says which check failed)" });
    }
    std::fs::write(dir.join("report.md"), md)?;
    let verdicts = serde_json::to_string_pretty(&report::verdicts_json(&views))?;
    std::fs::write(dir.join("verdicts.json"), verdicts + "\n")?;
    let valid = views.iter().filter(|v| v.valid).count();
    info!("report: {} ({valid} of {} rounds valid)", dir.join("report.md").display(), views.len());
    for v in views.iter().filter(|v| !v.valid) {
        warn!("round {} INVALID: {}", v.name, gates::reasons(&v.gates));
    }
    Ok(valid == views.len() && soak.as_ref().is_none_or(soak::Soak::flat))
}

#[tokio::main]
async fn main() -> ExitCode {
    let _logs = pipeline_common::telemetry::init_tracing();
    let cli = Cli::parse();
    let work = async {
        match cli.cmd {
            Some(Cmd::Report { dir, font }) => write_report(&dir, font.as_deref()).map_err(run::RunError::Other),
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
