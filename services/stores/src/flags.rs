//! What every store's flags share, for the registry and each `args.rs`: a URL read from its file,
//! whether a URL carries data in plaintext to another machine, a URL redirected to a proxy, and
//! the environment that hands the same flags to a child process.

use crate::{StoreError, StoreKind};
use std::path::{Path, PathBuf};

/// A store URL's value: the file's content when a `--<store>-url-file` names one. A file that
/// cannot be read is a permanent error (nothing will change by asking again).
pub(crate) fn resolve_url(kind: StoreKind, url: &str, file: Option<&Path>) -> Result<String, StoreError> {
    pipeline_common::secret::read_or(url, file).map_err(|e| StoreError::permanent_from(kind, e))
}

/// The host of `url` when it is not this machine and `encrypted` says the URL asks for no TLS.
pub(crate) fn remote_plaintext(url: &str, encrypted: impl Fn(&url::Url) -> bool) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    let host = u.host_str()?.to_string();
    (!encrypted(&u) && !pipeline_common::secret::is_loopback(&host)).then_some(host)
}

/// Points a store's connection URL at `to` (`host:port`) instead of its server; returns the
/// server's `host:port`. A URL read from a file is written, rewritten, to a new file in
/// `secret_dir` (mode 0600), so that no password travels in an environment variable.
pub(crate) fn redirect_url(
    kind: StoreKind,
    (url, file): (&mut String, &mut Option<PathBuf>),
    to: &str,
    secret_dir: &Path,
) -> Result<String, StoreError> {
    let bad = |message: String| StoreError::permanent(kind, message);
    let mut u =
        url::Url::parse(&resolve_url(kind, url, file.as_deref())?).map_err(|e| StoreError::permanent_from(kind, e))?;
    let (host, port) = match (u.host_str(), u.port_or_known_default()) {
        (Some(h), Some(p)) => (h.to_string(), p),
        _ => return Err(bad("the URL names no host and port to redirect (give the port explicitly)".into())),
    };
    let (to_host, to_port) = to.rsplit_once(':').ok_or_else(|| bad(format!("{to} is not host:port")))?;
    u.set_host(Some(to_host)).map_err(|e| StoreError::permanent_from(kind, e))?;
    let to_port = to_port.parse().map_err(|e| StoreError::permanent_from(kind, e))?;
    u.set_port(Some(to_port)).map_err(|()| bad("this URL cannot have a port".into()))?;
    if file.is_some() {
        use std::os::unix::fs::OpenOptionsExt;
        let path = secret_dir.join(format!("{kind}.url"));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| StoreError::permanent_from(kind, e))?;
        std::io::Write::write_all(&mut f, u.as_str().as_bytes()).map_err(|e| StoreError::permanent_from(kind, e))?;
        *file = Some(path);
    } else {
        *url = u.to_string();
    }
    Ok(format!("{host}:{port}"))
}

/// The environment that gives a child process the same flags as `flags`, derived from clap's
/// own description of them, so a new flag cannot be forgotten: each flag's `env` name with its
/// value. A flag's id is `STORE-FIELD` (`mysql-url` is `MysqlArgs::url`, kebab-cased by serde);
/// an unset optional flag is left out, and so is a flag whose `-file` twin is set, so a secret
/// read from a file travels as the file's name, never in an environment variable.
pub(crate) fn flags_env<T: clap::Args + serde::Serialize>(store: &str, flags: &T) -> Vec<(String, String)> {
    let values = match serde_json::to_value(flags) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => return Vec::new(),
    };
    let value = |id: &str| -> Option<String> {
        match values.get(id.strip_prefix(store)?.strip_prefix('-')?)? {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    };
    let cmd = T::augment_args(clap::Command::new(store.to_string()));
    cmd.get_arguments()
        .filter(|arg| value(&format!("{}-file", arg.get_id())).is_none())
        .filter_map(|arg| Some((arg.get_env()?.to_string_lossy().into_owned(), value(arg.get_id().as_str())?)))
        .collect()
}
