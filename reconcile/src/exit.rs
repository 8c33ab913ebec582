//! reconcile's exit codes, what each means, and the answer to bad input. A file of its own,
//! under the commands: every command returns these, and the command line (`cli.rs`), which reads
//! the commands' parsers, shows them in its help; it reads only how an answer prints (`report.rs`).

use crate::report::print_json;
use pipeline_common::reconcile_report::{ErrorAnswer, ErrorKind};

pub(crate) const MISMATCH: u8 = 1;
pub(crate) const BAD_INPUT: u8 = 2;
pub(crate) const NOT_DRAINED: u8 = 3;
pub(crate) const UNREACHABLE: u8 = 4;

/// Every exit code and what it means.
pub(crate) const EXIT_CODES: [(u8, &str); 5] = [
    (0, "all good: every store holds what was expected, or the command did what it was asked"),
    (
        MISMATCH,
        "ids, content or counts differ (or reset left data, repair left something it cannot fix, \
         dlq replay saw a record refused again, replay left a replayed message out of a store or was asked \
         for records past the topic's retention, a dry run found something to write)",
    ),
    (
        BAD_INPUT,
        "bad input: a flag, a file or a combination that cannot be used; nothing was contacted or changed \
         (replay: also a topic or partition the broker does not have, found by asking it)",
    ),
    (NOT_DRAINED, "the pipeline did not drain within --drain-timeout (the lagging partitions are named)"),
    (UNREACHABLE, "a store or the broker could not be reached"),
];

/// The exit codes as `--help` ends with them.
pub(crate) fn exit_codes_help() -> String {
    let lines: Vec<String> = EXIT_CODES.iter().map(|(code, means)| format!("  {code}  {means}")).collect();
    format!("Exit codes:\n{}", lines.join("\n"))
}

/// Reports bad input (as JSON with `--json`) and returns its exit code.
pub(crate) fn bad_input(e: &anyhow::Error, as_json: bool) -> u8 {
    if as_json {
        print_json(&ErrorAnswer { error: ErrorKind::BadInput, detail: format!("{e:#}") });
    } else {
        eprintln!("reconcile: {e:#}");
    }
    BAD_INPUT
}
