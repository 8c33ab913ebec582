//! A store's slowness as written in a plan: `STORE=BASE[±JITTER][+PER*inflight][@RATE/s]`, e.g.
//! `es=20ms±5ms`, `mongo=10ms+2ms*inflight`, `mysql=1ms@500/s` (`+-` for `±`). BASE is added to
//! every request, JITTER spreads it uniformly over ±JITTER, PER grows it with every request
//! already held back for that store (as a saturated server's queue does), RATE caps the requests
//! per second that reach the server (counted in the proxy's chunks: a request larger than one
//! read of 64 KiB counts more than once, see `proxy.rs`).

use pipeline_stores::StoreKind;
use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum SpecError {
    #[error("store delay `{0}` is not STORE=BASE[±JITTER][+PER*inflight][@RATE/s] (e.g. es=20ms±5ms): {1}")]
    Syntax(String, String),
    #[error("store delay names {0} twice")]
    Twice(String),
}

/// One store's condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StoreDelay {
    pub store: StoreKind,
    pub base: Duration,
    pub jitter: Duration,
    /// Added per request already held back for this store.
    pub per_inflight: Duration,
    /// Most requests per second reaching the server (none: no cap).
    pub rate: Option<f64>,
}

fn millis(text: &str) -> Result<Duration, String> {
    let secs = crate::duration::seconds(text).map_err(|e| e.to_string())?;
    if !(0.0..=60.0).contains(&secs) {
        return Err(format!("{text} is outside 0..60 s"));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl std::str::FromStr for StoreDelay {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<StoreDelay, SpecError> {
        let bad = |why: String| SpecError::Syntax(s.to_string(), why);
        let (store, rest) = s.split_once('=').ok_or_else(|| bad("no `=`".into()))?;
        let store = <StoreKind as clap::ValueEnum>::from_str(store.trim(), true).map_err(bad)?;
        let rest = rest.trim().replace("+-", "±");
        let (rest, rate) = match rest.split_once('@') {
            Some((r, rate)) => {
                let n = rate.trim_end_matches("/s").parse::<f64>().map_err(|e| bad(format!("rate {rate}: {e}")))?;
                if n <= 0.0 || !n.is_finite() {
                    return Err(bad(format!("rate {rate} is not positive")));
                }
                (r.to_string(), Some(n))
            }
            None => (rest, None),
        };
        let (rest, per_inflight) = match rest.split_once('+') {
            Some((r, per)) => {
                let per =
                    per.strip_suffix("*inflight").ok_or_else(|| bad(format!("`+{per}` must end in *inflight")))?;
                (r.to_string(), millis(per).map_err(bad)?)
            }
            None => (rest, Duration::ZERO),
        };
        let (base, jitter) = match rest.split_once('±') {
            Some((b, j)) => (millis(b).map_err(bad)?, millis(j).map_err(bad)?),
            None => (millis(&rest).map_err(bad)?, Duration::ZERO),
        };
        if jitter > base {
            return Err(bad("the jitter is larger than the base delay".into()));
        }
        Ok(StoreDelay { store, base, jitter, per_inflight, rate })
    }
}

impl std::fmt::Display for StoreDelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| {
            let v = d.as_secs_f64() * 1000.0;
            if v.fract() == 0.0 {
                format!("{v:.0}ms")
            } else {
                format!("{v}ms")
            }
        };
        write!(f, "{}={}", self.store, ms(self.base))?;
        if !self.jitter.is_zero() {
            write!(f, "±{}", ms(self.jitter))?;
        }
        if !self.per_inflight.is_zero() {
            write!(f, "+{}*inflight", ms(self.per_inflight))?;
        }
        if let Some(r) = self.rate {
            write!(f, "@{r}/s")?;
        }
        Ok(())
    }
}

/// Every store's condition of a plan, each store at most once.
pub(crate) fn parse_all(specs: &[String]) -> Result<Vec<StoreDelay>, SpecError> {
    let mut out: Vec<StoreDelay> = Vec::new();
    for s in specs.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        let d: StoreDelay = s.parse()?;
        if out.iter().any(|o| o.store == d.store) {
            return Err(SpecError::Twice(d.store.to_string()));
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        let d: StoreDelay = "es=20ms±5ms+2ms*inflight@500/s".parse().expect("full");
        assert_eq!(d.store, StoreKind::Es);
        assert_eq!(
            (d.base, d.jitter, d.per_inflight),
            (Duration::from_millis(20), Duration::from_millis(5), Duration::from_millis(2))
        );
        assert_eq!(d.rate, Some(500.0));
        assert_eq!(d.to_string(), "es=20ms±5ms+2ms*inflight@500/s");
        assert_eq!("mongo=10ms+-2ms".parse::<StoreDelay>().expect("ascii").jitter, Duration::from_millis(2));
        let all = parse_all(&["es=20ms,mongo=1.5ms".into()]).expect("two");
        assert_eq!(all[1].to_string(), "mongo=1.5ms");
    }

    #[test]
    fn bad_specs_say_why() {
        for bad in ["es", "nosuch=1ms", "es=1ms±5ms", "es=1ms+2ms", "es=1ms@0/s", "es=ten"] {
            assert!(bad.parse::<StoreDelay>().is_err(), "{bad}");
        }
        assert_eq!(parse_all(&["es=1ms,es=2ms".into()]), Err(SpecError::Twice("es".into())));
    }
}
