//! The ring: a `disruptor` multi-producer ring buffer between the HTTP workers and the Kafka
//! producer.
//!
//! HTTP workers claim preallocated slots with `try_publish` (never blocking: a full ring is an
//! immediate 503); one consumer thread drains whole batches into librdkafka. The consumer waits
//! with [`Backoff`]: it sleeps, never spins, and sleeps longer the longer the ring stays idle, so
//! an idle ingest costs almost nothing on a 2-core machine that also runs k6 and five servers.
//! Slots hold their entry behind an uncontended mutex because the disruptor hands consumers
//! `&E` and the consumer must move the entry (and its acknowledgement channel) out.
//!
//! A slot holds one Kafka record: a single POST's message, or a batch POST's messages as one
//! array (`pipeline_common::record`, cut at `--record-max-bytes`). The ring is bounded in bytes
//! as well as in slots: 131,072 slots of records up to 256 KB each would be gigabytes. A put
//! that would pass the byte bound is a 503 like a full ring.

use crate::kafka::{Ack, Pending, Publisher};
use disruptor::wait_strategies::WaitStrategy;
use disruptor::{build_multi_producer, MultiProducer, Producer, Sequence, SingleConsumerBarrier};
use metrics::{counter, gauge, histogram};
use pipeline_common::catalog;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a request puts in the ring.
pub struct Entry {
    pub payload: Vec<u8>,
    /// `Some` in `--ack kafka` mode: the delivery report is sent here.
    pub ack: Option<Ack>,
}

impl Entry {
    fn bytes(&self) -> u64 {
        self.payload.len() as u64
    }
}

#[derive(Default)]
pub struct Slot(Mutex<Option<Entry>>);

/// A slot's entry. Never contended (the disruptor hands a slot to one side at a time); a
/// poisoned lock still holds a consistent `Option`, so take it rather than panic.
fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<Entry>> {
    slot.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Exponential sleep while the ring is idle: 1 ms after the last event, doubling on every
/// further empty look, up to `max`. (The crate's `Sleep` sleeps a fixed time: 500 µs cost 5 % of
/// a core while idle, measured with /proc; a fixed 10 ms would add 10 ms to every quiet request.)
/// It starts at 1 ms, not less: under load the ring is empty for moments between requests, and
/// 50 µs naps there were tens of thousands of wake-ups a second; 1 ms is small next to the
/// producer's linger, and a drain then takes more records at once.
#[derive(Clone, Copy)]
pub struct Backoff {
    max: Duration,
}

const BACKOFF_MIN: Duration = Duration::from_micros(1000);

thread_local! {
    /// (sequence waited for, empty looks at it so far): the strategy itself must be `Copy`.
    static IDLE: Cell<(Sequence, u32)> = const { Cell::new((-1, 0)) };
}

impl WaitStrategy for Backoff {
    fn wait_for(&self, sequence: Sequence) {
        let looks = IDLE.with(|c| {
            let (seq, n) = c.get();
            let n = if seq == sequence { n.saturating_add(1) } else { 0 };
            c.set((sequence, n));
            n
        });
        std::thread::sleep(BACKOFF_MIN.saturating_mul(1 << looks.min(16)).min(self.max));
    }
}

/// Published and drained counts, for the occupancy gauge, and the bytes held.
#[derive(Default)]
struct Counts {
    published: AtomicU64,
    drained: AtomicU64,
    bytes: AtomicU64,
    max_bytes: u64,
}

impl Counts {
    /// Reserves room for `n` bytes, or refuses when that would pass the bound. An empty ring
    /// always takes one put, so a single message larger than the bound is never refused forever.
    fn reserve(&self, n: u64) -> bool {
        let before = self.bytes.fetch_add(n, Ordering::AcqRel);
        if before > 0 && before + n > self.max_bytes {
            self.bytes.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        true
    }
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
    /// A ring of `size` slots holding at most `max_bytes` of records.
    pub fn start(size: usize, max_bytes: u64, idle_sleep_max: Duration, publisher: Publisher) -> Ring {
        gauge!(catalog::INGEST_RING_CAPACITY).set(size as f64);
        gauge!(catalog::INGEST_RING_CAPACITY_BYTES).set(max_bytes as f64);
        let counts = Arc::new(Counts { max_bytes, ..Counts::default() });
        let c = counts.clone();
        let mut batch: Vec<Pending> = Vec::new();
        let mut batch_bytes = 0u64;
        let handler = move |slot: &Slot, _seq: i64, end_of_batch: bool| {
            if let Some(entry) = lock(slot).take() {
                batch_bytes += entry.bytes();
                batch.push(Pending { payload: entry.payload, ack: entry.ack, since: Instant::now() });
            }
            if end_of_batch {
                histogram!(catalog::INGEST_RING_DRAIN_BATCH_RECORDS).record(batch.len() as f64);
                let n = batch.len() as u64;
                publisher.send_all(batch.drain(..));
                let held = c.bytes.fetch_sub(batch_bytes, Ordering::AcqRel) - batch_bytes;
                gauge!(catalog::INGEST_RING_BYTES).set(held as f64);
                batch_bytes = 0;
                let drained = c.drained.fetch_add(n, Ordering::Relaxed) + n;
                gauge!(catalog::INGEST_RING_OCCUPANCY)
                    .set((c.published.load(Ordering::Relaxed).saturating_sub(drained)) as f64);
            }
        };
        let producer = build_multi_producer(size, Slot::default, Backoff { max: idle_sleep_max })
            .handle_events_with(handler)
            .build();
        Ring { producer, counts }
    }

    /// Puts all entries in the ring or none of them, so a 503 never leaves half a batch behind.
    pub fn try_put_all(&mut self, entries: Vec<Entry>) -> Result<(), RingFull> {
        let n = entries.len();
        let bytes: u64 = entries.iter().map(Entry::bytes).sum();
        if !self.counts.reserve(bytes) {
            counter!(catalog::INGEST_RING_REJECTIONS_TOTAL, "reason" => "bytes").increment(1);
            return Err(RingFull);
        }
        let mut it = entries.into_iter();
        match self.producer.try_batch_publish(n, |slots| {
            for slot in slots {
                *lock(slot) = it.next();
            }
        }) {
            Ok(_) => {
                self.counts.published.fetch_add(n as u64, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => {
                self.counts.bytes.fetch_sub(bytes, Ordering::AcqRel);
                counter!(catalog::INGEST_RING_REJECTIONS_TOTAL, "reason" => "slots").increment(1);
                Err(RingFull)
            }
        }
    }
}
