//! The broker beside a round: a light probe of Kafka's acknowledgement during the round's
//! measured phase (`ingest/examples/broker_batches.rs latency`: one-message records at a low rate,
//! the ingest's producer settings, each acknowledgement timed from its send).
//!
//! Why: the bench's latency references run alone, but on a 2-core machine a pipeline round keeps
//! the cores busy (k6, five servers, ingest and writer), and a reference taken on an idle machine
//! does not say what any producer's acknowledgement costs under that load. The probe does: its p99
//! beside the pipeline's says how much of the pipeline's tail a bystander client of the same
//! broker on the same machine sees too. It adds its own records to the broker, and the broker's
//! work is per record (a one-message record costs tansu about what a gathered record of many
//! requests does), so the bench probes at [`BENCH_RATE`]: a few percent of the records a round
//! makes, and still a thousand acknowledgements or more per measured phase for a p99.

use std::path::Path;
use std::time::Duration;
use tracing::warn;

/// The bench's probe rate, one-message records per second. It once probed at 5 % of the knee
/// (~150/s), as many records as the pipeline's own round made at 50 %: it loaded the broker it
/// measured.
pub(crate) const BENCH_RATE: u32 = 20;

/// The probe's output in the round's folder.
pub(crate) const FILE: &str = "broker-beside.txt";

/// Where the probe runs and for how long.
pub(crate) struct Probe<'a> {
    /// The folder of the round's binaries; the probe is its `examples/broker_batches`.
    pub bins: &'a Path,
    pub root: &'a Path,
    /// The round's evidence folder.
    pub dir: &'a Path,
    /// One-message records per second.
    pub rate: u32,
    /// When the measured phase starts, from now.
    pub from: Duration,
    /// The measured phase's length.
    pub secs: f64,
}

/// Waits for the measured phase, runs the probe through it, and writes what it printed (or why
/// it did not run) to [`FILE`]. A probe that fails leaves the round as it is: it is evidence
/// beside the round, not part of it.
pub(crate) async fn run(p: Probe<'_>) {
    tokio::time::sleep(p.from).await;
    let bin = p.bins.join("examples").join("broker_batches");
    let secs = (p.secs.ceil() as u64).max(1).to_string();
    let text = match crate::procs::run_to_end(&bin, &["latency", &p.rate.to_string(), &secs], p.root).await {
        Ok((status, text)) if status.success() => text,
        Ok((status, text)) => format!("{text}probe failed: {status}\n"),
        Err(e) => format!("probe not started: {}: {e}\n", bin.display()),
    };
    if let Err(e) = std::fs::write(p.dir.join(FILE), text) {
        warn!("writing {}: {e}", p.dir.join(FILE).display());
    }
}

/// p50 and p99 in ms from the probe's last line (`… p50 1.58 ms, p99 70.56 ms`); none when the
/// probe did not run or failed.
pub(crate) fn read(round_dir: &Path) -> (Option<f64>, Option<f64>) {
    let text = std::fs::read_to_string(round_dir.join(FILE)).unwrap_or_default();
    latency_line(text.lines().last().unwrap_or(""))
}

/// p50 and p99 of `broker_batches latency`'s line.
pub(crate) fn latency_line(line: &str) -> (Option<f64>, Option<f64>) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let after =
        |word: &str| words.windows(2).find(|w| w[0] == word).and_then(|w| w[1].trim_end_matches(',').parse().ok());
    (after("p50"), after("p99"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_probe_line_and_nothing_from_a_failure() {
        let line = "broker latency: 7470 records of one message at 166/s: p50 1.58 ms, p99 70.56 ms";
        assert_eq!(latency_line(line), (Some(1.58), Some(70.56)));
        assert_eq!(latency_line("probe failed: exit status: 1"), (None, None));
        let dir = std::env::temp_dir().join(format!("beside-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir), (None, None));
        std::fs::write(dir.join(FILE), format!("connecting\n{line}\n")).unwrap();
        assert_eq!(read(&dir), (Some(1.58), Some(70.56)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
