//! k6-style durations, as plans, flags and k6 itself spell them. A leaf: the plan, the slow-store
//! conditions and the reports all read durations, and none of them should import another for it.

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("duration `{0}` is not like 60s, 500ms, 2m or 1m30s")]
pub(crate) struct BadDuration(pub String);

/// Seconds in a k6-style duration: `60s`, `500ms`, `2m`, `1m30s`, or a bare number of seconds.
pub(crate) fn seconds(text: &str) -> Result<f64, BadDuration> {
    let t = text.trim();
    if let Ok(v) = t.parse::<f64>() {
        return Ok(v);
    }
    let bad = || BadDuration(text.to_string());
    let (mut total, mut num) = (0.0, String::new());
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let unit = match (c, chars.peek()) {
            ('m', Some('s')) => {
                chars.next();
                0.001
            }
            ('s', _) => 1.0,
            ('m', _) => 60.0,
            ('h', _) => 3600.0,
            _ => return Err(bad()),
        };
        total += num.parse::<f64>().map_err(|_| bad())? * unit;
        num.clear();
    }
    if !num.is_empty() {
        return Err(bad());
    }
    Ok(total)
}
