//! Adaptive concurrency for a pool (`--pool-adaptive`): the number of a store's writes in flight
//! follows what the store can take, instead of a fixed worker count. A store that answers as
//! fast with more writes in flight gets more; one whose answers slow down as writes pile up (a
//! saturated server) gets fewer. This is the remedy the reference proposed for its thread pool
//! and never measured, in the form of Vector's adaptive request concurrency: additive increase,
//! multiplicative decrease, on round trips and failures.
//!
//! A round trip is one pooled job: one batch written to one store, retries included, so a store
//! that errors shows as one that slows down. A job whose batch the store refused for good (data
//! it cannot hold) is left out: its round trip is not a reading of load (`pool::Outcome`).
//!
//! The controller works in windows of `limit` jobs (about one round trip of the pool): when a
//! window's mean round trip is above the past mean (give or take `TOLERANCE`) by more than
//! `DEVIATIONS` times its usual deviation, or a job failed, the limit is cut to `DECREASE` of
//! itself; when the pool used its whole limit and the round trip did not grow, the
//! limit rises by one. The past mean and deviation are moving averages (`ALPHA`) of the windows.
//!
//! Hand-written, not `tower-acc` (the maintained port of Netflix's concurrency-limits): against
//! the simulated saturated store of the tests below (10 ms up to 16 writes in flight, then
//! proportionally longer), its Vegas settled at 50 and its Gradient2 at the ceiling of 256,
//! because both re-learn their no-load baseline from round trips the pool's own queue inflated.

use std::time::Duration;

/// Share of the limit kept after a slowdown or a failure.
const DECREASE: f64 = 0.9;
/// Weight of a new window in the past round trip's moving averages.
const ALPHA: f64 = 0.4;
/// How many usual deviations above the past mean count as a slowdown.
const DEVIATIONS: f64 = 2.5;
/// A round trip within this share of the past mean counts as unchanged: rounding in the window's
/// mean must not read as a slowdown when the deviation is zero. (A larger tolerance lets the
/// limit creep: a past mean that follows every window hides one small step after another.)
const TOLERANCE: f64 = 1e-6;

#[derive(Default)]
struct Window {
    jobs: usize,
    total_s: f64,
    failed: bool,
    /// The pool ran as many jobs as the limit allowed at some point of the window.
    reached: bool,
}

/// One pool's controller.
pub(crate) struct Controller {
    max: usize,
    limit: usize,
    /// Moving averages of the windows' mean round trip and of its deviation, in seconds.
    past: Option<(f64, f64)>,
    window: Window,
}

impl Controller {
    /// Starts at `initial` writes in flight, never above `max` nor below 1.
    pub(crate) fn new(initial: usize, max: usize) -> Controller {
        let max = max.max(1);
        Controller { max, limit: initial.clamp(1, max), past: None, window: Window::default() }
    }

    /// The limit now.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The past round trip's moving average, in seconds (0 before the first window).
    pub(crate) fn round_trip(&self) -> f64 {
        self.past.map_or(0.0, |p| p.0)
    }

    /// One job's outcome: how long it took, how many jobs ran (it included), whether it failed.
    /// Returns the limit.
    pub(crate) fn observe(&mut self, rtt: Duration, inflight: usize, failed: bool) -> usize {
        let w = &mut self.window;
        w.jobs += 1;
        w.total_s += rtt.as_secs_f64();
        w.failed |= failed;
        w.reached |= inflight >= self.limit;
        if w.jobs < self.limit {
            return self.limit;
        }
        let w = std::mem::take(&mut self.window);
        let mean = w.total_s / w.jobs as f64;
        let Some((past, dev)) = self.past else {
            self.past = Some((mean, 0.0));
            return self.limit;
        };
        let unchanged = past * (1.0 + TOLERANCE);
        if w.failed || mean > unchanged + DEVIATIONS * dev {
            self.limit = ((self.limit as f64 * DECREASE).floor() as usize).max(1);
        } else if w.reached && mean <= unchanged {
            self.limit = (self.limit + 1).min(self.max);
        }
        self.past = Some((past + ALPHA * (mean - past), dev + ALPHA * ((mean - past).abs() - dev)));
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated store: writes take 10 ms up to `knee` in flight, then proportionally longer
    /// (a server whose queue grows), driven as a saturated pool drives it: as many writes in
    /// flight as the limit allows. Returns the limits of the last 1,000 jobs.
    fn run(knee: usize, max: usize, jitter: bool) -> Vec<usize> {
        let mut c = Controller::new(4, max);
        let mut seen = Vec::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..20_000u64 {
            let inflight = c.limit();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let noise = if jitter { (rng % 1001) as f64 / 1000.0 - 0.5 } else { 0.0 }; // ±0.5 ms
            let ms = 10.0 * inflight.max(knee) as f64 / knee as f64 + noise;
            c.observe(Duration::from_secs_f64(ms / 1000.0), inflight, false);
            if i >= 19_000 {
                seen.push(c.limit());
            }
        }
        seen
    }

    #[test]
    fn the_limit_grows_to_the_ceiling_while_the_store_keeps_up() {
        for jitter in [false, true] {
            // Noise alone cuts it now and then (AIMD probes): on average it stays near the top.
            let seen = run(1_000, 64, jitter);
            let mean = seen.iter().sum::<usize>() as f64 / seen.len() as f64;
            assert!(mean >= 57.0, "jitter {jitter}: the limit averaged {mean:.1} below the ceiling of 64");
        }
    }

    #[test]
    fn the_limit_settles_at_the_knee_of_a_saturated_store() {
        for jitter in [false, true] {
            let seen = run(16, 256, jitter);
            let (lo, hi) = (seen.iter().min().copied().unwrap_or(0), seen.iter().max().copied().unwrap_or(0));
            assert!(lo >= 10 && hi <= 24, "jitter {jitter}: limit between {lo} and {hi}, the knee is 16");
        }
    }

    #[test]
    fn a_failure_cuts_the_limit() {
        let mut c = Controller::new(20, 64);
        for _ in 0..40 {
            c.observe(Duration::from_millis(5), 20, false);
        }
        let before = c.limit();
        for _ in 0..before {
            c.observe(Duration::from_millis(5), 20, true);
        }
        assert!(c.limit() < before, "{before} -> {}", c.limit());
    }
}
