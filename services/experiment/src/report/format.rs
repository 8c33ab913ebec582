//! How a number reads in the report: a dash for none, a median with its range. Apart from the
//! markdown because the crossover's table writes its cells the same way.

use crate::stats::{self, spread};

/// A number to `digits` places, or a dash when there is none.
pub(crate) fn f(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

/// A median with its min–max over the rounds that gave a value.
pub(crate) fn med_range(values: &[f64], digits: usize) -> String {
    spread_text(spread(values), values.len(), digits)
}

/// A median with its min–max when `n` rounds made it, alone for one round.
pub(crate) fn spread_text(s: Option<stats::Spread>, n: usize, digits: usize) -> String {
    match s {
        Some((m, lo, hi)) if n > 1 => format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})"),
        Some((m, _, _)) => format!("{m:.digits$}"),
        None => "–".into(),
    }
}
