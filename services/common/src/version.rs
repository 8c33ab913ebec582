//! Versions: the order in which the stores apply the messages of one id.
//!
//! A client may post an id again with other content (it is an idempotency key, and nothing stops
//! a client from re-using one). The contract is **the last version accepted wins**, in every
//! store, whatever the order in which the writers deliver them: two versions of an id can sit in
//! different Kafka records and partitions, be written by different consumers in either order,
//! and be redelivered after a crash. So "last" cannot be the order of arrival at a store; it is
//! a number the ingest stamps on each message when it accepts it, and every store writes a
//! message only over an older version (a conditional write: MySQL `IF(VALUES(version) >
//! version, …)`, Elasticsearch external versioning, a filtered MongoDB upsert, a Redis script).
//! Keeping the maximum is commutative and idempotent, so the stores converge on the same version
//! whatever the delivery order, and a redelivered old version can never come back over a newer
//! one (docs/explanation/trust.md, "A re-used id").
//!
//! A version is the acceptance time in microseconds since [`EPOCH`] (2025-01-01), shifted left
//! by [`INSTANCE_BITS`], with the ingest's instance number in the low bits:
//!
//! - within one ingest process the microseconds strictly increase ([`VersionClock::next`] takes
//!   the next microsecond when two messages fall in the same one, or the clock steps back), so
//!   two messages never share a version, and a batch's items are ordered as they were posted;
//! - several ingests need distinct `--ingest-id`s (0-255) for their versions never to tie; a tie
//!   would only matter for two different contents of one id accepted in the same microsecond.
//!
//! The order between ingests is their clocks' order: keep them synchronised (NTP), as for any
//! last-writer-wins register. Versions stay below [`VERSION_LIMIT`], 10^18: Elasticsearch takes
//! any non-negative long as an external version, but OpenSearch as the native stack builds it
//! (Debian's jackson-core) refuses every JSON number of 19 digits, even below 2^63
//! (`input_coercion_exception`, seen with 1839278001532549195). Counted from 2025 with 8 bits of
//! instance, 18 digits last until the year 2148.

use std::sync::atomic::{AtomicU64, Ordering};
use time::OffsetDateTime;

/// Bits of the ingest's instance number.
pub const INSTANCE_BITS: u32 = 8;

/// Where the microseconds of a version count from: 2025-01-01T00:00:00Z, in Unix microseconds.
pub const EPOCH: u64 = 1_735_689_600_000_000;

/// The largest instance number (`--ingest-id`).
pub const MAX_INSTANCE: u16 = (1 << INSTANCE_BITS) - 1;

/// Versions are below this: 18 decimal digits (see the module docs).
pub const VERSION_LIMIT: u64 = 1_000_000_000_000_000_000;

/// Stamps versions for one ingest process.
#[derive(Debug)]
pub struct VersionClock {
    instance: u64,
    /// The last microsecond handed out.
    last_micros: AtomicU64,
}

impl VersionClock {
    pub fn new(instance: u16) -> VersionClock {
        VersionClock { instance: u64::from(instance.min(MAX_INSTANCE)), last_micros: AtomicU64::new(0) }
    }

    /// The version of a message accepted at `now`: later than every version this clock gave
    /// before, even when the wall clock stepped back.
    pub fn next(&self, now: OffsetDateTime) -> u64 {
        let wall = micros(now);
        let mut last = self.last_micros.load(Ordering::Relaxed);
        loop {
            let next = wall.max(last + 1);
            match self.last_micros.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return compose(next, self.instance),
                Err(seen) => last = seen,
            }
        }
    }

    pub fn instance(&self) -> u16 {
        self.instance as u16
    }
}

/// An instance number for an ingest started without `--ingest-id`: the random low bits of a
/// UUIDv7.
pub fn random_instance() -> u16 {
    (uuid::Uuid::now_v7().as_u128() as u16) & MAX_INSTANCE
}

/// Microseconds since [`EPOCH`], 0 before it (a clock set before 2025 still counts up from 0).
fn micros(t: OffsetDateTime) -> u64 {
    u64::try_from(t.unix_timestamp_nanos() / 1_000).unwrap_or(0).saturating_sub(EPOCH)
}

/// Kept below [`VERSION_LIMIT`]: microseconds past it (the year 2148) saturate.
fn compose(micros: u64, instance: u64) -> u64 {
    let max_micros = (VERSION_LIMIT >> INSTANCE_BITS) - 1;
    (micros.min(max_micros) << INSTANCE_BITS) | instance
}

/// When a version was stamped, for people reading a store (`None` for version 0, which older
/// ingests' records carry).
pub fn accepted_at(version: u64) -> Option<OffsetDateTime> {
    let micros = i128::from((version >> INSTANCE_BITS) + EPOCH);
    (version > 0).then(|| OffsetDateTime::from_unix_timestamp_nanos(micros * 1_000).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn versions_strictly_increase_even_in_one_microsecond_or_a_clock_step_back() {
        let clock = VersionClock::new(5);
        let t = datetime!(2026-12-01 12:00:00.000001 UTC);
        let a = clock.next(t);
        let b = clock.next(t);
        let c = clock.next(t - time::Duration::seconds(10));
        assert!(a < b && b < c, "{a} {b} {c}");
        assert_eq!(a & u64::from(MAX_INSTANCE), 5, "the instance in the low bits");
        assert_eq!(accepted_at(a), Some(t));
        assert_eq!(accepted_at(0), None);
        assert!(clock.next(datetime!(2026-12-01 12:00:01 UTC)) > c, "the clock moving on moves the version on");
    }

    #[test]
    fn two_instances_never_tie_and_versions_stay_below_the_limit() {
        let t = datetime!(2026-12-01 12:00:00 UTC);
        assert_ne!(VersionClock::new(1).next(t), VersionClock::new(2).next(t));
        let far = VersionClock::new(MAX_INSTANCE).next(datetime!(9999-12-31 23:59:59 UTC));
        assert!(far < VERSION_LIMIT);
        let now = VersionClock::new(MAX_INSTANCE).next(datetime!(2147-12-31 23:59:59 UTC));
        assert!(now < VERSION_LIMIT && now < far, "18 digits until 2148: {now}");
        assert_eq!(VersionClock::new(4000).instance(), MAX_INSTANCE, "clamped");
    }

    #[test]
    fn concurrent_stamps_are_unique() {
        let clock = std::sync::Arc::new(VersionClock::new(0));
        let now = OffsetDateTime::now_utc();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = clock.clone();
                std::thread::spawn(move || (0..10_000).map(|_| c.next(now)).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
