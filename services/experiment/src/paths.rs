//! Where things are: the checkout (for k6/ and scripts/), the tool cache of `scripts/stack`, the
//! k6 binary. The same rules as scripts/lib.sh and the test kit, so every entry point agrees.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub(crate) enum PathError {
    #[error(
        "no checkout found above {0} (a folder with scripts/stack and k6/): run from the repository or pass --root"
    )]
    NoRoot(String),
    #[error("k6 not found: set K6_BIN (or --k6) or run scripts/stack up, which installs it under {0}")]
    NoK6(String),
}

/// `$PIPELINE_CACHE`, default `~/.cache/pipeline`.
pub(crate) fn cache_dir() -> PathBuf {
    match std::env::var_os("PIPELINE_CACHE") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/pipeline"),
    }
}

/// The native stack's folder: `$STACK_DIR`, default `<root>/.stack` (as scripts/stack).
pub(crate) fn stack_dir(root: &Path) -> PathBuf {
    std::env::var_os("STACK_DIR").map(PathBuf::from).unwrap_or_else(|| root.join(".stack"))
}

/// The lab's API key, for the ingest (`INGEST_AUTH_KEYS`, the hashed keys) and k6
/// (`INGEST_KEY_FILE`, the token): the files `scripts/stack up` makes, unless the environment
/// names others (it is passed on to every process anyway). Only the paths travel, never a token.
pub(crate) fn lab_key_env(root: &Path) -> Vec<(String, String)> {
    let stack = stack_dir(root);
    [("INGEST_AUTH_KEYS", "api-keys"), ("INGEST_KEY_FILE", "api.key")]
        .into_iter()
        .filter(|(var, _)| std::env::var_os(var).is_none())
        .map(|(var, file)| (var.to_string(), stack.join(file).display().to_string()))
        .collect()
}

/// The checkout: `given`, else the first folder upwards from the current one that holds
/// `scripts/stack` and `k6/closed-loop.js`.
pub(crate) fn root(given: Option<&Path>) -> Result<PathBuf, PathError> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    cwd.ancestors()
        .find(|d| d.join("scripts/stack").exists() && d.join("k6/closed-loop.js").exists())
        .map(Path::to_path_buf)
        .ok_or_else(|| PathError::NoRoot(cwd.display().to_string()))
}

/// The k6 binary: `given` (flag or K6_BIN), else the first venv of the cache that has one.
pub(crate) fn k6(given: Option<&Path>) -> Result<PathBuf, PathError> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let cache = cache_dir();
    std::fs::read_dir(&cache)
        .ok()
        .and_then(|d| {
            let mut venvs: Vec<PathBuf> = d.flatten().map(|e| e.path().join("bin/k6")).filter(|p| p.exists()).collect();
            venvs.sort();
            venvs.pop()
        })
        .ok_or_else(|| PathError::NoK6(cache.display().to_string()))
}
