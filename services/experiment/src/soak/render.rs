//! The soak's section of report.md: the verdict with its checks, then one table per kind of
//! figure, a row per window, so a drift can be read off without the chart.

use super::{minutes, Soak, Window};
use std::fmt::Write;

const MIB: f64 = 1048576.0;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

/// Every process that appears in any window, ours first (the report's order).
fn processes(s: &Soak) -> Vec<String> {
    let mut names: Vec<String> = crate::stats::processes().iter().map(|p| p.to_string()).collect();
    names.retain(|n| s.windows.iter().any(|w| w.procs.contains_key(n)));
    names
}

fn table(out: &mut String, s: &Soak, head: &[String], row: &dyn Fn(&Window) -> Vec<String>) {
    let _ = writeln!(out, "| from minute | {} |", head.join(" | "));
    let _ = writeln!(out, "|---:|{}", "---:|".repeat(head.len()));
    for w in &s.windows {
        let _ = writeln!(out, "| {} | {} |", minutes(w.start_s), row(w).join(" | "));
    }
    out.push('\n');
}

pub(crate) fn render(s: &Soak) -> String {
    let mut out = String::new();
    let verdict = if s.flat() { "**flat**" } else { "**not flat**" };
    let _ = writeln!(
        out,
        "\n## Soak\n\nRound `{}`: an open loop at {} requests/s, {} windows of {:.0} s. Verdict: {verdict}.\n",
        s.round,
        s.target_rate,
        s.windows.len(),
        s.window_s
    );
    let _ = writeln!(
        out,
        "The first and the last {} windows are compared (k6's own p50/p99 over all their requests: first {} / {} ms, last {} / {} ms). Our processes are judged; the servers' memory and files are shown only (Redis holds every message in memory, MariaDB's buffer pool fills as the tables grow).\n",
        s.edge,
        opt(s.first.0, 1),
        opt(s.first.1, 1),
        opt(s.last.0, 1),
        opt(s.last.1, 1)
    );
    out.push_str("| check | ok | detail |\n|---|---|---|\n");
    for c in &s.checks {
        let _ = writeln!(out, "| {} | {} | {} |", c.what, if c.ok { "yes" } else { "**NO**" }, c.detail);
    }
    out.push_str("\n![soak](soak.png)\n\n### Load and latency per window\n\n");
    let head = ["requests/s", "errors", "p50 ms", "p99 ms"].map(String::from);
    table(&mut out, s, &head, &|w| {
        vec![format!("{:.1}", w.rate()), format!("{:.0}", w.errors), opt(w.p50, 1), opt(w.p99, 1)]
    });
    let procs = processes(s);
    let field = |w: &Window, p: &str, f: fn(&super::ProcWindow) -> Option<f64>, scale: f64, d: usize| {
        opt(w.procs.get(p).and_then(f).map(|v| v / scale), d)
    };
    out.push_str("### CPU per message (µs), per process\n\n");
    table(&mut out, s, &procs, &|w| procs.iter().map(|p| field(w, p, |x| x.cpu_us_per_msg, 1.0, 0)).collect());
    out.push_str("### Resident memory (MiB), per process\n\n");
    table(&mut out, s, &procs, &|w| procs.iter().map(|p| field(w, p, |x| x.rss_bytes, MIB, 1)).collect());
    out.push_str("### Open file descriptors / threads, per process\n\n");
    table(&mut out, s, &procs, &|w| {
        procs
            .iter()
            .map(|p| format!("{} / {}", field(w, p, |x| x.fds, 1.0, 0), field(w, p, |x| x.threads, 1.0, 0)))
            .collect()
    });
    let servers: Vec<String> = s.windows.last().map(|w| w.data_bytes.keys().cloned().collect()).unwrap_or_default();
    if !servers.is_empty() {
        out.push_str("### Data on disk (MiB), per server\n\n");
        table(&mut out, s, &servers, &|w| {
            servers.iter().map(|k| opt(w.data_bytes.get(k).map(|b| b / MIB), 1)).collect()
        });
    }
    out
}
