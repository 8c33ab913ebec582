//! Freezing a server: SIGSTOP to every process of it, SIGCONT at the end, whatever happens to
//! this process meanwhile.
//!
//! `scripts/stack` starts each server in a session of its own, so its process group is the
//! server (OpenSearch's JVM and its children, nx-27017's Python); a server started another way
//! is its pid and its children. The SIGCONT is sent three ways: by the caller when the freeze
//! ends, by [`Frozen`]'s drop (an error or an interrupt), and by a watchdog started in a session
//! of its own, so that even a SIGKILLed runner leaves no server stopped. The watchdog is a shell
//! (`sleep; kill -CONT`): it must outlive this process, which no task of ours can.

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What to signal: a whole process group, or single pids.
#[derive(Debug, Clone)]
pub(super) enum Target {
    Group(i32),
    Pids(Vec<i32>),
}

impl Target {
    /// The processes of the server whose main pid is `pid`.
    pub(super) fn of(pid: u32) -> Option<Target> {
        let pid = i32::try_from(pid).ok()?;
        let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
        if stat.pgrp == pid {
            return Some(Target::Group(pid));
        }
        let mut pids = vec![pid];
        if let Ok(all) = procfs::process::all_processes() {
            pids.extend(all.flatten().filter_map(|p| p.stat().ok()).filter(|s| s.ppid == pid).map(|s| s.pid));
        }
        Some(Target::Pids(pids))
    }

    fn send(&self, sig: Signal) -> bool {
        match self {
            Target::Group(g) => killpg(Pid::from_raw(*g), sig).is_ok(),
            // Every pid is signalled, even after one fails.
            Target::Pids(p) => p.iter().filter(|pid| kill(Pid::from_raw(**pid), sig).is_err()).count() == 0,
        }
    }

    /// The `kill` arguments that send SIGCONT to the same processes, for the watchdog. In the
    /// form every `sh` takes: dash refuses `kill -CONT -- -PGID` ("Illegal number").
    fn cont_args(&self) -> String {
        match self {
            Target::Group(g) => format!("-s CONT -- -{g}"),
            Target::Pids(p) => format!("-s CONT {}", p.iter().map(i32::to_string).collect::<Vec<_>>().join(" ")),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Target::Group(g) => format!("process group {g}"),
            Target::Pids(p) => format!("pids {p:?}"),
        }
    }
}

/// A frozen server; thawed when [`Frozen::thaw`] is called or when dropped.
pub(super) struct Frozen {
    target: Target,
    watchdog: Option<std::process::Child>,
    thawed: bool,
}

impl Frozen {
    /// SIGSTOPs `target`, with a watchdog that sends SIGCONT after `longest` in any case.
    pub(super) fn freeze(target: Target, longest: Duration) -> Result<Frozen, String> {
        let script = format!("sleep {}; kill {} 2>/dev/null", longest.as_secs().max(1), target.cont_args());
        let watchdog = Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the SIGCONT watchdog (setsid sh): {e}"))?;
        let frozen = Frozen { target, watchdog: Some(watchdog), thawed: false };
        if !frozen.target.send(Signal::SIGSTOP) {
            return Err(format!("SIGSTOP to {} failed", frozen.target.describe()));
        }
        Ok(frozen)
    }

    /// SIGCONT, and the watchdog is no longer needed.
    pub(super) fn thaw(mut self) {
        self.thaw_now();
    }

    fn thaw_now(&mut self) {
        if self.thawed {
            return;
        }
        self.thawed = true;
        self.target.send(Signal::SIGCONT);
        if let Some(mut dog) = self.watchdog.take() {
            // setsid made the shell a session and group leader: its group is it and its sleep.
            if let Ok(pid) = i32::try_from(dog.id()) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = dog.wait();
        }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.thaw_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process frozen and thawed: its state reads T (stopped) while frozen, and the drop of an
    /// unthawed freeze still sends SIGCONT.
    #[test]
    fn a_frozen_process_stops_and_a_dropped_freeze_thaws_it() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = child.id();
        let state = || procfs::process::Process::new(pid as i32).and_then(|p| p.stat()).map(|s| s.state).unwrap_or('?');
        let target = Target::Pids(vec![pid as i32]);
        let frozen = Frozen::freeze(target, Duration::from_secs(20)).expect("freeze");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(state(), 'T');
        drop(frozen);
        std::thread::sleep(Duration::from_millis(200));
        assert_ne!(state(), 'T');
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The watchdog alone thaws a frozen process group (the runner SIGKILLed: no drop runs).
    #[test]
    fn the_watchdog_thaws_a_process_group_by_itself() {
        // setsid makes the sleep a group leader, as scripts/stack starts the servers.
        let mut child = Command::new("setsid").args(["sleep", "30"]).spawn().expect("setsid sleep");
        std::thread::sleep(Duration::from_millis(200));
        let pid = child.id();
        let state = || procfs::process::Process::new(pid as i32).and_then(|p| p.stat()).map(|s| s.state).unwrap_or('?');
        let target = Target::of(pid).expect("a live process");
        assert!(matches!(target, Target::Group(g) if g == pid as i32), "{target:?}");
        let frozen = Frozen::freeze(target, Duration::from_secs(1)).expect("freeze");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(state(), 'T');
        std::mem::forget(frozen);
        for _ in 0..50 {
            if state() != 'T' {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let thawed = state() != 'T';
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
        let _ = child.kill();
        let _ = child.wait();
        assert!(thawed, "the watchdog sent no SIGCONT within 5 s");
    }
}
