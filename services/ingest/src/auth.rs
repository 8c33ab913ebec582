//! Who may write: API keys, sent as bearer tokens, checked against a file of hashed keys.
//!
//! The keys file (`--auth-keys`) holds one key per line, `NAME sha256:HEX`, where HEX is the
//! SHA-256 of the token: the file says who may write without holding what they write with, so
//! it can be read by operators and shipped in configuration. Tokens are random (`ingest key
//! new`), so a fast hash is the right one, as for any high-entropy API key. A token is compared
//! with every key's hash in constant time, so how long a refusal takes says nothing about how
//! close a guess was. The file is read again on SIGHUP and when it changes (checked every 2 s):
//! a key removed from it stops working without a restart. A file that no longer parses is
//! refused and the keys in force are kept (logged, and `ingest_auth_reloads_total{result}`).
//!
//! A missing or wrong key gets 401 with `WWW-Authenticate: Bearer` and nothing about why. The
//! key's name travels with the request ([`KeyName`]) into the metrics and the access log.

use crate::config::{AuthMode, IngestConfig};
use actix_web::dev::ServiceRequest;
use actix_web::http::header;
use arc_swap::ArcSwap;
use metrics::counter;
use pipeline_common::catalog;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The key a request was accepted with ("none" when the ingest runs without keys), and its
/// limits.
#[derive(Debug, Clone)]
pub struct KeyName(pub Arc<str>, pub Limits);

/// One key's limits (`crate::limits`): messages and bytes per second (0: none) and the share of
/// the ring its requests may hold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub rate: u32,
    pub bytes_rate: u32,
    pub share: f64,
}

/// One key of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: Arc<str>,
    hash: [u8; 32],
    pub limits: Limits,
}

/// Why a keys file is refused.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("reading {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: line {line}: {detail}", path.display())]
    Line { path: PathBuf, line: usize, detail: String },
    #[error("{}: holds no key (an empty file would refuse every request; use --auth none to accept anyone)", .0.display())]
    Empty(PathBuf),
}

/// The keys in force.
#[derive(Debug, Clone)]
pub struct Keys(Vec<Key>);

fn sha256(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// The keys-file line for `token` under `name`.
pub fn line_for(name: &str, token: &str) -> String {
    let hex: String = sha256(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("{name} sha256:{hex}")
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

impl Keys {
    /// Parses a keys file's text: `NAME sha256:HEX [rate=N] [bytes=N] [share=F]` per line (the
    /// limits default to `defaults`); blank lines and `#` comments.
    pub fn parse(text: &str, path: &Path, defaults: Limits) -> Result<Keys, KeysError> {
        let mut keys = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |detail: &str| KeysError::Line { path: path.to_path_buf(), line: i + 1, detail: detail.into() };
            let mut words = line.split_whitespace();
            let (Some(name), Some(hash)) = (words.next(), words.next()) else {
                return Err(bad("expected `NAME sha256:HEX [rate=N] [bytes=N] [share=F]`"));
            };
            let mut limits = defaults;
            for w in words {
                let parsed = match w.split_once('=') {
                    Some(("rate", v)) => v.parse().map(|n| limits.rate = n).is_ok(),
                    Some(("bytes", v)) => v.parse().map(|n| limits.bytes_rate = n).is_ok(),
                    Some(("share", v)) => {
                        v.parse::<f64>().ok().filter(|f| (0.0..=1.0).contains(f)).map(|f| limits.share = f).is_some()
                    }
                    _ => false,
                };
                if !parsed {
                    return Err(bad(&format!("`{w}`: a limit is rate=N, bytes=N or share=F (0 to 1)")));
                }
            }
            if !valid_name(name) {
                return Err(bad("a name is 1-64 of [A-Za-z0-9_.-]"));
            }
            let hex = hash.strip_prefix("sha256:").ok_or_else(|| bad("the hash must start with `sha256:`"))?;
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .filter_map(|j| hex.get(j..j + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect();
            let hash: [u8; 32] =
                bytes.try_into().ok().filter(|_| hex.len() == 64).ok_or_else(|| bad("the hash is 64 hex digits"))?;
            if keys.iter().any(|k: &Key| &*k.name == name) {
                return Err(bad("a name appears twice"));
            }
            keys.push(Key { name: name.into(), hash, limits });
        }
        if keys.is_empty() {
            return Err(KeysError::Empty(path.to_path_buf()));
        }
        Ok(Keys(keys))
    }

    pub fn load(path: &Path, defaults: Limits) -> Result<Keys, KeysError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| KeysError::Io { path: path.to_path_buf(), source })?;
        Keys::parse(&text, path, defaults)
    }

    /// The key whose hash is the token's. Every key is compared, each in constant time.
    pub fn check(&self, token: &[u8]) -> Option<&Key> {
        let hash = sha256(token);
        let mut found = None;
        for k in &self.0 {
            if bool::from(k.hash.ct_eq(&hash)) {
                found = Some(k);
            }
        }
        found
    }

    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|k| &*k.name).collect()
    }
}

/// The keys in force, swapped whole on reload.
pub struct Auth {
    keys: ArcSwap<Keys>,
    path: Option<PathBuf>,
    /// The limits of a key whose line sets none (and of everyone with `--auth none`).
    pub(crate) defaults: Limits,
}

impl Auth {
    /// Reads the keys file, or says loudly that the ingest accepts anyone (`--auth none`).
    pub fn from_config(cfg: &IngestConfig) -> anyhow::Result<Arc<Auth>> {
        let defaults = Limits { rate: cfg.key_rate, bytes_rate: cfg.key_bytes_rate, share: cfg.key_ring_share };
        match (cfg.auth, &cfg.auth_keys) {
            (AuthMode::None, _) => {
                tracing::warn!("--auth none: ANYONE who reaches this port can write; for a lab only (docs/explanation/security.md)");
                Ok(Arc::new(Auth { keys: ArcSwap::from_pointee(Keys(Vec::new())), path: None, defaults }))
            }
            (AuthMode::Keys, None) => anyhow::bail!(
                "no keys file: pass --auth-keys FILE (INGEST_AUTH_KEYS; `ingest key new NAME` makes a key), or --auth none \
                 to accept anyone"
            ),
            (AuthMode::Keys, Some(path)) => {
                let keys = Keys::load(path, defaults)?;
                tracing::info!(keys = keys.0.len(), file = %path.display(), names = ?keys.names(), "API keys loaded");
                Ok(Arc::new(Auth { keys: ArcSwap::from_pointee(keys), path: Some(path.clone()), defaults }))
            }
        }
    }

    pub fn required(&self) -> bool {
        self.path.is_some()
    }

    /// Reads the file again; the keys in force stay when it does not parse.
    pub fn reload(&self) {
        let Some(path) = &self.path else { return };
        match Keys::load(path, self.defaults) {
            Ok(keys) => {
                tracing::info!(keys = keys.0.len(), names = ?keys.names(), "API keys reloaded");
                self.keys.store(Arc::new(keys));
                counter!(catalog::INGEST_AUTH_RELOADS_TOTAL, "result" => "ok").increment(1);
            }
            Err(e) => {
                tracing::error!(error = %e, "the keys file does not parse: the keys in force are kept");
                counter!(catalog::INGEST_AUTH_RELOADS_TOTAL, "result" => "refused").increment(1);
            }
        }
    }

    /// Reloads on SIGHUP and when the file's modification time or size changes. Runs until the
    /// runtime stops.
    pub async fn watch(self: Arc<Auth>) {
        let Some(path) = self.path.clone() else { return };
        crate::reload::watch(vec![path], crate::reload::Settle::AtOnce, "the keys file is", || self.reload()).await
    }

    /// The key a request's `Authorization: Bearer` token names.
    pub(crate) fn key_of(&self, req: &ServiceRequest) -> Option<KeyName> {
        let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        self.keys.load().check(token.trim().as_bytes()).map(|k| KeyName(k.name.clone(), k.limits))
    }
}

/// `ingest key new NAME`: a fresh random token, written to `--token-out` (mode 0600) or printed,
/// and the keys-file line for it on standard output.
pub fn new_key(name: &str, token_out: Option<&Path>) -> anyhow::Result<()> {
    anyhow::ensure!(valid_name(name), "a key name is 1-64 of [A-Za-z0-9_.-]");
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let token: String = format!("pk_{}", raw.iter().map(|b| format!("{b:02x}")).collect::<String>());
    match token_out {
        Some(path) => {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
            writeln!(f, "{token}")?;
        }
        None => eprintln!("token (shown once; give it to the client): {token}"),
    }
    println!("{}", line_for(name, &token));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: Limits = Limits { rate: 0, bytes_rate: 0, share: 0.5 };

    #[test]
    fn a_line_may_set_its_own_limits() {
        let text = format!("{} rate=100 share=0.25\n{}\n", line_for("slow", "pk_s"), line_for("std", "pk_t"));
        let keys = Keys::parse(&text, Path::new("keys"), DEFAULTS).expect("parses");
        assert_eq!(keys.check(b"pk_s").map(|k| k.limits), Some(Limits { rate: 100, bytes_rate: 0, share: 0.25 }));
        assert_eq!(keys.check(b"pk_t").map(|k| k.limits), Some(DEFAULTS));
        for bad in ["rate=x", "share=2", "speed=1"] {
            assert!(
                Keys::parse(&format!("{} {bad}", line_for("k", "t")), Path::new("keys"), DEFAULTS).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_token_matches_its_line_and_nothing_else() {
        let text = format!("# the lab\n{}\n\n{}  # a second\n", line_for("k6", "pk_one"), line_for("ops", "pk_two"));
        let keys = Keys::parse(&text, Path::new("keys"), DEFAULTS).expect("parses");
        assert_eq!(keys.names(), ["k6", "ops"]);
        assert_eq!(keys.check(b"pk_one").map(|k| &*k.name), Some("k6"));
        assert_eq!(keys.check(b"pk_two").map(|k| &*k.name), Some("ops"));
        assert!(keys.check(b"pk_on").is_none() && keys.check(b"").is_none());
    }

    #[test]
    fn a_bad_file_is_refused_with_its_line() {
        for (text, want) in [
            ("k6 sha1:abc", "line 1"),
            ("k6 sha256:zz", "64 hex"),
            ("bad name sha256:00", "a limit is"),
            ("", "no key"),
            (&format!("{}\n{}", line_for("a", "x"), line_for("a", "y")), "twice"),
        ] {
            let e = Keys::parse(text, Path::new("keys"), DEFAULTS).expect_err(text).to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
