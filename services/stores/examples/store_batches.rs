//! Times one store's batch writes alone: the "server's own rate" reference of the performance
//! figures, and the check that a change to an adapter's write path pays.
//!
//!   cargo run --release -p pipeline-stores --example store_batches -- <store> [batches] [batch size] [in flight]
//!
//! Writes `batches` batches (default 200) of `batch size` (default 143, the writer's mean batch
//! under 250 VUs) fresh messages of ~150 bytes, `in flight` batches at a time (default 1; the
//! writer has up to one per partition, 4, in flight per store), into a private namespace of that
//! store (dropped after), and prints the mean and p99 time per batch, messages/s and this
//! process's CPU per message (from /proc/self/stat).

use futures::stream::{self, StreamExt};
use pipeline_common::procstat::cpu_seconds;
use pipeline_stores::{StoreArgs, StoreKind};
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut argv = std::env::args().skip(1);
    let kind: StoreKind = clap::ValueEnum::from_str(&argv.next().unwrap_or_else(|| "mysql".into()), true)
        .map_err(|e| anyhow::anyhow!("store: {e}"))?;
    let batches: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(200);
    let size: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(143);
    let in_flight: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(1).max(1);
    let mut args = StoreArgs::from_env();
    // `t_` like the tests' namespaces, so `scripts/test` drops what is left of it.
    let ns = format!("t_bench_{}", std::process::id());
    pipeline_stores::isolate(&mut args, &ns, pipeline_stores::Slot::Examples).await?;
    let store = pipeline_stores::connect(&args, &[kind]).await?.remove(0);
    store.prepare().await?;
    store.reset().await?;
    let msgs = pipeline_testkit::messages(batches * size, &ns);
    let (t0, cpu0) = (Instant::now(), cpu_seconds(None).unwrap_or(0.0));
    let store = &store;
    let timed = stream::iter(msgs.chunks(size))
        .map(|batch| async move {
            let t = Instant::now();
            let refused = store.write(batch, pipeline_stores::Overwrite::Older).await?;
            anyhow::ensure!(refused.is_empty(), "{kind} refused {} records", refused.len());
            Ok(t.elapsed())
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<anyhow::Result<Duration>>>()
        .await;
    let mut times = timed.into_iter().collect::<anyhow::Result<Vec<Duration>>>()?;
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds(None).unwrap_or(0.0) - cpu0);
    times.sort();
    let mean = times.iter().sum::<Duration>() / times.len().max(1) as u32;
    let p99 = times[(times.len() * 99 / 100).min(times.len() - 1)];
    let n = msgs.len();
    println!(
        "{kind}: {batches} batches of {size}, {in_flight} in flight: mean {:.2} ms, p99 {:.2} ms per batch, {:.0} msg/s, {:.1} µs CPU/msg (this process)",
        mean.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        n as f64 / wall,
        cpu * 1e6 / n as f64
    );
    anyhow::ensure!(store.count().await? == n as u64, "{kind} holds a different count than written");
    store.reset().await?;
    Ok(())
}
