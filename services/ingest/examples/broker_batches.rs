//! The broker's own rate, the Kafka reference of the performance figures: N messages like k6's
//! (`k6/lib/message.js`: the same body of word text, ids and names per message), PER to a record
//! as the ingest puts a batch POST's messages in one record (`pipeline_common::record`), produced
//! exactly as the ingest produces them (its producer configuration,
//! `ingest::kafka::producer_client_config`, with its defaults and environment; records without a
//! key) into a fresh 4-partition topic, then consumed back by a fresh group. A record goes
//! through the broker twice in the pipeline (in from the ingest, out to the writer), so the
//! reference rate is N over the time of both halves.
//!
//!   cargo run --release -p ingest --example broker_batches -- [messages] [body-bytes] [per-record] [produce-only]
//!
//! `latency RATE SECONDS [body-bytes]` is the broker's latency reference instead: one record of
//! one message every 1/RATE s (an open loop), each acknowledgement timed from its send; prints
//! p50 and p99 (`experiment bench`'s latency table sets the pipeline's 202 against it).
//!
//! `produce-only` fills the topic the environment names (`KAFKA_TOPIC`) and stops: the backlog
//! a writer drains in `experiment ab --part writer` (every message id new).
//!
//! Prints one line with both halves, the combined rate and this process's CPU per message (the
//! broker's own CPU is read from /proc by `scripts/bench`, which runs this).

use clap::Parser;
use ingest::config::IngestConfig;
use ingest::kafka::producer_client_config;
use pipeline_common::kafka::{client_config, ensure_topic};
use pipeline_common::message::{Limits, NewMessage};
use pipeline_common::procstat::cpu_seconds;
use pipeline_common::record;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::time::{Duration, Instant};

/// k6's body: its ten words in turn, cut to `n` bytes (`k6/lib/message.js`).
fn body(n: usize) -> String {
    const WORDS: [&str; 10] =
        ["order", "shipped", "invoice", "payment", "refund", "hello", "meeting", "report", "delta", "ok"];
    let mut s = String::new();
    let mut i = 0;
    while s.len() < n {
        s.push_str(WORDS[(i * 7 + n) % WORDS.len()]);
        s.push(' ');
        i += 1;
    }
    s.truncate(n);
    s
}

/// Record `r` of the run: `per` messages with their own ids and names, encoded as the ingest does.
fn record_payload(r: usize, per: usize, text: &str) -> anyhow::Result<Vec<u8>> {
    let now = time::OffsetDateTime::now_utc();
    let msgs = (0..per)
        .map(|k| {
            let new = NewMessage {
                id: Some(format!("broker-{}-{r}-{k}", std::process::id())),
                sender: format!("user-{}", (r + k) % 1000),
                recipient: format!("user-{}", (r * 31 + k) % 1000),
                body: text.to_string(),
                sent_at: None,
            };
            new.into_message(Limits::default(), now, 1).map_err(|e| anyhow::anyhow!("{e:?}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut records = record::encode(&msgs, usize::MAX);
    records.pop().ok_or_else(|| anyhow::anyhow!("no record"))
}

/// The produce-acknowledgement latency of single-message records sent at `rate` per second, as
/// a quiet ingest sends them (its producer configuration; acks=all).
async fn latency(mut argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let rate: f64 = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(50.0);
    let secs: f64 = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(30.0);
    let body_bytes: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(256);
    anyhow::ensure!(rate > 0.0 && secs > 0.0, "RATE and SECONDS must be positive");
    let mut cfg = IngestConfig::try_parse_from(["ingest"])?;
    cfg.kafka.topic = format!("bench_broker_latency_{}", std::process::id());
    ensure_topic(&cfg.kafka, &cfg.kafka.topic, 4).await?;
    let producer: FutureProducer = producer_client_config(&cfg.producer()).create()?;
    let payload = record_payload(0, 1, &body(body_bytes))?;
    // One record first, not timed: the producer's first send waits for the topic's metadata
    // and the partition leaders (hundreds of ms), which is start-up, not the acknowledgement.
    let first =
        producer.send_result(FutureRecord::<(), _>::to(&cfg.kafka.topic).payload(&payload)).map_err(|(e, _)| e)?;
    first.await?.map_err(|(e, _)| e)?;
    let n = (rate * secs).ceil() as usize;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let mut acks = tokio::task::JoinSet::new();
    for _ in 0..n {
        tick.tick().await;
        let sent = Instant::now();
        let ack =
            producer.send_result(FutureRecord::<(), _>::to(&cfg.kafka.topic).payload(&payload)).map_err(|(e, _)| e)?;
        acks.spawn(async move {
            match ack.await {
                Ok(Ok(_)) => Ok(sent.elapsed()),
                Ok(Err((e, _))) => Err(anyhow::Error::from(e)),
                Err(_) => Err(anyhow::anyhow!("the producer went away")),
            }
        });
    }
    let mut times = Vec::with_capacity(n);
    while let Some(r) = acks.join_next().await {
        times.push(r??);
    }
    times.sort();
    let at = |q: usize| times[(times.len() * q / 100).min(times.len() - 1)].as_secs_f64() * 1e3;
    println!("broker latency: {n} records of one message at {rate}/s: p50 {:.2} ms, p99 {:.2} ms", at(50), at(99));
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().map(String::as_str) == Some("latency") {
        argv.next();
        return latency(argv).await;
    }
    let n: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(100_000);
    let body_bytes: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(256);
    let per: usize = argv.next().map(|v| v.parse()).transpose()?.unwrap_or(1).max(1);
    let records = n.div_ceil(per);
    let n = records * per;
    let produce_only = argv.next().as_deref() == Some("produce-only");
    let mut cfg = IngestConfig::try_parse_from(["ingest"])?;
    if !produce_only {
        cfg.kafka.topic = format!("bench_broker_{}", std::process::id());
    }
    // Room for every record at once: this benchmark hands them all over before the first
    // delivery report, where the ingest is paced by its requests.
    cfg.producer_queue = cfg.producer_queue.max(records);
    let args = &cfg.kafka;
    ensure_topic(args, &args.topic, 4).await?;
    // Built before the clock starts: the ingest's own encoding is in its CPU, not the broker's.
    let text = body(body_bytes);
    let payloads = (0..records).map(|r| record_payload(r, per, &text)).collect::<anyhow::Result<Vec<_>>>()?;
    let bytes: usize = payloads.iter().map(Vec::len).sum();

    let producer: FutureProducer = producer_client_config(&cfg.producer())
        .set("queue.buffering.max.kbytes", (bytes / 1024 + 1024).to_string())
        .create()?;
    let (t0, c0) = (Instant::now(), cpu_seconds(None).unwrap_or(0.0));
    let mut pending = Vec::with_capacity(records);
    for payload in &payloads {
        pending
            .push(producer.send_result(FutureRecord::<(), _>::to(&args.topic).payload(payload)).map_err(|(e, _)| e)?);
    }
    for p in pending {
        p.await?.map_err(|(e, _)| e)?;
    }
    let (produced, pc) = (t0.elapsed().as_secs_f64(), cpu_seconds(None).unwrap_or(0.0) - c0);
    if produce_only {
        println!("produced {n} messages in {records} records to {} in {produced:.1} s", args.topic);
        return Ok(());
    }

    let consumer: BaseConsumer = client_config(args)
        .set("group.id", format!("{}_group", args.topic))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()?;
    consumer.subscribe(&[&args.topic])?;
    let (t1, c1) = (Instant::now(), cpu_seconds(None).unwrap_or(0.0));
    let mut seen = 0usize;
    while seen < records {
        anyhow::ensure!(t1.elapsed() < Duration::from_secs(300), "consumed {seen} of {records} records in 300 s");
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(_)) => seen += 1,
            Some(Err(e)) => return Err(e.into()),
            None => {}
        }
    }
    let (consumed, cc) = (t1.elapsed().as_secs_f64(), cpu_seconds(None).unwrap_or(0.0) - c1);
    println!(
        "broker: {n} messages in {records} records of ~{} bytes: produce {:.0}/s, consume {:.0}/s, through {:.0} msg/s, {:.1} µs CPU/msg (this process)",
        bytes / records.max(1),
        n as f64 / produced,
        n as f64 / consumed,
        n as f64 / (produced + consumed),
        (pc + cc) * 1e6 / n as f64
    );
    Ok(())
}
