//! What reading a whole store back costs as it grows: reconcile's audit (every id and content
//! digest) timed, with the server's CPU and its highest resident memory while it answers.
//!
//!   cargo run --release -p pipeline-stores --example store_audit -- <store> fill <messages>
//!   cargo run --release -p pipeline-stores --example store_audit -- <store> audit [server pid]
//!   cargo run --release -p pipeline-stores --example store_audit -- <store> drop
//!
//! `fill` writes that many messages (~150 bytes of body, batches of 1,000, 4 in flight) into the
//! namespace `t_scale` of that store (`t_` like the tests', so `scripts/test` drops what is left);
//! `audit` reads them back once and prints the time, the count, and, given the server's pid
//! (`.stack/<store>.pid`), the server's CPU over the audit and its largest RSS sampled every
//! 100 ms; `drop` empties the namespace. Separate steps so that two builds of the audit can be
//! timed against one fill.

use futures::stream::{self, StreamExt, TryStreamExt};
use pipeline_common::procstat::{cpu_rss, cpu_seconds};
use pipeline_stores::{StoreArgs, StoreKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let usage = || anyhow::anyhow!("usage: store_audit <store> fill N | audit [pid] | drop");
    let kind: StoreKind =
        clap::ValueEnum::from_str(argv.first().ok_or_else(usage)?, true).map_err(|e| anyhow::anyhow!("store: {e}"))?;
    let mut args = StoreArgs::from_env();
    pipeline_stores::isolate(&mut args, "t_scale", pipeline_stores::Slot::Examples).await?;
    let store = pipeline_stores::connect(&args, &[kind]).await?.remove(0);
    store.prepare().await?;
    let pid = |i: usize| argv.get(i).map(|p| p.parse::<u32>()).transpose();
    match argv.get(1).map(String::as_str) {
        Some("fill") => {
            let n: usize = argv.get(2).ok_or_else(usage)?.parse()?;
            let t0 = Instant::now();
            let store = &store;
            stream::iter((0..n).step_by(1000))
                .map(|from| async move {
                    let batch = pipeline_testkit::messages((n - from).min(1000), &format!("scale-{from:09}"));
                    let refused = store.write(&batch, pipeline_stores::Overwrite::Older).await?;
                    anyhow::ensure!(refused.is_empty(), "{kind} refused {} records", refused.len());
                    Ok(())
                })
                .buffer_unordered(4)
                .try_collect::<()>()
                .await?;
            println!("{kind}: filled {n} in {:.0} s; holds {}", t0.elapsed().as_secs_f64(), store.count().await?);
        }
        Some("audit") => {
            let pid = pid(2)?;
            let peak = Arc::new(AtomicU64::new(cpu_rss(pid).map_or(0, |r| r.1)));
            let sampler = {
                let peak = peak.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if let Some((_, rss)) = cpu_rss(pid) {
                            peak.fetch_max(rss, Ordering::Relaxed);
                        }
                    }
                })
            };
            let rss0 = cpu_rss(pid).map_or(0, |r| r.1);
            let (t0, cpu0) = (Instant::now(), cpu_seconds(pid));
            let audited = store.audit("").await?;
            let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds(pid).zip(cpu0).map(|(b, a)| b - a));
            sampler.abort();
            let mib = |b: u64| b as f64 / (1 << 20) as f64;
            println!(
                "{kind}: audited {} documents in {secs:.1} s ({:.0}/s); server CPU {}; server RSS {:.0} MiB before, {:.0} MiB at most",
                audited.len(),
                audited.len() as f64 / secs,
                cpu.map_or("not read".into(), |c| format!("{c:.1} s")),
                mib(rss0),
                mib(peak.load(Ordering::Relaxed)),
            );
        }
        Some("drop") => {
            store.reset().await?;
            println!("{kind}: t_scale emptied");
        }
        _ => return Err(usage()),
    }
    Ok(())
}
