//! Per-key limits, so one client cannot take what the others need:
//!
//! - a **rate** per key in messages per second and in bytes per second (token buckets,
//!   `governor`'s GCRA, a burst of one second), answered 429 with `Retry-After`;
//! - a **share of the ring** per key: the bytes of a key's requests between acceptance and
//!   their answer may not pass `--key-ring-share` of `--ring-max-bytes`; past it that key alone
//!   gets 503 `key_busy` while the other keys keep their room.
//!
//! The defaults (`--key-rate`, `--key-bytes-rate`, `--key-ring-share`) apply to every key; a
//! keys-file line can set its own (`NAME sha256:HEX rate=500 bytes=1000000 share=0.25`). A key's
//! buckets are made on its first request and kept across reloads of the keys file unless its
//! limits changed.

use crate::auth::Limits;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use metrics::counter;
use pipeline_common::catalog;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a key's request is refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// Past the key's rate (messages or bytes): ask again after this long.
    Rate { reason: &'static str, retry_after: Duration },
    /// A request larger than one second of the key's rate: it can never pass.
    TooLarge { reason: &'static str, limit: u32 },
    /// The key's share of the ring is in use.
    Share,
}

fn bucket(per_second: u32) -> Option<DefaultDirectRateLimiter> {
    NonZeroU32::new(per_second).map(|n| RateLimiter::direct(Quota::per_second(n).allow_burst(n)))
}

/// One key's buckets and its bytes in flight.
struct KeyState {
    limits: Limits,
    messages: Option<DefaultDirectRateLimiter>,
    bytes: Option<DefaultDirectRateLimiter>,
    share_bytes: u64,
    in_flight: AtomicU64,
}

/// Every key's state, made on its first request.
pub(crate) struct KeyLimits {
    ring_max_bytes: u64,
    keys: Mutex<HashMap<Arc<str>, Arc<KeyState>>>,
}

/// The bytes a request holds of its key's share, given back when it is dropped (the request
/// has its answer).
pub(crate) struct Held {
    key: Arc<KeyState>,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.key.in_flight.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

fn check(bucket: &Option<DefaultDirectRateLimiter>, n: u64, reason: &'static str, limit: u32) -> Result<(), Refusal> {
    let Some(b) = bucket else { return Ok(()) };
    let Some(n) = u32::try_from(n).ok().and_then(NonZeroU32::new) else {
        return if n == 0 { Ok(()) } else { Err(Refusal::TooLarge { reason, limit }) };
    };
    match b.check_n(n) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(not_until)) => {
            Err(Refusal::Rate { reason, retry_after: not_until.wait_time_from(DefaultClock::default().now()) })
        }
        Err(_) => Err(Refusal::TooLarge { reason, limit }),
    }
}

impl KeyLimits {
    pub(crate) fn new(ring_max_bytes: u64) -> KeyLimits {
        KeyLimits { ring_max_bytes, keys: Mutex::new(HashMap::new()) }
    }

    fn state(&self, name: &Arc<str>, limits: Limits) -> Arc<KeyState> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = keys.get(name).filter(|s| s.limits == limits) {
            return s.clone();
        }
        let share_bytes = (self.ring_max_bytes as f64 * limits.share.clamp(0.0, 1.0)) as u64;
        let s = Arc::new(KeyState {
            limits,
            messages: bucket(limits.rate),
            bytes: bucket(limits.bytes_rate),
            share_bytes,
            in_flight: AtomicU64::new(0),
        });
        keys.insert(name.clone(), s.clone());
        s
    }

    /// Admits a request of `messages` messages and `bytes` bytes for key `name`, or says why not.
    pub(crate) fn admit(&self, name: &Arc<str>, limits: Limits, messages: u64, bytes: u64) -> Result<Held, Refusal> {
        let key = self.state(name, limits);
        let refused = |r: Refusal| {
            let reason = match &r {
                Refusal::Rate { reason, .. } | Refusal::TooLarge { reason, .. } => *reason,
                Refusal::Share => "share",
            };
            counter!(catalog::INGEST_KEY_REFUSALS_TOTAL, "key" => name.to_string(), "reason" => reason).increment(1);
            r
        };
        let before = key.in_flight.fetch_add(bytes, Ordering::AcqRel);
        // A key with nothing in flight always gets one request through (as the ring does).
        if before > 0 && before + bytes > key.share_bytes {
            key.in_flight.fetch_sub(bytes, Ordering::AcqRel);
            return Err(refused(Refusal::Share));
        }
        let held = Held { key: key.clone(), bytes };
        check(&key.messages, messages, "rate", limits.rate).map_err(refused)?;
        check(&key.bytes, bytes, "bytes", limits.bytes_rate).map_err(refused)?;
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rate: u32, bytes_rate: u32, share: f64) -> Limits {
        Limits { rate, bytes_rate, share }
    }

    #[test]
    fn a_key_past_its_rate_waits_while_another_keeps_its_own() {
        let l = KeyLimits::new(1 << 20);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let lim = limits(10, 0, 1.0);
        for _ in 0..10 {
            assert!(l.admit(&a, lim, 1, 10).is_ok());
        }
        match l.admit(&a, lim, 1, 10) {
            Err(Refusal::Rate { reason: "rate", retry_after }) => assert!(retry_after <= Duration::from_millis(100)),
            other => panic!("{:?}", other.err()),
        }
        assert!(l.admit(&b, lim, 1, 10).is_ok(), "b has its own bucket");
        assert!(matches!(l.admit(&b, lim, 11, 10), Err(Refusal::TooLarge { reason: "rate", limit: 10 })));
        assert!(matches!(l.admit(&b, limits(0, 100, 1.0), 1, 101), Err(Refusal::TooLarge { reason: "bytes", .. })));
    }

    #[test]
    fn a_key_holds_at_most_its_share_until_its_requests_end() {
        let l = KeyLimits::new(1000);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let lim = limits(0, 0, 0.5);
        let first = l.admit(&a, lim, 1, 400).expect("within the share");
        assert!(matches!(l.admit(&a, lim, 1, 200), Err(Refusal::Share)), "400 + 200 > 500");
        let other = l.admit(&b, lim, 1, 400).expect("another key's share is its own");
        drop(first);
        assert!(l.admit(&a, lim, 1, 200).is_ok(), "room again once the first request has its answer");
        drop(other);
        let huge = l.admit(&b, lim, 1, 900);
        assert!(huge.is_ok(), "a key with nothing in flight gets one request through");
    }
}
