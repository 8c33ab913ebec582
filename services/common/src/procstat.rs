//! CPU time of a process from /proc, for the "CPU per message" figures of the benchmark
//! examples (stores, broker). The experiment runner reads the same fields for every process of
//! a round (services/experiment/src/procs.rs, which also needs the resident size).

/// utime + stime of process `pid` (this process when `None`), in seconds, all threads; `None`
/// where /proc cannot be read.
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = pid.map_or_else(|| "/proc/self/stat".to_string(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(path).ok()?;
    // The fields after the command name (in parentheses, may hold spaces) start at field 3, so
    // utime (14) and stime (15) are the 12th and 13th of them. Linux counts in 1/100 s ticks
    // (USER_HZ, fixed at 100 for user space on every architecture we run).
    let rest = stat.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
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
        assert!(super::cpu_seconds(Some(std::process::id())).is_some());
    }
}
