//! Reading what was injected: a k6 summary from our scripts, or a file of ids.

use anyhow::{bail, Context};
use std::collections::HashSet;
use std::path::Path;

/// The expected total from FILE: the `accepted` field of a k6 summary JSON (the number of 202
/// responses), or else the number of distinct ids, one per line.
pub fn from_file(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if text.trim_start().starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
        match v.get("accepted").and_then(|a| a.as_u64()) {
            Some(n) => Ok(n),
            None => bail!("{} has no numeric `accepted` field (is it a k6/ summary?)", path.display()),
        }
    } else {
        Ok(ids_from_file(path)?.len() as u64)
    }
}

/// Distinct ids, one per line (blank lines ignored).
pub fn ids_from_file(path: &Path) -> anyhow::Result<HashSet<String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect())
}
