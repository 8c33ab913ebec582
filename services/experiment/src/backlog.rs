//! A backlog produced straight to the broker (the `broker_batches` example, `produce-only`), for
//! the commands that time the writer alone: `experiment prefill` and `experiment ab --part writer`.
//!
//! The producer sends whole records of [`PER_RECORD`] messages, as the ingest does, so a backlog
//! of N holds N rounded up to a multiple of it: every count expected afterwards must be that, not
//! N (`ab --messages 250` once expected 250 of the 300 produced and called the stores wrong).

use anyhow::Context;
use std::path::Path;

/// Messages per produced record: the ingest's batch of one gathering window at load.
pub(crate) const PER_RECORD: u32 = 100;

/// The messages a backlog of `asked` holds: whole records.
pub(crate) fn whole_records(asked: u32) -> anyhow::Result<u32> {
    asked.div_ceil(PER_RECORD).checked_mul(PER_RECORD).context("--messages is too large")
}

/// Produces a backlog of `asked` new messages (ids `broker-PID-...`) with `producer`, its output
/// in `log`; returns the messages produced ([`whole_records`] of `asked`).
pub(crate) async fn produce(
    producer: &Path,
    asked: u32,
    env: &[(String, String)],
    root: &Path,
    log: &Path,
) -> anyhow::Result<u32> {
    let n = whole_records(asked)?;
    let out = tokio::process::Command::new(producer)
        .args([n.to_string().as_str(), "256", &PER_RECORD.to_string(), "produce-only"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(root)
        .output()
        .await
        .with_context(|| format!("starting the backlog producer {}", producer.display()))?;
    std::fs::write(log, [out.stderr, out.stdout].concat()).with_context(|| format!("writing {}", log.display()))?;
    anyhow::ensure!(out.status.success(), "producing the backlog failed; see {}", log.display());
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_holds_whole_records() {
        // A fill from 683,093 to a million asked 316,907 and the writer stored 317,000.
        assert_eq!(whole_records(316_907).unwrap(), 317_000);
        assert_eq!(whole_records(250).unwrap(), 300);
        assert_eq!(whole_records(400).unwrap(), 400);
        assert!(whole_records(u32::MAX).is_err());
    }
}
