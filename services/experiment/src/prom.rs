//! The few parts of the Prometheus text format the sampler needs: one sample per line,
//! `name{label="value",...} number`. Histogram buckets are skipped (their `_sum` and `_count`
//! are kept): a bucket line per second per store would multiply the timeline for nothing the
//! report uses.

/// One sample: metric name, labels as `k=v;k=v` (CSV-safe, sorted as exported), value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: String,
    pub value: f64,
}

/// Parses an exposition body; lines it does not understand are skipped.
pub(crate) fn parse(body: &str) -> Vec<Sample> {
    body.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, labels(rest.strip_suffix('}')?)),
        None => (head.trim(), String::new()),
    };
    if name.ends_with("_bucket") || labels.contains("quantile=") {
        return None;
    }
    Some(Sample { name: name.to_string(), labels, value })
}

/// `pool="shared",store="es"` → `pool=shared;store=es`; characters that would break the CSV
/// (`,`, `;`, `"`, newlines) inside values become `_`.
fn labels(inner: &str) -> String {
    let mut out = Vec::new();
    let mut rest = inner;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                    value.push('_');
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                ',' | ';' | '\n' => value.push('_'),
                c => value.push(c),
            }
        }
        out.push(format!("{}={value}", key.trim_start_matches(',').trim()));
        rest = &after[end..];
    }
    out.join(";")
}

/// The value of label `key` in a `k=v;k=v` string.
pub(crate) fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(';').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_labels_and_skipped_lines() {
        let body = "# HELP x y\n# TYPE x gauge\nwriter_pool_queue_depth{pool=\"shared\"} 12\n\
                    writer_store_write_seconds_bucket{store=\"es\",le=\"0.1\"} 3\n\
                    writer_store_write_seconds_sum{store=\"es\",x=\"a,b\"} 0.5\nprocess_up 1\n";
        let s = parse(body);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0], Sample { name: "writer_pool_queue_depth".into(), labels: "pool=shared".into(), value: 12.0 });
        assert_eq!(s[1].labels, "store=es;x=a_b");
        assert_eq!(label(&s[1].labels, "store"), Some("es"));
        assert_eq!(s[2].labels, "");
    }
}
