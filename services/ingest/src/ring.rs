//! The ring: a `disruptor` multi-producer ring buffer between the HTTP workers and the Kafka
//! producer.
//!
//! HTTP workers claim preallocated slots with `try_publish` (never blocking: a full ring is an
//! immediate 503); one consumer thread drains whole batches into librdkafka. The consumer waits
//! with the `Sleep` strategy, so an idle ingest sleeps instead of spinning on a 2-core machine.
//! Slots hold their entry behind an uncontended mutex because the disruptor hands consumers
//! `&E` and the consumer must move the entry (and its acknowledgement channel) out.

use crate::kafka::{Pending, Publisher};
use disruptor::{build_multi_producer, MultiProducer, Producer, SingleConsumerBarrier, Sleep};
use metrics::{counter, gauge, histogram};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What a request puts in the ring.
pub struct Entry {
    pub key: String,
    pub payload: Vec<u8>,
    /// `Some` in `--ack kafka` mode: the delivery report is sent here.
    pub ack: Option<oneshot::Sender<Result<(), String>>>,
}

#[derive(Default)]
pub struct Slot(Mutex<Option<Entry>>);

/// Published and drained counts, for the occupancy gauge.
#[derive(Default)]
struct Counts {
    published: AtomicU64,
    drained: AtomicU64,
}

/// The ring is full (or has fewer free slots than a batch needs).
#[derive(Debug)]
pub struct RingFull;

/// One producer handle. Each HTTP worker owns a clone; the ring shuts down (after draining
/// every published entry) when the last clone is dropped.
#[derive(Clone)]
pub struct Ring {
    producer: MultiProducer<Slot, SingleConsumerBarrier>,
    counts: Arc<Counts>,
}

impl Ring {
    pub fn start(size: usize, idle_sleep: Duration, publisher: Publisher) -> Ring {
        gauge!("ingest_ring_capacity").set(size as f64);
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let mut batch: Vec<Pending> = Vec::new();
        let handler = move |slot: &Slot, _seq: i64, end_of_batch: bool| {
            if let Some(entry) = slot.0.lock().expect("slot lock").take() {
                batch.push(Pending { key: entry.key, payload: entry.payload, ack: entry.ack, since: Instant::now() });
            }
            if end_of_batch {
                histogram!("ingest_ring_drain_batch_records").record(batch.len() as f64);
                let n = batch.len() as u64;
                publisher.send_all(batch.drain(..));
                let drained = c.drained.fetch_add(n, Ordering::Relaxed) + n;
                gauge!("ingest_ring_occupancy")
                    .set((c.published.load(Ordering::Relaxed).saturating_sub(drained)) as f64);
            }
        };
        let producer =
            build_multi_producer(size, Slot::default, Sleep::new(idle_sleep)).handle_events_with(handler).build();
        Ring { producer, counts }
    }

    /// Puts one entry in the ring, or fails at once when it is full.
    pub fn try_put(&mut self, entry: Entry) -> Result<(), RingFull> {
        let mut entry = Some(entry);
        match self.producer.try_publish(|slot| *slot.0.lock().expect("slot lock") = entry.take()) {
            Ok(_) => {
                self.counts.published.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => {
                counter!("ingest_ring_rejections_total").increment(1);
                Err(RingFull)
            }
        }
    }

    /// Puts all entries in the ring or none of them, so a 503 never leaves half a batch behind.
    pub fn try_put_all(&mut self, entries: Vec<Entry>) -> Result<(), RingFull> {
        let n = entries.len();
        let mut it = entries.into_iter();
        match self.producer.try_batch_publish(n, |slots| {
            for slot in slots {
                *slot.0.lock().expect("slot lock") = it.next();
            }
        }) {
            Ok(_) => {
                self.counts.published.fetch_add(n as u64, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => {
                counter!("ingest_ring_rejections_total").increment(1);
                Err(RingFull)
            }
        }
    }
}
