//! `reconcile ids`: what a k6 run's id log holds, without contacting anything. It checks that the
//! log is complete (its END counts and the summary's agree with its lines) and can write the ids
//! as plain files, one id per line, for people and for `diff --ids/--uncertain`.

use crate::expect::{Expected, IdSource};
use crate::idlog::{InputError, LogCounts};
use crate::tally::Expect;
use pipeline_common::reconcile_report::IdsReport;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Files written by `--write PREFIX`.
fn outputs(prefix: &Path) -> [(Expect, PathBuf); 3] {
    let with = |ext: &str| PathBuf::from(format!("{}.{ext}.ids", prefix.display()));
    [(Expect::Accepted, with("accepted")), (Expect::Uncertain, with("uncertain")), (Expect::Refused, with("refused"))]
}

/// Reads the ids of `file` (a k6 summary or id log); writes them under `write` when given.
pub(crate) fn run(file: &Path, write: Option<&Path>, as_json: bool) -> Result<(), InputError> {
    let src = match crate::expect::from_file(file)? {
        Expected::Ids(src) => src,
        Expected::Totals { .. } => {
            return Err(InputError::invalid(file, "names no id log (k6 ran without K6_CONSOLE_OUTPUT)"))
        }
    };
    let counts = match write {
        None => src.load(|_, _, _| {})?,
        Some(prefix) => write_plain(&src, prefix)?,
    };
    print(&src, counts, write, as_json);
    Ok(())
}

fn write_plain(src: &IdSource, prefix: &Path) -> Result<LogCounts, InputError> {
    let files = outputs(prefix);
    let mut out = Vec::with_capacity(files.len());
    for (_, path) in &files {
        let f = File::create(path).map_err(|source| InputError::Io { path: path.clone(), source })?;
        out.push(BufWriter::new(f));
    }
    let mut failed: Option<(usize, std::io::Error)> = None;
    let counts = src.load(|id, e, sent| {
        let Some(i) = files.iter().position(|(x, _)| *x == e) else { return };
        if failed.is_none() {
            let written = match sent {
                Some(d) => writeln!(out[i], "{id}:{}", pipeline_common::digest::hex(d)),
                None => writeln!(out[i], "{id}"),
            };
            if let Err(err) = written {
                failed = Some((i, err));
            }
        }
    })?;
    for (i, mut w) in out.into_iter().enumerate() {
        if let Err(err) = w.flush() {
            failed.get_or_insert((i, err));
        }
    }
    match failed {
        Some((i, source)) => Err(InputError::Io { path: files[i].1.clone(), source }),
        None => Ok(counts),
    }
}

fn print(src: &IdSource, c: LogCounts, write: Option<&Path>, as_json: bool) {
    let written: Vec<String> =
        write.map(|p| outputs(p).iter().map(|(_, f)| f.display().to_string()).collect()).unwrap_or_default();
    if as_json {
        crate::report::print_json(&IdsReport { source: src.describe(), ids: c, written });
    } else {
        println!(
            "{}: {} accepted, {} uncertain, {} refused (complete)",
            src.describe(),
            c.accepted,
            c.uncertain,
            c.refused
        );
        for f in written {
            println!("wrote {f}");
        }
    }
}
