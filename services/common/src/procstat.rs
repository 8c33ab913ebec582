//! CPU time and resident size of a process, and the machine's busy time, from /proc: the one
//! reader behind every "CPU per message" figure (the experiment's sampler, the benchmark
//! examples). It is the `procfs` crate's parser: the command name in `/proc/PID/stat` may hold
//! spaces and parentheses, and the clock tick and page size are the kernel's, not assumed.

use procfs::process::Process;
use procfs::{CurrentSI, KernelStats};

fn ticks() -> f64 {
    procfs::ticks_per_second() as f64
}

/// Process `pid`, or this process when `None`; `None` where /proc cannot be read.
fn process(pid: Option<u32>) -> Option<Process> {
    match pid {
        Some(pid) => Process::new(i32::try_from(pid).ok()?).ok(),
        None => Process::myself().ok(),
    }
}

/// utime + stime of process `pid` (this process when `None`), in seconds, all threads; `None`
/// where /proc cannot be read.
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    cpu_rss(pid).map(|(cpu, _)| cpu)
}

/// CPU seconds (user + system, all threads) and resident bytes of process `pid` (this process
/// when `None`).
pub fn cpu_rss(pid: Option<u32>) -> Option<(f64, u64)> {
    let p = process(pid)?;
    let stat = p.stat().ok()?;
    Some(((stat.utime + stat.stime) as f64 / ticks(), stat.rss * procfs::page_size()))
}

/// CPU seconds (user + system) of each thread of process `pid` (this process when `None`), by
/// thread id: what says which thread of a process spends its CPU.
pub fn thread_cpu_seconds(pid: Option<u32>) -> Option<Vec<(i32, f64)>> {
    let p = process(pid)?;
    let tasks = p.tasks().ok()?;
    // A thread that ends between the listing and its stat is left out, not an error.
    Some(
        tasks
            .flatten()
            .filter_map(|t| Some((t.tid, t.stat().ok().map(|s| (s.utime + s.stime) as f64 / ticks())?)))
            .collect(),
    )
}

/// Voluntary context switches of each thread of process `pid` (this process when `None`) whose
/// name is `name`: how often a thread went to sleep and was woken, the cost a thread that should
/// sleep through an idle spell is judged by (a tick-granular CPU time is too coarse for that).
pub fn thread_switches(pid: Option<u32>, name: &str) -> Option<u64> {
    let p = process(pid)?;
    let tasks = p.tasks().ok()?;
    Some(
        tasks
            .flatten()
            .filter_map(|t| t.status().ok())
            .filter(|s| s.name == name)
            .filter_map(|s| s.voluntary_ctxt_switches)
            .sum(),
    )
}

/// Open file descriptors and threads of process `pid`: what a soak watches for leaks (the
/// descriptors from `/proc/PID/fd`, the threads from its stat line).
pub fn fds_threads(pid: u32) -> Option<(u64, u64)> {
    let p = process(Some(pid))?;
    let threads = u64::try_from(p.stat().ok()?.num_threads).ok()?;
    Some((p.fd_count().ok()? as u64, threads))
}

/// Bytes allocated on disk under `path` (a file, or a folder walked without following links
/// inside it): a server's data as it grows over a soak. Entries that vanish while walked (a
/// compaction deleting a segment) are skipped, not an error.
pub fn disk_bytes(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let top = std::fs::metadata(path).ok()?;
    if !top.is_dir() {
        return Some(top.blocks() * 512);
    }
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let Ok(m) = e.path().symlink_metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.blocks() * 512;
            }
        }
    }
    Some(total)
}

/// CPU seconds the whole machine spent busy (all cores, everything but idle and iowait): set
/// against the sampled processes, it shows load from outside the experiment.
pub fn machine_busy() -> Option<f64> {
    let t = KernelStats::current().ok()?.total;
    let busy = t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0) + t.steal.unwrap_or(0);
    Some(busy as f64 / ticks())
}

#[cfg(test)]
mod tests {
    #[test]
    fn own_cpu_grows_with_work() {
        let before = super::cpu_seconds(None).expect("own /proc");
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(super::cpu_seconds(None).expect("own /proc") > before, "{x}");
        let (cpu, rss) = super::cpu_rss(Some(std::process::id())).expect("own pid");
        assert!(cpu > 0.0 && rss > 0);
        assert!(super::machine_busy().expect("/proc/stat") > 0.0);
        let (fds, threads) = super::fds_threads(std::process::id()).expect("own fds and threads");
        assert!(fds >= 3 && threads >= 1, "{fds} fds, {threads} threads");
        let per_thread = super::thread_cpu_seconds(None).expect("own threads");
        assert!(!per_thread.is_empty() && per_thread.iter().any(|(_, cpu)| *cpu > 0.0), "{per_thread:?}");
        // A thread of ours that slept ten times has switched at least ten times (it waits, alive,
        // until it has been read).
        let (slept, read) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let t = std::thread::Builder::new()
            .name("switch-probe".into())
            .spawn(move || {
                (0..10).for_each(|_| std::thread::sleep(std::time::Duration::from_millis(1)));
                slept.0.send(()).expect("main thread");
                let _ = read.1.recv();
            })
            .expect("spawn");
        slept.1.recv().expect("probe thread");
        let switches = super::thread_switches(None, "switch-probe");
        drop(read.0);
        t.join().expect("probe thread");
        assert!(switches.is_some_and(|n| n >= 10), "{switches:?}");
        assert_eq!(super::thread_switches(None, "no-such-thread"), Some(0));
    }

    #[test]
    fn disk_bytes_add_up_a_folder() {
        let dir = tempfile::tempdir().expect("temp dir");
        let before = super::disk_bytes(dir.path()).expect("an empty folder");
        std::fs::create_dir(dir.path().join("sub")).expect("sub folder");
        std::fs::write(dir.path().join("sub/a"), vec![7u8; 64 * 1024]).expect("a file");
        let after = super::disk_bytes(dir.path()).expect("the folder");
        assert!(after >= before + 64 * 1024, "{before} -> {after}");
        assert_eq!(super::disk_bytes(&dir.path().join("absent")), None);
    }

    /// A command name with a space and a parenthesis, the case a split on whitespace gets wrong.
    #[test]
    fn a_process_name_with_spaces_is_read() {
        // The kernel's comm is the executable's file name: a copy of sleep under such a name.
        let dir = std::env::temp_dir().join(format!("procstat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let odd = dir.join("odd (na) me");
        std::fs::copy("/bin/sleep", &odd).expect("a copy of /bin/sleep");
        let mut child = std::process::Command::new(&odd).arg("5").spawn().expect("the copy runs");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let got = super::cpu_rss(Some(child.id()));
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        let (_, rss) = got.expect("read despite the name");
        assert!(rss > 0);
    }
}
