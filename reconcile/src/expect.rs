//! What was injected: a k6 summary from our scripts (with or without its id log), a k6 id log,
//! a plain file of ids, or just a number.
//!
//! An id-level expectation is never held as a set of its own: [`IdSource::load`] streams the ids
//! into the caller's tally, so two million ids cost one map entry each, once.

use crate::idlog::{self, InputError, LogCounts};
use crate::tally::Expect;
use std::path::{Path, PathBuf};

/// Where the expected ids come from.
#[derive(Debug, Clone)]
pub(crate) enum IdSource {
    /// A k6 id log, the section of one run; `summary` holds the summary's own counts when the
    /// log was named by a summary (they must agree with the log).
    K6Log { path: PathBuf, run: String, summary: Option<LogCounts> },
    /// Plain files: accepted ids, and optionally uncertain ones.
    Plain { accepted: PathBuf, uncertain: Option<PathBuf> },
}

/// What a check compares against.
#[derive(Debug, Clone)]
pub(crate) enum Expected {
    /// Totals only: `--expect N`, or a k6 summary written without an id log.
    Totals {
        accepted: u64,
        uncertain: u64,
        source: String,
    },
    Ids(IdSource),
}

/// Reads `--expect-from FILE`: a k6 summary JSON, a k6 id log or a plain id file.
pub(crate) fn from_file(path: &Path) -> Result<Expected, InputError> {
    let text_start = first_char(path)?;
    if text_start == Some('{') {
        return from_summary(path);
    }
    if idlog::is_k6_log(path)? {
        let runs = idlog::runs(path)?;
        return match runs.as_slice() {
            [run] => Ok(Expected::Ids(IdSource::K6Log { path: path.to_path_buf(), run: run.clone(), summary: None })),
            [] => Err(InputError::invalid(path, "a k6 id log without a RUN line")),
            _ => Err(InputError::invalid(
                path,
                format!("{} runs in one id log: pass the run's k6 summary instead", runs.len()),
            )),
        };
    }
    Ok(Expected::Ids(IdSource::Plain { accepted: path.to_path_buf(), uncertain: None }))
}

fn first_char(path: &Path) -> Result<Option<char>, InputError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|source| InputError::Io { path: path.to_path_buf(), source })?;
    let mut buf = [0u8; 256];
    let n = f.read(&mut buf).map_err(|source| InputError::Io { path: path.to_path_buf(), source })?;
    Ok(String::from_utf8_lossy(&buf[..n]).trim_start().chars().next())
}

/// A summary written by k6/lib/summary.js: `accepted`, `uncertain`, `refused` and `ids`.
fn from_summary(path: &Path) -> Result<Expected, InputError> {
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Io { path: path.to_path_buf(), source })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| InputError::invalid(path, format!("not JSON: {e}")))?;
    let num = |k: &str| v.get(k).and_then(|n| n.as_u64());
    let Some(accepted) = num("accepted") else {
        return Err(InputError::invalid(path, "no numeric `accepted` field (is it a k6/ summary?)"));
    };
    let counts = LogCounts { accepted, uncertain: num("uncertain").unwrap_or(0), refused: num("refused").unwrap_or(0) };
    let ids = v.get("ids").filter(|i| !i.is_null());
    let Some(ids) = ids else {
        return Ok(Expected::Totals { accepted, uncertain: counts.uncertain, source: path.display().to_string() });
    };
    let field = |k: &str| ids.get(k).and_then(|s| s.as_str());
    let (Some(file), Some(run)) = (field("file"), field("run")) else {
        return Err(InputError::invalid(path, "`ids` needs `file` and `run`"));
    };
    let log = locate(path, Path::new(file)).ok_or_else(|| {
        InputError::invalid(path, format!("its id log {file} is neither there nor next to the summary"))
    })?;
    Ok(Expected::Ids(IdSource::K6Log { path: log, run: run.to_string(), summary: Some(counts) }))
}

/// The id log as k6 named it (relative to k6's working directory, which may be ours), else the
/// file of that name next to the summary.
fn locate(summary: &Path, log: &Path) -> Option<PathBuf> {
    if log.exists() {
        return Some(log.to_path_buf());
    }
    let beside = summary.parent()?.join(log.file_name()?);
    beside.exists().then_some(beside)
}

impl IdSource {
    /// Streams every expected id into `sink`; returns the ids read per class.
    pub(crate) fn load(&self, mut sink: impl FnMut(&str, Expect, Option<u64>)) -> Result<LogCounts, InputError> {
        match self {
            IdSource::K6Log { path, run, summary } => {
                let counts = idlog::read_k6_log(path, run, sink)?;
                match summary {
                    Some(s) if *s != counts => Err(InputError::invalid(
                        path,
                        format!("the summary says {s:?} but the id log of run {run} holds {counts:?}"),
                    )),
                    _ => Ok(counts),
                }
            }
            IdSource::Plain { accepted, uncertain } => {
                let a = idlog::read_plain(accepted, Expect::Accepted, &mut sink)?;
                let u = match uncertain {
                    Some(u) => idlog::read_plain(u, Expect::Uncertain, &mut sink)?,
                    None => 0,
                };
                Ok(LogCounts { accepted: a, uncertain: u, refused: 0 })
            }
        }
    }

    /// Roughly how many ids `load` will give: the summary's counts, else a guess from the file
    /// sizes (an id and its tag take about 40 bytes). Reserving it avoids rehashing millions of
    /// ids while the table grows. The summary is only a hint, read before it is checked against
    /// the log: never more than the log could hold (a line is at least 10 bytes), so a summary
    /// that says 10^12 cannot make the reservation abort the process.
    pub(crate) fn size_hint(&self) -> usize {
        let bytes =
            |p: &Path| std::fs::metadata(p).map(|m| usize::try_from(m.len()).unwrap_or(usize::MAX)).unwrap_or(0);
        match self {
            IdSource::K6Log { summary: Some(s), path, .. } => {
                let said = s.accepted.saturating_add(s.uncertain).saturating_add(s.refused);
                usize::try_from(said).unwrap_or(usize::MAX).min(bytes(path) / 10)
            }
            IdSource::K6Log { path, .. } => bytes(path) / 40,
            IdSource::Plain { accepted, uncertain } => (bytes(accepted) + uncertain.as_deref().map_or(0, bytes)) / 20,
        }
    }

    /// For the report: where the ids came from.
    pub(crate) fn describe(&self) -> String {
        match self {
            IdSource::K6Log { path, run, .. } => format!("k6 id log {} (run {run})", path.display()),
            IdSource::Plain { accepted, uncertain: Some(u) } => {
                format!("accepted ids {}, uncertain ids {}", accepted.display(), u.display())
            }
            IdSource::Plain { accepted, uncertain: None } => format!("accepted ids {}", accepted.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("reconcile-expect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_summary_without_ids_is_totals_only() {
        let p = file("old.json", r#"{"accepted": 7, "uncertain": 2}"#);
        assert!(matches!(from_file(&p).unwrap(), Expected::Totals { accepted: 7, uncertain: 2, .. }));
        let p = file("bad.json", r#"{"ok": true}"#);
        assert!(from_file(&p).is_err());
    }

    #[test]
    fn a_summary_names_its_log_even_from_another_directory() {
        file("run.ids", "k6ids RUN r9\nk6ids A a\nk6ids U u\nk6ids END r9 A=1 U=1 R=0\n");
        let p = file(
            "run.json",
            r#"{"accepted": 1, "uncertain": 1, "refused": 0, "ids": {"file": "elsewhere/run.ids", "run": "r9"}}"#,
        );
        let Expected::Ids(src) = from_file(&p).unwrap() else { panic!("ids expected") };
        let mut got = Vec::new();
        let counts = src.load(|id, e, _| got.push((id.to_string(), e))).unwrap();
        assert_eq!(counts, LogCounts { accepted: 1, uncertain: 1, refused: 0 });
        assert_eq!(got, [("a".to_string(), Expect::Accepted), ("u".to_string(), Expect::Uncertain)]);
        let huge = file(
            "huge.json",
            r#"{"accepted": 18446744073709551615, "uncertain": 1, "ids": {"file": "run.ids", "run": "r9"}}"#,
        );
        let Expected::Ids(src) = from_file(&huge).unwrap() else { panic!("ids expected") };
        assert!(src.size_hint() <= 7, "a hint no larger than the log's lines: {}", src.size_hint());
        let lying = file("lying.json", r#"{"accepted": 5, "ids": {"file": "run.ids", "run": "r9"}}"#);
        let Expected::Ids(src) = from_file(&lying).unwrap() else { panic!("ids expected") };
        assert!(src.load(|_, _, _| {}).unwrap_err().to_string().contains("summary says"));
    }
}
