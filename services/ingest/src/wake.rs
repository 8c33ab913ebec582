//! When the ring consumer sleeps, who wakes it: a put, or the broker's acknowledgement.
//!
//! The consumer sleeps for one of two things. With nothing gathered it waits for a request, and a
//! put into the ring wakes it. With a record gathered behind one in flight (the adaptive window,
//! `crate::gather`) it waits for the broker: new requests would only join the record it already
//! gathers, so they need not wake it, and the delivery report that leaves nothing in flight does.
//! Waking it on every put instead cost a futex wake and a thread switch per request under load,
//! and it also looked every millisecond while awaiting the link.
//!
//! No wake-up is lost: the sleeper says what it waits for, then looks once more (SeqCst), before
//! it parks; the waker makes its change, then reads what the sleeper waits for (SeqCst). One of
//! the two sees the other's write. `Thread::unpark` before `park` makes `park` return at once.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;

const BUSY: u8 = 0;
const FOR_PUT: u8 = 1;
const FOR_LINK: u8 = 2;

/// What the consumer sleeps for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Awaits {
    /// A request (nothing gathered).
    Put,
    /// The broker's acknowledgement of the record in flight (a record gathered behind it).
    Link,
}

/// Shared by the consumer, the HTTP workers' ring handles and the producer's delivery reports.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    state: AtomicU8,
    consumer: OnceLock<Thread>,
}

impl Wake {
    /// The consumer thread, set once it runs.
    pub(crate) fn set_consumer(&self, t: Thread) {
        let _ = self.consumer.set(t);
    }

    /// The consumer is about to sleep for `what`, unless `still_needed` (read after this is
    /// published) says there is no need. Returns whether it may park now.
    pub(crate) fn prepare(&self, what: Awaits, still_needed: impl FnOnce() -> bool) -> bool {
        let s = match what {
            Awaits::Put => FOR_PUT,
            Awaits::Link => FOR_LINK,
        };
        self.state.store(s, Ordering::SeqCst);
        if still_needed() {
            true
        } else {
            self.state.store(BUSY, Ordering::SeqCst);
            false
        }
    }

    /// The consumer woke (or did not sleep after all).
    pub(crate) fn awake(&self) {
        self.state.store(BUSY, Ordering::SeqCst);
    }

    /// A put was published: wakes the consumer if it sleeps for one.
    pub(crate) fn put(&self) {
        if self.state.load(Ordering::SeqCst) == FOR_PUT {
            self.unpark();
        }
    }

    /// Nothing is in flight any more: wakes the consumer if it sleeps for the link.
    pub(crate) fn link_idle(&self) {
        if self.state.load(Ordering::SeqCst) == FOR_LINK {
            self.unpark();
        }
    }

    fn unpark(&self) {
        if let Some(t) = self.consumer.get() {
            t.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn each_side_wakes_only_the_sleep_that_waits_for_it() {
        let wake = Arc::new(Wake::default());
        wake.set_consumer(std::thread::current());
        assert!(wake.prepare(Awaits::Link, || true));
        wake.put();
        let t0 = Instant::now();
        std::thread::park_timeout(Duration::from_millis(50));
        assert!(t0.elapsed() >= Duration::from_millis(40), "a put does not wake a sleep for the link");
        let w = wake.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            w.link_idle();
        });
        let t0 = Instant::now();
        std::thread::park_timeout(Duration::from_secs(5));
        assert!(t0.elapsed() < Duration::from_secs(1), "the link going idle does");
        t.join().unwrap();
        wake.awake();
    }

    /// The race the protocol closes: the waker's change lands between the sleeper's decision and
    /// its park. Run many times; a lost wake-up would sleep the whole timeout.
    #[test]
    fn no_wake_up_is_lost() {
        let wake = Arc::new(Wake::default());
        wake.set_consumer(std::thread::current());
        let in_flight = Arc::new(AtomicUsize::new(1));
        for _ in 0..200 {
            in_flight.store(1, Ordering::SeqCst);
            let (w, f) = (wake.clone(), in_flight.clone());
            let t = std::thread::spawn(move || {
                f.store(0, Ordering::SeqCst);
                w.link_idle();
            });
            let t0 = Instant::now();
            if wake.prepare(Awaits::Link, || in_flight.load(Ordering::SeqCst) > 0) {
                std::thread::park_timeout(Duration::from_secs(2));
            }
            wake.awake();
            assert!(t0.elapsed() < Duration::from_secs(1), "a wake-up was lost");
            t.join().unwrap();
        }
    }
}
