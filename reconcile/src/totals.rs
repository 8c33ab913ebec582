//! The totals-only check (`count --expect N`, or a k6 summary without an id log) and `reset`.
//!
//! Totals are the weak check: an extra id in a store hides a lost one. The output says
//! "totals only" every time, so nobody mistakes it for the id-level check.

use crate::drain::{self, Counts};
use crate::report::print_json;
use pipeline_common::reconcile_report::{Level, ResetReport, StoreTotal, TotalsExpected, TotalsReport, Verdict};
use pipeline_stores::Store;
use std::sync::Arc;
use std::time::Duration;

/// What the totals are compared with: `accepted` 202s plus up to `uncertain` more.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Want {
    pub accepted: u64,
    pub uncertain: u64,
}

/// `n - e` with its sign, for any two counts (a store's count is a server's answer, the
/// expectation comes from a file): exact within ±2^63, never wrapped to the other sign.
fn difference(n: u64, e: u64) -> i64 {
    let d = i128::from(n) - i128::from(e);
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

fn store_totals(counts: &Counts, want: Option<Want>) -> Vec<StoreTotal> {
    counts
        .iter()
        .map(|(k, n)| {
            let e = want.map(|w| w.accepted);
            StoreTotal { store: k.name().to_string(), count: *n, expected: e, difference: e.map(|e| difference(*n, e)) }
        })
        .collect()
}

/// Prints the table (or JSON) and returns the exit code: 0 only if every store holds between
/// `accepted` and `accepted + uncertain` (or, without an expectation, if all agree).
pub(crate) fn print_counts(counts: &Counts, want: Option<Want>, source: &str, as_json: bool) -> u8 {
    let first = counts.first().map(|c| c.1).unwrap_or(0);
    let fits = |n: u64| match want {
        Some(w) => n >= w.accepted && n <= w.accepted.saturating_add(w.uncertain),
        None => n == first,
    };
    let ok = counts.iter().all(|(_, n)| fits(*n));
    let message = match (ok, want) {
        (true, Some(_)) => "OK (totals only: ids not checked): every store holds the expected count",
        (false, Some(_)) => "MISMATCH (totals only: ids not checked)",
        (true, None) => "STORES AGREE on totals (totals only, nothing expected given)",
        (false, None) => "STORES DISAGREE on totals (totals only, nothing expected given)",
    };
    if as_json {
        print_json(&TotalsReport {
            check: Level::Totals,
            source: source.to_string(),
            drained: true,
            expected: want.map(|w| TotalsExpected { accepted: w.accepted, uncertain: w.uncertain }),
            ok,
            verdict: Verdict::of(ok),
            message: message.to_string(),
            stores: store_totals(counts, want),
        });
    } else {
        println!("check: totals · {source}");
        println!("{:<8} {:>12} {:>12} {:>12}", "store", "count", "expected", "difference");
        for (k, n) in counts {
            let (e, d) = match want {
                Some(w) if w.uncertain > 0 => (
                    format!("{}..{}", w.accepted, w.accepted.saturating_add(w.uncertain)),
                    format!("{:+}", difference(*n, w.accepted)),
                ),
                Some(w) => (w.accepted.to_string(), format!("{:+}", difference(*n, w.accepted))),
                None => ("-".into(), "-".into()),
            };
            println!("{:<8} {:>12} {:>12} {:>12}", k.name(), n, e, d);
        }
        println!("{message}");
    }
    if ok {
        0
    } else {
        crate::exit::MISMATCH
    }
}

pub(crate) async fn reset(stores: &[Arc<dyn Store>], as_json: bool) -> anyhow::Result<u8> {
    for s in stores {
        s.reset().await?;
    }
    let first = drain::count_all(stores).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = drain::count_all(stores).await?;
    let ok = first.iter().chain(&second).all(|(_, n)| *n == 0);
    let zero = Some(Want { accepted: 0, uncertain: 0 });
    if as_json {
        print_json(&ResetReport { ok, first: store_totals(&first, zero), second: store_totals(&second, zero) });
    } else {
        for ((k, a), (_, b)) in first.iter().zip(&second) {
            println!("{:<8} {:>10} {:>10}", k.name(), a, b);
        }
        println!("{}", if ok { "OK: every store reads 0, twice" } else { "NOT EMPTY: something is still writing" });
    }
    Ok(if ok { 0 } else { crate::exit::MISMATCH })
}

#[cfg(test)]
mod tests {
    use super::difference;

    #[test]
    fn a_difference_keeps_its_sign_whatever_the_counts() {
        assert_eq!(difference(5, 7), -2);
        assert_eq!(difference(7, 5), 2);
        assert_eq!(difference(u64::MAX, 0), i64::MAX, "not -1");
        assert_eq!(difference(0, u64::MAX), i64::MIN, "not +1");
        assert_eq!(difference(1 << 63, 0), i64::MAX, "not i64::MIN");
    }
}
