//! `reconcile`: did every injected message arrive exactly once in every store?
//!
//! Every store means every store of `--stores` (env `STORES`, all of the registry's by
//! default): the others are never contacted, and no check, repair or replay names them.
//! Every check first waits for the pipeline to drain ([`drain::wait`]); then `count` and `diff`
//! compare id sets when they have them (a k6 summary naming its id log, id files) and say
//! "totals only" when they do not. Exit codes are in [`cli`].
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

mod check;
mod classify;
mod cli;
mod content;
mod dlq;
mod dlq_list;
mod drain;
mod exit;
mod expect;
mod findings;
mod idlog;
mod ids_cmd;
mod log_replay;
mod patient;
mod repair;
mod replay;
mod report;
mod show;
mod tally;
mod totals;

#[cfg(test)]
mod scale_tests;

use clap::{CommandFactory, FromArgMatches};
use cli::{Cli, Cmd};
use expect::{Expected, IdSource};
use pipeline_common::reconcile_report::{LaggingPartition, NotDrained};
use pipeline_stores::{Selection, Store};
use report::Level;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use exit::{bad_input, MISMATCH, NOT_DRAINED, UNREACHABLE};

/// What the command line asks for, resolved from its files before anything is contacted.
enum Plan {
    Totals { want: Option<totals::Want>, source: String },
    Ids(IdSource),
    StoresOnly,
    Reset,
    Repair(repair::Options),
}

#[tokio::main]
async fn main() -> ExitCode {
    let matches = Cli::command().after_help(exit::exit_codes_help()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("reconcile: {e:#}");
            ExitCode::from(UNREACHABLE)
        }
    }
}

fn plan(cmd: &Cmd, selection: &Selection) -> anyhow::Result<Plan> {
    Ok(match cmd {
        Cmd::Count { expect: Some(n), .. } => {
            Plan::Totals { want: Some(totals::Want { accepted: *n, uncertain: 0 }), source: format!("--expect {n}") }
        }
        Cmd::Count { expect: None, expect_from: None } => Plan::Totals { want: None, source: "no expectation".into() },
        Cmd::Count { expect: None, expect_from: Some(f) } => match expect::from_file(f)? {
            Expected::Totals { accepted, uncertain, source } => Plan::Totals {
                want: Some(totals::Want { accepted, uncertain }),
                source: format!("{source} (a k6 summary without an id log)"),
            },
            Expected::Ids(src) => Plan::Ids(src),
        },
        Cmd::Diff { expect_from: Some(f), .. } => match expect::from_file(f)? {
            Expected::Ids(src) => Plan::Ids(src),
            Expected::Totals { .. } => anyhow::bail!(
                "{} names no id log (k6 ran without K6_CONSOLE_OUTPUT): diff needs ids; `count --expect-from` \
                 checks its totals",
                f.display()
            ),
        },
        Cmd::Diff { ids: Some(a), uncertain, .. } => {
            Plan::Ids(IdSource::Plain { accepted: a.clone(), uncertain: uncertain.clone() })
        }
        Cmd::Diff { stores_only: true, .. } => Plan::StoresOnly,
        Cmd::Diff { .. } => anyhow::bail!(
            "diff needs the expected ids (--expect-from SUMMARY, or --ids FILE [--uncertain FILE]): without them \
             an id missing from every store is invisible. --stores-only compares the stores with each other only"
        ),
        Cmd::Reset { yes } => {
            if !*yes && !confirmed_reset()? {
                anyhow::bail!(
                    "reset deletes every message of every store: pass --yes (or answer `reset` on a terminal)"
                );
            }
            Plan::Reset
        }
        Cmd::Repair { dry_run, stores, delete_extra, batch } => Plan::Repair(repair::Options {
            stores: selection.subset(stores)?,
            dry_run: *dry_run,
            delete_extra: *delete_extra,
            batch: *batch,
        }),
        Cmd::Ids { .. } | Cmd::Dlq { .. } | Cmd::Wipe { .. } | Cmd::Show { .. } | Cmd::Replay { .. } => {
            anyhow::bail!("internal: this command has no plan")
        }
    })
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    let mut links = cli.stores.plaintext_links();
    links.extend(pipeline_common::kafka::plaintext_brokers(&cli.kafka));
    pipeline_common::secret::check_plaintext(&links, cli.kafka.allow_plaintext).map_err(anyhow::Error::msg)?;
    if let Cmd::Ids { file, write } = &cli.cmd {
        return Ok(match ids_cmd::run(file, write.as_deref(), cli.json) {
            Ok(()) => 0,
            Err(e) => bad_input(&e.into(), cli.json),
        });
    }
    if let Cmd::Dlq { cmd } = &cli.cmd {
        return dlq_command(&cli, cmd).await;
    }
    if let Cmd::Replay { .. } = &cli.cmd {
        return match replay_options(&cli) {
            Ok(opts) => log_replay::run(&cli.kafka, &cli.stores, &opts, cli.json).await,
            Err(e) => Ok(bad_input(&e, cli.json)),
        };
    }
    if let Cmd::Wipe { store, yes } = &cli.cmd {
        if !*yes {
            return Ok(bad_input(&anyhow::anyhow!("wipe deletes every message of {store}: pass --yes"), cli.json));
        }
        if let Err(e) = cli.stores.selection.subset(&[*store]) {
            return Ok(bad_input(&e.into(), cli.json));
        }
        let stores = pipeline_stores::connect(&cli.stores, &[*store]).await?;
        for s in &stores {
            s.reset().await?;
        }
        eprintln!("reconcile: wiped {store}");
        return Ok(0);
    }
    if let Cmd::Show { ids } = &cli.cmd {
        let stores = pipeline_stores::connect(&cli.stores, cli.stores.selected()).await?;
        for s in &stores {
            s.prepare().await?;
        }
        if let Err(code) = drained(&cli, &stores).await? {
            return Ok(code);
        }
        return show::run(&stores, ids, cli.json).await;
    }
    let plan = match plan(&cli.cmd, &cli.stores.selection) {
        Ok(p) => p,
        Err(e) => return Ok(bad_input(&e, cli.json)),
    };
    if cli.only_prefix.is_some() && !matches!(plan, Plan::Ids(_)) {
        let e = anyhow::anyhow!(
            "--only-prefix needs an id-level check (count or diff with the expected ids): totals and \
             stores-only checks count every message a store holds"
        );
        return Ok(bad_input(&e, cli.json));
    }
    // Expected ids are loaded before anything is contacted: bad input fails fast.
    let loaded = match &plan {
        Plan::Ids(src) => match check::load_expected(cli.stores.selected(), src) {
            Ok((mut t, counts)) => {
                if let Some(p) = &cli.only_prefix {
                    t.only_prefix(p);
                }
                Some((t, counts))
            }
            Err(e) => return Ok(bad_input(&e.into(), cli.json)),
        },
        Plan::StoresOnly => Some((tally::Tally::new(cli.stores.selected()), Default::default())),
        _ => None,
    };
    let stores = pipeline_stores::connect(&cli.stores, cli.stores.selected()).await?;
    for s in &stores {
        s.prepare().await?;
    }
    if let Plan::Reset = plan {
        if let Err(code) = drained(&cli, &stores).await? {
            return Ok(code);
        }
        return totals::reset(&stores, cli.json).await;
    }
    if let Plan::Repair(opts) = &plan {
        if let Err(code) = drained(&cli, &stores).await? {
            return Ok(code);
        }
        return repair::run(&stores, opts, cli.json).await;
    }
    let counts = match drained(&cli, &stores).await? {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let (mut tally, expected, level, source) = match (plan, loaded) {
        (Plan::Totals { want, source }, _) => return Ok(totals::print_counts(&counts, want, &source, cli.json)),
        (Plan::Ids(src), Some((t, e))) => (t, Some(e), Level::Ids, src.describe()),
        (Plan::StoresOnly, Some((t, _))) => (t, None, Level::StoresOnly, "no expected set (--stores-only)".into()),
        _ => anyhow::bail!("internal: plan without its tally"),
    };
    for (i, (_, n)) in counts.iter().enumerate() {
        tally.counted(i, *n);
    }
    let mut report = check::run(&stores, tally, &cli.kafka, &cli.dlq_topic, level, source, expected).await?;
    report.counts = Some(counts);
    report.only_prefix = cli.only_prefix.clone();
    report.print(cli.json);
    Ok(if report.is_clean() { 0 } else { MISMATCH })
}

async fn dlq_command(cli: &Cli, cmd: &cli::DlqCmd) -> anyhow::Result<u8> {
    match cmd {
        cli::DlqCmd::List { limit } => {
            let (k, t, limit, json) = (cli.kafka.clone(), cli.dlq_topic.clone(), *limit, cli.json);
            tokio::task::spawn_blocking(move || dlq_list::run(&k, &t, limit, json)).await?
        }
        cli::DlqCmd::Replay { dry_run } => {
            let stores = pipeline_stores::connect(&cli.stores, cli.stores.selected()).await?;
            for s in &stores {
                s.prepare().await?;
            }
            replay::run(&cli.kafka, &cli.dlq_topic, &stores, *dry_run, cli.json).await
        }
    }
}

/// `replay`'s flags, checked against each other before anything is contacted.
fn replay_options(cli: &Cli) -> anyhow::Result<log_replay::Options> {
    let Cmd::Replay { from_offset, from_time, to_offset, to_time, stores, dry_run, batch, max_body_bytes } = &cli.cmd
    else {
        anyhow::bail!("internal: not a replay");
    };
    if cli.only_prefix.is_some() {
        anyhow::bail!("--only-prefix is for count and diff: replay writes every message of the range it reads");
    }
    let from = match (from_offset, from_time) {
        (Some(o), None) => log_replay::Begin::Offsets(o.clone()),
        (None, Some(t)) => log_replay::Begin::Time(*t),
        _ => anyhow::bail!("replay needs one start: --from-offset or --from-time"),
    };
    let to = match (to_offset, to_time) {
        (Some(o), None) => Some(log_replay::Until::Offsets(o.clone())),
        (None, Some(t)) => Some(log_replay::Until::Time(*t)),
        (None, None) => None,
        _ => anyhow::bail!("replay takes one end: --to-offset or --to-time"),
    };
    // In registry order, each once, and only stores this deployment has.
    let stores = cli.stores.selection.subset(stores)?;
    Ok(log_replay::Options {
        spec: log_replay::Spec::new(from, to).map_err(anyhow::Error::msg)?,
        stores,
        dry_run: *dry_run,
        batch: (*batch).max(1),
        limits: pipeline_common::message::Limits { max_body_bytes: *max_body_bytes },
    })
}

/// Asks on a terminal whether every store may be emptied; never where nobody can answer.
fn confirmed_reset() -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("reconcile: this deletes every message of every store. Type `reset` to go on: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "reset")
}

/// Waits for drain; on timeout prints which partitions lag and returns the exit code.
async fn drained(cli: &Cli, stores: &[Arc<dyn Store>]) -> anyhow::Result<Result<drain::Counts, u8>> {
    let timeout = Duration::from_secs(cli.drain_timeout);
    match drain::wait(&cli.kafka, stores, timeout, Duration::from_secs(1)).await? {
        Ok(c) => Ok(Ok(c)),
        Err(nd) => {
            if cli.json {
                let lagging = nd
                    .lagging
                    .iter()
                    .map(|p| LaggingPartition { partition: p.partition, committed: p.committed, high: p.high })
                    .collect();
                let counts = report::store_counts(&nd.counts);
                report::print_json(&NotDrained { drained: false, lagging, counts });
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use pipeline_stores::StoreKind;

    /// `repair --stores` and `replay --stores` choose among the stores of `--stores`, never
    /// outside them, and default to all of them.
    #[test]
    fn subcommands_choose_among_the_selected_stores() {
        let two = "mysql,redis";
        let cli = Cli::parse_from(["reconcile", "--stores", two, "repair"]);
        let Ok(Plan::Repair(opts)) = plan(&cli.cmd, &cli.stores.selection) else { panic!("a repair plan") };
        assert_eq!(opts.stores, [StoreKind::Mysql, StoreKind::Redis]);
        let cli = Cli::parse_from(["reconcile", "--stores", two, "repair", "--stores", "es"]);
        let e = plan(&cli.cmd, &cli.stores.selection).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("es is not one of the selected stores"), "{e}");
        let cli = Cli::parse_from(["reconcile", "--stores", two, "replay", "--from-offset", "earliest"]);
        assert_eq!(replay_options(&cli).map(|o| o.stores).ok(), Some(vec![StoreKind::Mysql, StoreKind::Redis]));
        let cli = Cli::parse_from(["reconcile", "--stores", two, "replay", "--from-offset", "0", "--stores", "mongo"]);
        assert!(replay_options(&cli).is_err());
    }
}
