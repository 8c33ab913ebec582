//! The broker's own rate, the Kafka reference of the performance figures: N records of the
//! pipeline's size produced with the pipeline's producer settings (`acks=all`, idempotence, lz4,
//! the ingest's 50 ms linger) into a fresh 4-partition topic, then consumed back by a fresh
//! group. A record goes through the broker twice in the pipeline (in from the ingest, out to
//! the writer), so the reference rate is N over the time of both halves.
//!
//!   cargo run --release -p pipeline-common --example broker_batches -- [records] [bytes]
//!
//! Prints one line with both halves, the combined rate and this process's CPU per record (the
//! broker's own CPU is read from /proc by `scripts/bench`, which runs this).

use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::{client_config, ensure_topic, producer_config};
use pipeline_common::procstat::cpu_seconds;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut argv = std::env::args().skip(1);
    let n: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(100_000);
    let bytes: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(350);
    let mut args = KafkaArgs::from_env();
    args.topic = format!("bench_broker_{}", std::process::id());
    ensure_topic(&args, &args.topic, 4).await?;

    let producer: FutureProducer = producer_config(&args)
        .set("linger.ms", "50")
        .set("queue.buffering.max.messages", "1000000")
        .set("message.timeout.ms", "120000")
        .create()?;
    let payload = "x".repeat(bytes);
    let (t0, c0) = (Instant::now(), cpu_seconds(None).unwrap_or(0.0));
    let mut pending = Vec::with_capacity(n);
    for i in 0..n {
        let key = i.to_string();
        pending.push(producer.send_result(FutureRecord::to(&args.topic).key(&key).payload(&payload)).map_err(|(e, _)| e)?);
    }
    for p in pending {
        p.await?.map_err(|(e, _)| e)?;
    }
    let (produced, pc) = (t0.elapsed().as_secs_f64(), cpu_seconds(None).unwrap_or(0.0) - c0);

    let consumer: BaseConsumer = client_config(&args)
        .set("group.id", format!("{}_group", args.topic))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()?;
    consumer.subscribe(&[&args.topic])?;
    let (t1, c1) = (Instant::now(), cpu_seconds(None).unwrap_or(0.0));
    let mut seen = 0usize;
    while seen < n {
        anyhow::ensure!(t1.elapsed() < Duration::from_secs(300), "consumed {seen} of {n} records in 300 s");
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => seen += usize::from(m.payload().map_or(0, <[u8]>::len) == bytes),
            Some(Err(e)) => return Err(e.into()),
            None => {}
        }
    }
    let (consumed, cc) = (t1.elapsed().as_secs_f64(), cpu_seconds(None).unwrap_or(0.0) - c1);
    println!(
        "broker: {n} records of {bytes} bytes: produce {:.0}/s, consume {:.0}/s, through {:.0} msg/s, {:.1} µs CPU/msg (this process)",
        n as f64 / produced,
        n as f64 / consumed,
        n as f64 / (produced + consumed),
        (pc + cc) * 1e6 / n as f64
    );
    Ok(())
}
