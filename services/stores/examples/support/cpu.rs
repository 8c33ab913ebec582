//! This process's CPU time, for the examples' "CPU per message" figures.

/// utime + stime of this process, in seconds (from /proc/self/stat; 0 where it cannot be read).
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3. Ticks are 1/100 s.
    (ticks(11) + ticks(12)) / 100.0
}
