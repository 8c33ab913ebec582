//! Reloading a setting the ingest reads from files (the API keys, the TLS pair) while it runs:
//! on SIGHUP, and when a file's modification time or size changes.
//!
//! Hand-written rather than an inotify crate (`notify`): a look every 2 s at two stamps is all it
//! needs, and it sees what an event watch misses — a Kubernetes secret volume swaps its files by
//! replacing a symlink two levels up, and a file on a network mount sends no events at all.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How often the files are looked at.
const LOOK_EVERY: Duration = Duration::from_secs(2);

/// When a change seen in the files is acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settle {
    /// At the first look that sees it: one file, written whole (the keys file).
    AtOnce,
    /// Once the files held still for one look: a pair replaced one file after the other (a
    /// certificate and its key) is read once both are in place, not refused half-way.
    OneLook,
}

/// A file's modification time and size, or `None` while it is missing or unreadable.
type Stamp = Option<(SystemTime, u64)>;

fn stamps(paths: &[PathBuf]) -> Vec<Stamp> {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).ok().map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len())))
        .collect()
}

/// What one look decides, given the stamps at the last load and a change waiting to settle.
/// Apart from the loop so the settling rule is tested without a clock.
fn decide(
    settle: Settle,
    signalled: bool,
    now: &[Stamp],
    seen: &mut Vec<Stamp>,
    pending: &mut Option<Vec<Stamp>>,
) -> bool {
    let changed = now != seen.as_slice();
    let load = signalled || (changed && (settle == Settle::AtOnce || pending.as_deref() == Some(now)));
    if load {
        *seen = now.to_vec();
        *pending = None;
    } else if changed {
        *pending = Some(now.to_vec());
    }
    load
}

/// Calls `reload` on SIGHUP and when `paths` change (as `settle` says). `what` names the setting
/// in the warning logged when no SIGHUP handler can be installed. Runs until the runtime stops.
pub(crate) async fn watch(paths: Vec<PathBuf>, settle: Settle, what: &'static str, reload: impl Fn()) {
    let mut seen = stamps(&paths);
    let mut pending = None;
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "no SIGHUP handler: {what} reloaded when the files change only");
            None
        }
    };
    let mut tick = tokio::time::interval(LOOK_EVERY);
    loop {
        let hangup = async {
            match hup.as_mut() {
                Some(h) => h.recv().await,
                None => std::future::pending().await,
            }
        };
        let signalled = tokio::select! {
            _ = tick.tick() => false,
            Some(()) = hangup => true,
        };
        if decide(settle, signalled, &stamps(&paths), &mut seen, &mut pending) {
            reload();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Vec<Stamp> {
        vec![Some((SystemTime::UNIX_EPOCH + Duration::from_secs(s), 1))]
    }

    #[test]
    fn at_once_loads_the_first_look_that_sees_a_change() {
        let (mut seen, mut pending) = (at(1), None);
        assert!(!decide(Settle::AtOnce, false, &at(1), &mut seen, &mut pending));
        assert!(decide(Settle::AtOnce, false, &at(2), &mut seen, &mut pending));
        assert_eq!(seen, at(2));
    }

    #[test]
    fn one_look_waits_until_the_files_hold_still() {
        let (mut seen, mut pending) = (at(1), None);
        assert!(!decide(Settle::OneLook, false, &at(2), &mut seen, &mut pending), "changed: wait");
        assert!(!decide(Settle::OneLook, false, &at(3), &mut seen, &mut pending), "changed again: wait");
        assert!(decide(Settle::OneLook, false, &at(3), &mut seen, &mut pending), "held still: load");
        assert!(!decide(Settle::OneLook, false, &at(3), &mut seen, &mut pending), "loaded once");
    }

    #[test]
    fn a_signal_loads_at_once_whatever_the_files_do() {
        for settle in [Settle::AtOnce, Settle::OneLook] {
            let (mut seen, mut pending) = (at(1), Some(at(2)));
            assert!(decide(settle, true, &at(1), &mut seen, &mut pending));
            assert_eq!(pending, None);
        }
    }
}
