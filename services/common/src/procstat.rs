//! CPU time and resident size of a process, and the machine's busy time, from /proc: the one
//! reader behind every "CPU per message" figure (the experiment's sampler, the benchmark
//! examples). It is the `procfs` crate's parser: the command name in `/proc/PID/stat` may hold
//! spaces and parentheses, and the clock tick and page size are the kernel's, not assumed.

use procfs::process::Process;
use procfs::{CurrentSI, KernelStats};

fn ticks() -> f64 {
    procfs::ticks_per_second() as f64
}

/// utime + stime of process `pid` (this process when `None`), in seconds, all threads; `None`
/// where /proc cannot be read.
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    cpu_rss(pid).map(|(cpu, _)| cpu)
}

/// CPU seconds (user + system, all threads) and resident bytes of process `pid` (this process
/// when `None`).
pub fn cpu_rss(pid: Option<u32>) -> Option<(f64, u64)> {
    let p = match pid {
        Some(pid) => Process::new(i32::try_from(pid).ok()?).ok()?,
        None => Process::myself().ok()?,
    };
    let stat = p.stat().ok()?;
    Some(((stat.utime + stat.stime) as f64 / ticks(), stat.rss * procfs::page_size()))
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
