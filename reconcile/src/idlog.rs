//! Id files: the k6 id log (see k6/lib/ids.js) and plain lists of ids, one per line.
//!
//! An id may carry the digest of the content the client sent, as `id:digest` (16 hex digits,
//! `pipeline_common::digest::sent`): reconcile then checks that the stores hold what was sent,
//! not only that they agree with each other.
//!
//! The k6 log is the console output of a k6 run, which k6 appends to: the lines of one run sit
//! between `k6ids RUN <run>` and `k6ids END <run> A=<n> U=<n> R=<n>`, and only that section is
//! read. A missing END (k6 did not finish), a count that disagrees with END, or another run's
//! lines inside the section make the file unusable rather than silently partial. Lines may be
//! bare (K6_LOG_FORMAT=raw) or wrapped by k6's logfmt or json formats.

use crate::tally::Expect;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

const MARK: &str = "k6ids ";

#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error("reading {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {detail}", path.display())]
    Invalid { path: PathBuf, detail: String },
}

impl InputError {
    pub(crate) fn invalid(path: &Path, detail: impl Into<String>) -> InputError {
        InputError::Invalid { path: path.to_path_buf(), detail: detail.into() }
    }
}

/// Ids read per class (lines, so an id named twice counts twice): the `expected` of the report.
pub(crate) type LogCounts = pipeline_common::reconcile_report::ExpectedIds;

/// Calls `f` with each line of `path` (one buffer reused: id logs have millions of lines);
/// `f` returns `false` to stop early.
fn for_each_line(path: &Path, mut f: impl FnMut(&str) -> Result<bool, InputError>) -> Result<(), InputError> {
    let io = |source| InputError::Io { path: path.to_path_buf(), source };
    let mut r = BufReader::with_capacity(1 << 16, File::open(path).map_err(io)?);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).map_err(io)? == 0 || !f(line.trim_end_matches(['\n', '\r']))? {
            return Ok(());
        }
    }
}

/// An id and the digest of what was sent with it, when the token carries one (`id:digest`).
pub(crate) fn split_token(token: &str) -> Result<(&str, Option<u64>), String> {
    match token.split_once(':') {
        None => Ok((token, None)),
        Some((id, hex)) => match u64::from_str_radix(hex, 16) {
            Ok(d) if hex.len() == 16 && !id.is_empty() => Ok((id, Some(d))),
            _ => Err(format!("`{token}` is not an id with a 16-hex-digit digest")),
        },
    }
}

/// The tagged part of a log line (`A id id`, `RUN x`), without k6's wrapping.
fn tagged(line: &str) -> Option<&str> {
    let at = line.find(MARK)?;
    let rest = &line[at + MARK.len()..];
    Some(rest.split('"').next().unwrap_or(rest).trim_end())
}

/// Whether `path` is a k6 id log (its first non-blank line is tagged).
pub(crate) fn is_k6_log(path: &Path) -> Result<bool, InputError> {
    let mut tagged_first = false;
    for_each_line(path, |line| {
        if line.trim().is_empty() {
            return Ok(true);
        }
        tagged_first = tagged(line).is_some();
        Ok(false)
    })?;
    Ok(tagged_first)
}

/// The runs in a k6 log, in order.
pub(crate) fn runs(path: &Path) -> Result<Vec<String>, InputError> {
    let mut out = Vec::new();
    for_each_line(path, |line| {
        if let Some(run) = tagged(line).and_then(|t| t.strip_prefix("RUN ")) {
            out.push(run.trim().to_string());
        }
        Ok(true)
    })?;
    Ok(out)
}

/// Reads the section of `run` from a k6 log, giving each id to `sink`.
pub(crate) fn read_k6_log(
    path: &Path,
    run: &str,
    mut sink: impl FnMut(&str, Expect, Option<u64>),
) -> Result<LogCounts, InputError> {
    let bad = |detail: String| InputError::invalid(path, detail);
    let (mut started, mut ended) = (false, None::<LogCounts>);
    let mut counts = LogCounts::default();
    for_each_line(path, |line| {
        let Some(t) = tagged(line) else { return Ok(true) };
        let mut words = t.split_whitespace();
        let (tag, first) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let inside = started && ended.is_none();
        match tag {
            "RUN" if first == run && started => return Err(bad(format!("run {run} starts twice"))),
            "RUN" if first == run => started = true,
            "RUN" if inside => {
                return Err(bad(format!("run {first} started inside run {run}: two runs shared the file")))
            }
            "END" if first == run && inside => ended = Some(end_counts(words).map_err(bad)?),
            "A" | "U" | "R" if inside && !first.is_empty() => {
                let (e, n) = match tag {
                    "A" => (Expect::Accepted, &mut counts.accepted),
                    "U" => (Expect::Uncertain, &mut counts.uncertain),
                    _ => (Expect::Refused, &mut counts.refused),
                };
                for token in std::iter::once(first).chain(words) {
                    let (id, sent) = split_token(token).map_err(bad)?;
                    sink(id, e, sent);
                    *n += 1;
                }
            }
            _ => {}
        }
        Ok(true)
    })?;
    match ended {
        _ if !started => Err(bad(format!("no `k6ids RUN {run}` line: not the id log of this run"))),
        None => Err(bad(format!("run {run} has no END line: k6 did not finish, the id log is incomplete"))),
        Some(end) if end != counts => {
            Err(bad(format!("run {run}: END says {end:?} but the log holds {counts:?}: the id log is incomplete")))
        }
        Some(_) => Ok(counts),
    }
}

/// `A=1 U=2 R=3` → counts.
fn end_counts<'a>(words: impl Iterator<Item = &'a str>) -> Result<LogCounts, String> {
    let mut c = LogCounts::default();
    for w in words {
        let (k, v) = w.split_once('=').ok_or_else(|| format!("bad END field `{w}`"))?;
        let v: u64 = v.parse().map_err(|_| format!("bad END count `{w}`"))?;
        match k {
            "A" => c.accepted = v,
            "U" => c.uncertain = v,
            "R" => c.refused = v,
            _ => return Err(format!("bad END field `{w}`")),
        }
    }
    Ok(c)
}

/// Reads a plain id file (one id per line, optionally `id:digest`, blank lines ignored) as ids of
/// class `e`.
pub(crate) fn read_plain(
    path: &Path,
    e: Expect,
    mut sink: impl FnMut(&str, Expect, Option<u64>),
) -> Result<u64, InputError> {
    let (mut n, mut at) = (0, 0);
    for_each_line(path, |line| {
        at += 1;
        let id = line.trim();
        if id.is_empty() {
            return Ok(true);
        }
        if id.contains(char::is_whitespace) {
            return Err(InputError::invalid(path, format!("line {at}: `{id}` is not one id")));
        }
        let (id, sent) = split_token(id).map_err(|d| InputError::invalid(path, format!("line {at}: {d}")))?;
        sink(id, e, sent);
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn file(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("reconcile-idlog-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    fn read(p: &Path, run: &str) -> Result<HashMap<String, Expect>, InputError> {
        let mut m = HashMap::new();
        read_k6_log(p, run, |id, e, _| {
            m.insert(id.to_string(), e);
        })?;
        Ok(m)
    }

    #[test]
    fn reads_only_its_run_in_any_log_format() {
        let p = file(
            "formats",
            "k6ids RUN old\nk6ids A stale\nk6ids END old A=1 U=0 R=0\n\
             k6ids RUN r1\nk6ids A a1 a2\ntime=\"t\" level=info msg=\"k6ids U u1\"\n\
             {\"level\":\"info\",\"msg\":\"k6ids R r1\",\"time\":\"t\"}\nk6ids END r1 A=2 U=1 R=1\n",
        );
        let m = read(&p, "r1").unwrap();
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(
            (m["a1"], m["a2"], m["u1"], m["r1"]),
            (Expect::Accepted, Expect::Accepted, Expect::Uncertain, Expect::Refused)
        );
        assert!(is_k6_log(&p).unwrap());
        assert_eq!(runs(&p).unwrap(), ["old", "r1"]);
    }

    #[test]
    fn an_unfinished_or_short_log_is_refused() {
        let p = file("noend", "k6ids RUN r1\nk6ids A a1\n");
        assert!(read(&p, "r1").unwrap_err().to_string().contains("no END"));
        let p = file("short", "k6ids RUN r1\nk6ids A a1\nk6ids END r1 A=2 U=0 R=0\n");
        assert!(read(&p, "r1").unwrap_err().to_string().contains("incomplete"));
        let p = file("mixed", "k6ids RUN r1\nk6ids RUN r2\nk6ids END r1 A=0 U=0 R=0\n");
        assert!(read(&p, "r1").unwrap_err().to_string().contains("shared"));
        assert!(read(&p, "zz").unwrap_err().to_string().contains("no `k6ids RUN zz`"));
    }

    #[test]
    fn plain_files_are_one_id_per_line() {
        let p = file("plain", "a\n\n b \n");
        let mut ids = Vec::new();
        assert_eq!(read_plain(&p, Expect::Uncertain, |id, _, _| ids.push(id.to_string())).unwrap(), 2);
        assert_eq!(ids, ["a", "b"]);
        assert!(!is_k6_log(&p).unwrap());
        let p = file("notplain", "a b\n");
        assert!(read_plain(&p, Expect::Accepted, |_, _, _| {}).is_err());
        let p = file("digests", "a:00000000000000ff\nb\n");
        let mut got = Vec::new();
        read_plain(&p, Expect::Accepted, |id, _, d| got.push((id.to_string(), d))).unwrap();
        assert_eq!(got, [("a".to_string(), Some(255)), ("b".to_string(), None)]);
        let p = file("baddigest", "a:xyz\n");
        assert!(read_plain(&p, Expect::Accepted, |_, _, _| {}).is_err());
    }
}
