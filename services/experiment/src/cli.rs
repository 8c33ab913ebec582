//! The command line. `experiment [FLAGS]` (or `experiment run [FLAGS]`) runs a plan;
//! `experiment report DIR` re-renders a finished run's report and charts from its evidence.
//!
//! Plan flags override the plan file (`--plan`), which overrides the reference's protocol (the
//! defaults). Everything that is not the plan (where binaries are, which ports) is kept apart,
//! so `plan.toml` in the evidence is exactly what decides the numbers.
//!
//! Exit codes: 0 every round valid · 1 a round invalid (see report.md) · 2 bad plan or flags ·
//! 3 could not run (stack, build, lock, k6, evidence folder).

use crate::args::{RunArgs, SoakArgs};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "experiment",
    about = "Run the reference's write-policy experiment: interleaved rounds of fresh processes, gates, evidence, report and charts",
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
    /// Run a plan (what `experiment` without a subcommand does).
    Run(Box<RunArgs>),
    /// The chaos scenarios (kills, a rebalance, store freezes and wipes, a poison corpus, a
    /// dead-letter replay) under load, each ending in an exact reconcile; one table row each.
    Chaos(Box<crate::chaos::ChaosArgs>),
    /// The performance figures in one go: the references (null 202, each server alone) and the
    /// pipeline (single POSTs and batches), as one table; docs/guides/experiment.md, "The performance figures", explains it.
    Bench(Box<crate::bench::BenchArgs>),
    /// Two builds (or two sets of flags) against each other, alternating: the ingest alone, the
    /// pipeline, or the writer draining a backlog; one line per run.
    Ab(Box<crate::bench::ab::AbArgs>),
    /// A soak: one open loop at one rate for hours, judged for drift per window (latency, CPU
    /// per message, memory, descriptors, threads, data on disk) and reconciled at the end.
    Soak(Box<SoakArgs>),
    /// Add N messages to every store through Kafka and the writer (a produced backlog it
    /// drains), for rounds run with --keep-stores against stores that already hold millions.
    Prefill(Box<crate::prefill::PrefillArgs>),
    /// Re-render report.md, verdicts.json and the charts from an evidence folder alone.
    Report {
        /// The evidence folder of a run (holds plan.toml and rounds/).
        dir: PathBuf,
        /// TrueType font for the charts' text (default: DejaVu Sans or Liberation Sans from the system).
        #[arg(long, env = "EXPERIMENT_FONT")]
        font: Option<PathBuf>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::LoadKind;
    use clap::CommandFactory;

    #[test]
    fn every_flag_has_help_text() {
        let cmd = Cli::command();
        let bare = pipeline_testkit::flags_without_help(&cmd);
        assert!(bare.is_empty(), "flags without help: {bare:?}");
        for sub in cmd.get_subcommands() {
            let bare = pipeline_testkit::flags_without_help(sub);
            assert!(bare.is_empty(), "{}: flags without help: {bare:?}", sub.get_name());
        }
    }

    /// docs/reference/configuration.md's experiment section is this definition
    /// (`UPDATE_DOCS=1 cargo test -p experiment configuration_page` rewrites it).
    #[test]
    fn the_configuration_page_has_every_experiment_flag() {
        let md = pipeline_common::reference::flags_markdown(&Cli::command());
        pipeline_testkit::docs::generated_block("docs/reference/configuration.md", "experiment", &md);
    }

    #[test]
    fn flags_override_the_seed_protocol() {
        let cli = Cli::parse_from(["experiment", "--policies", "A,C", "--rounds", "1", "--fault", "2:kill-writer"]);
        let plan = cli.run.plan(None).expect("plan");
        assert_eq!(plan.policies, ["A", "C"]);
        assert_eq!(plan.rounds, 1);
        assert_eq!(plan.vus, 250);
        assert_eq!(plan.faults.len(), 1);
        let cli = Cli::parse_from(["experiment", "--policies", "C", "--rates", "100,200"]);
        assert_eq!(cli.run.plan(None).expect("plan").load, LoadKind::Open);
        assert!(matches!(Cli::parse_from(["experiment", "report", "x"]).cmd, Some(Cmd::Report { .. })));
        let plan = Cli::parse_from(["experiment", "--load", "batch", "--batch", "50", "--vus", "8"])
            .run
            .plan(None)
            .expect("plan");
        assert_eq!((plan.load, plan.batch, plan.points()), (LoadKind::Batch, 50, vec![8]));
        let empty = Cli::parse_from(["experiment", "--load", "batch", "--batch", "0"]).run.plan(None).expect("plan");
        assert!(matches!(empty.validate(), Err(crate::plan::PlanError::EmptyBatch)));
    }

    #[test]
    fn an_ab_open_loop_needs_a_rate_and_only_it_takes_one() {
        let ab = |args: &[&str]| Cli::try_parse_from([&["experiment", "ab", "a", "b"], args].concat());
        let Ok(Cli { cmd: Some(Cmd::Ab(open)), .. }) = ab(&["--load", "open", "--rate", "1500"]) else {
            panic!("an open loop at a rate parses")
        };
        assert_eq!((open.load, open.rate), (LoadKind::Open, Some(1500)));
        assert!(open.check().is_ok());
        assert!(ab(&["--load", "open"]).is_err(), "an open loop without a rate is refused");
        assert!(ab(&["--load", "open", "--rate", "0"]).is_err(), "a rate of 0 is refused");
        let Ok(Cli { cmd: Some(Cmd::Ab(closed)), .. }) = ab(&["--rate", "1500"]) else { panic!("parses") };
        assert!(closed.check().is_err(), "a rate with the closed loop is refused before anything runs");
    }
}
