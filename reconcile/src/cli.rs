//! The command line, and with the exit codes (`crate::exit`) what docs/reference/reconcile.md is
//! generated from.

use crate::log_replay::{parse_from_offset, parse_time, parse_to_offset, PerPartition, Start};
use clap::{Parser, Subcommand};
use pipeline_common::config::KafkaArgs;
use pipeline_common::message::{parse_max_body_bytes, DEFAULT_MAX_BODY_BYTES};
use pipeline_stores::{StoreArgs, StoreKind};
use std::path::PathBuf;
use time::OffsetDateTime;

/// The longest `--drain-timeout`: a deadline this far ahead is still a valid instant on every
/// platform, where `u64::MAX` seconds overflowed `Instant` and panicked after connecting.
const MAX_DRAIN_TIMEOUT_S: u64 = 7 * 24 * 3600;

#[derive(Parser)]
#[command(
    name = "reconcile",
    about = "Check the stores against what was injected, id by id and content; repair them; replay dead letters"
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub stores: StoreArgs,
    /// Longest wait for the pipeline to drain, in seconds (at most a week).
    #[arg(long, global = true, env = "RECONCILE_DRAIN_TIMEOUT", default_value_t = 120,
          value_parser = clap::value_parser!(u64).range(..=MAX_DRAIN_TIMEOUT_S))]
    pub drain_timeout: u64,
    /// The writer's dead-letter topic, read whole so that dead-lettered ids are reported as such.
    #[arg(long, global = true, env = "WRITER_DLQ_TOPIC", default_value = "messages.dlq")]
    pub dlq_topic: String,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// `count`/`diff` at id level: judge only the ids that start with PREFIX (one k6 run's
    /// RUN_ID, in stores that held other messages before it); the others are counted per store
    /// and reported, not judged.
    #[arg(long, global = true, value_name = "PREFIX")]
    pub only_prefix: Option<String>,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
    /// Wait for drain, then check every store: id sets when FILE has ids, totals otherwise.
    Count {
        /// Totals only: the number of messages acknowledged with 202.
        #[arg(long, conflicts_with = "expect_from")]
        expect: Option<u64>,
        /// A k6 summary written by k6/ scripts (id level when it names its id log, totals
        /// otherwise), a k6 id log, or a file of accepted ids, one per line.
        #[arg(long)]
        expect_from: Option<PathBuf>,
    },
    /// Wait for drain, then list missing, extra, refused, duplicated, misplaced and dead-lettered
    /// ids per store, with examples.
    ///
    /// Needs an expected set (`--expect-from`, or `--ids` with optional `--uncertain`): without
    /// one an id missing from every store cannot be seen, so `diff` refuses (exit 2) unless
    /// `--stores-only` asks explicitly for the weaker check, which is labelled as such.
    Diff {
        /// A k6 summary naming its id log, or a k6 id log.
        #[arg(long, conflicts_with_all = ["ids", "uncertain", "stores_only"])]
        expect_from: Option<PathBuf>,
        /// The accepted ids (202), one per line.
        #[arg(long, conflicts_with = "stores_only")]
        ids: Option<PathBuf>,
        /// Ids whose outcome the client does not know (504, timeout), one per line: they may be
        /// stored, at most once.
        #[arg(long, requires = "ids")]
        uncertain: Option<PathBuf>,
        /// No expected set: report only where the stores disagree with each other.
        #[arg(long)]
        stores_only: bool,
    },
    /// Wait for drain, then rebuild every other store from MySQL: every id they
    /// miss or hold with other content or an older version gets MySQL's version (never over a
    /// newer one), read back and compared again. Ids MySQL does not hold are reported.
    Repair {
        /// Only say what would be written; change nothing (exit 1 when something would be).
        #[arg(long)]
        dry_run: bool,
        /// The stores to repair, of `--stores` (default: every one of them but MySQL).
        #[arg(long, value_delimiter = ',')]
        stores: Vec<StoreKind>,
        /// Also delete the ids a store holds that MySQL does not (only on a quiet pipeline: a
        /// message a writer has stored elsewhere but not yet in MySQL would be lost).
        #[arg(long)]
        delete_extra: bool,
        /// Messages read from MySQL and written per batch.
        #[arg(long, default_value_t = 500)]
        batch: usize,
    },
    /// Restore the stores from the messages topic itself: re-read a range of it and write every
    /// message into the chosen stores, MySQL included, under the version rule; then read every
    /// replayed id back.
    ///
    /// What `repair` cannot do: MySQL losing rows. Each record is decoded as the writer decodes
    /// it (one message, or a batch request's array); items that are not valid messages are
    /// reported, not written. A store gets only what it lacks, holds older or holds damaged, and
    /// never over a newer version, so a second replay writes nothing and a replay beside running
    /// writers is safe. The topic is read with partitions assigned and nothing committed: the
    /// writers' consumer group is neither joined nor moved. It does not wait for a drain. At the
    /// end every replayed message must be in every chosen store at its version or newer; exit 1
    /// when one is not, when a store refuses one, when part of the range is gone, or (with
    /// --dry-run) when something would be written.
    ///
    /// It cannot bring back what the topic no longer holds: records past the topic's retention
    /// are deleted by the broker, and a start below the oldest offset still held is reported as
    /// gone. Keep the retention longer than the time it takes to notice a loss.
    Replay {
        /// First offset read: `earliest` (the oldest record the topic still holds), one offset for
        /// every partition, or PARTITION:OFFSET,... (e.g. `0:1200,1:0`) to replay only the named
        /// partitions.
        #[arg(long, value_name = "OFFSETS", value_parser = parse_from_offset, conflicts_with = "from_time",
              required_unless_present = "from_time")]
        from_offset: Option<PerPartition<Start>>,
        /// Start each partition at its first record at or after this time (RFC 3339, e.g.
        /// 2026-12-01T09:30:00Z), found with the broker's time index (checked against the record
        /// it names).
        #[arg(long, value_name = "TIME", value_parser = parse_time)]
        from_time: Option<OffsetDateTime>,
        /// First offset not read: one for every partition or PARTITION:OFFSET,... (default: the
        /// high watermark at the start, so the replay ends).
        #[arg(long, value_name = "OFFSETS", value_parser = parse_to_offset, conflicts_with = "to_time")]
        to_offset: Option<PerPartition<i64>>,
        /// Stop each partition before its first record at or after this time (RFC 3339).
        #[arg(long, value_name = "TIME", value_parser = parse_time)]
        to_time: Option<OffsetDateTime>,
        /// The stores to write, of `--stores` (default: every one of them, MySQL included).
        #[arg(long, value_delimiter = ',')]
        stores: Vec<StoreKind>,
        /// Only say what would be written, per store and partition; write nothing (exit 1 when
        /// something would be written).
        #[arg(long)]
        dry_run: bool,
        /// Messages compared and written per store request.
        #[arg(long, default_value_t = 500)]
        batch: usize,
        /// Largest message body the writers accept, in bytes (their MAX_BODY_BYTES): a message
        /// over it is reported as undecodable, as the writer dead-letters it, not written.
        #[arg(long, env = "MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES,
              value_parser = parse_max_body_bytes)]
        max_body_bytes: usize,
    },
    /// The dead-letter topic: list what it holds, or replay it into the stores that refused it.
    Dlq {
        #[command(subcommand)]
        cmd: DlqCmd,
    },
    /// Wait for drain, empty every store, and check twice that all read zero. Asks first on a
    /// terminal; elsewhere needs --yes. MySQL is emptied with --mysql-admin-url when given.
    Reset {
        /// Empty every store without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Empty one store now, without waiting for the pipeline to drain: a fault on purpose (the
    /// chaos suite's wipe scenarios), after which `reconcile repair` rebuilds it from MySQL.
    Wipe {
        /// The store to empty.
        #[arg(long, value_enum)]
        store: StoreKind,
        /// Required: this deletes every message of that store.
        #[arg(long)]
        yes: bool,
    },
    /// Wait for drain, then print each id as every store holds it (version, sender, recipient,
    /// `sent_at`, body) and whether they agree (exit 1 when a store lacks it or holds other content).
    Show {
        /// The ids to show.
        #[arg(required = true, num_args = 1..)]
        ids: Vec<String>,
    },
    /// Check that a k6 run's id log is complete and count its ids; contacts nothing.
    Ids {
        /// A k6 summary naming its id log, or a k6 id log.
        file: PathBuf,
        /// Also write PREFIX.accepted.ids, PREFIX.uncertain.ids and PREFIX.refused.ids.
        #[arg(long, value_name = "PREFIX")]
        write: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub(crate) enum DlqCmd {
    /// Every dead letter (where, when, store, id, error, replayed or not) and counts per store
    /// and error.
    List {
        /// Records shown one per line (the counts cover all).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Write each dead letter not replayed yet into the store that refused it, only that one
    /// (after the cause is fixed); commit the replay group's offsets; a record refused again is
    /// dead-lettered again with its new error.
    Replay {
        /// Only say what would be replayed; write and commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::EXIT_CODES;
    use clap::CommandFactory;

    /// Every flag of every subcommand says what it does (the reference page is made of these).
    #[test]
    fn every_flag_has_help() {
        fn walk(cmd: &clap::Command, path: &str, bare: &mut Vec<String>) {
            bare.extend(pipeline_testkit::flags_without_help(cmd).into_iter().map(|f| format!("{path} --{f}")));
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), bare);
            }
        }
        let mut bare = Vec::new();
        walk(&Cli::command(), "reconcile", &mut bare);
        assert!(bare.is_empty(), "flags without help: {bare:?}");
    }

    /// docs/reference/reconcile.md, and reconcile's section of configuration.md, are this
    /// definition and [`EXIT_CODES`](crate::exit::EXIT_CODES) (`UPDATE_DOCS=1 cargo test -p reconcile reference_pages`
    /// rewrites them).
    #[test]
    fn the_reference_pages_are_the_command_line() {
        let cmd = Cli::command();
        let mut exits = String::from("| exit code | means |\n|---|---|\n");
        for (code, means) in EXIT_CODES {
            exits.push_str(&format!("| {code} | {means} |\n"));
        }
        let page = format!(
            "# reconcile: every subcommand\n\n\
             <!-- Generated from reconcile/src/cli.rs by its test the_reference_pages_are_the_command_line; \
             do not edit. UPDATE_DOCS=1 cargo test -p reconcile reference_pages rewrites it. -->\n\n\
             Every subcommand that judges the stores first waits for the pipeline to drain (the writers' \
             group lag 0 on every partition and the counts stable for two polls), within `--drain-timeout`. \
             `--json` prints one JSON document on standard output instead of text.\n\n\
             ## Exit codes\n\n{exits}\n## Flags and subcommands\n\n{}",
            pipeline_common::reference::flags_markdown(&cmd)
        );
        pipeline_testkit::docs::generated_file("docs/reference/reconcile.md", &page);
        pipeline_testkit::docs::generated_block(
            "docs/reference/configuration.md",
            "reconcile",
            &format!(
                "{}\nThe subcommands and their own flags: [reconcile.md](reconcile.md).",
                pipeline_common::reference::top_flags_markdown(&cmd)
            ),
        );
    }
}
