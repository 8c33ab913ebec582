//! Measures what a `deadpool` connection pool would change for the store with the most to gain,
//! Redis: the writer's pooled jobs write batches concurrently, and `RedisStore` sends all of
//! them down ONE multiplexed connection (`ConnectionManager`), while `deadpool-redis` would give
//! each concurrent job a connection of its own.
//!
//!   cargo run --release -p pipeline-stores --example redis_pools [batches] [concurrency...]
//!
//! Writes `batches` × 100 messages with each concurrency, both ways, into Redis database 2
//! (flushed before and after), and prints wall time, messages/s and this process's CPU per
//! message (from /proc/self/stat). The pooled side sends a pipeline of `SET msg:<id>`, what
//! `RedisStore::write` sent when the measurement in docs/results/2026-11-30-redis-connection-pools.md
//! was made; `RedisStore::write` now sends one script call (the version rule), so the two sides
//! no longer do the same server work.

use deadpool_redis::{Config, Runtime};
use futures::stream::{self, StreamExt};
use pipeline_common::procstat::cpu_seconds;
use pipeline_stores::redis::{RedisArgs, RedisStore};
use pipeline_stores::{Backend, Sink};
use std::time::Instant;

const BATCH: usize = 100;

fn pipeline_for(batch: &[pipeline_common::Message]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for m in batch {
        pipe.set(format!("msg:{}", m.id), m.to_json()).ignore();
    }
    pipe
}

async fn flush(url: &str) -> anyhow::Result<()> {
    let mut conn = redis::Client::open(url)?.get_multiplexed_async_connection().await?;
    redis::cmd("FLUSHDB").query_async::<()>(&mut conn).await?;
    Ok(())
}

fn report(way: &str, concurrency: usize, n: usize, wall: f64, cpu: f64) {
    println!(
        "{way:<28} concurrency {concurrency:>2}: {n} messages in {wall:.2} s = {:>7.0} msg/s, {:>5.1} µs CPU/msg (this process)",
        n as f64 / wall,
        cpu * 1e6 / n as f64
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut argv = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let batches = argv.next().transpose()?.unwrap_or(2000);
    let levels: Vec<usize> = argv.collect::<Result<_, _>>()?;
    let levels = if levels.is_empty() { vec![1, 4, 12] } else { levels };
    let mut url = url::Url::parse(&std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into()))?;
    url.set_path("/2");
    let url = url.to_string();
    let msgs = pipeline_testkit::messages(batches * BATCH, "pools");
    let batches: Vec<&[pipeline_common::Message]> = msgs.chunks(BATCH).collect();
    let n = msgs.len();

    for &c in &levels {
        flush(&url).await?;
        let store = RedisStore::connect(&RedisArgs { url: url.clone(), url_file: None, ca_file: None }).await?;
        let (t, cpu) = (Instant::now(), cpu_seconds(None).unwrap_or(0.0));
        let results: Vec<_> = stream::iter(&batches)
            .map(|b| store.write(b, pipeline_stores::Overwrite::Older))
            .buffer_unordered(c)
            .collect()
            .await;
        report("one multiplexed connection", c, n, t.elapsed().as_secs_f64(), cpu_seconds(None).unwrap_or(0.0) - cpu);
        results.into_iter().collect::<Result<Vec<_>, _>>()?;

        flush(&url).await?;
        let pool = Config::from_url(url.clone()).builder()?.max_size(c).runtime(Runtime::Tokio1).build()?;
        // Open the pool's connections before the clock starts, as a long-running writer would have.
        let warm: Vec<_> = futures::future::join_all((0..c).map(|_| pool.get())).await;
        drop(warm.into_iter().collect::<Result<Vec<_>, _>>()?);
        let (t, cpu) = (Instant::now(), cpu_seconds(None).unwrap_or(0.0));
        let results: Vec<anyhow::Result<()>> = stream::iter(&batches)
            .map(|b| {
                let pool = pool.clone();
                async move {
                    let mut conn = pool.get().await?;
                    pipeline_for(b).query_async::<()>(&mut conn).await?;
                    Ok(())
                }
            })
            .buffer_unordered(c)
            .collect()
            .await;
        report(
            &format!("deadpool-redis (max {c})"),
            c,
            n,
            t.elapsed().as_secs_f64(),
            cpu_seconds(None).unwrap_or(0.0) - cpu,
        );
        results.into_iter().collect::<Result<Vec<_>, _>>()?;
    }
    flush(&url).await
}
