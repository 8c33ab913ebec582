//! HTTPS on the API listener: `--tls-cert-file` and `--tls-key-file` (PEM).
//!
//! rustls with its *ring* provider: the one the workspace already builds for sqlx's MySQL TLS and
//! for reqwest (through elasticsearch), so no second Rust crypto library (aws-lc-rs, rustls's
//! default, and its C build) enters the build. A memory-safe TLS stack where the clients connect;
//! librdkafka keeps its OpenSSL for Kafka. TLS 1.2 and 1.3, rustls's safe defaults (forward-secret
//! AEAD suites only).
//!
//! The pair in force is held by [`Certificates`], the listener's `ResolvesServerCert`: every new
//! handshake asks it for the pair, and a reload swaps the pair whole (an `ArcSwap`), so the files
//! can be replaced (a renewal, a rotation) without a restart, as the API keys file is
//! (`crate::auth`). A connection already open keeps the certificate it was made with.
//!
//! What is refused — at start (the ingest exits, naming the file and the problem) and at a reload
//! (the pair in force is kept, the refusal logged and counted in `ingest_tls_reloads_total`): a
//! file that cannot be read; a certificate file with no certificate, or one that does not parse; a
//! key file with no key rustls can sign with; a key that is not the certificate's; a certificate of
//! the file (the server's or an intermediate) that has expired or is not valid yet. Clients would
//! refuse each of those at their handshake: refusing them here says which file is wrong, once.

use arc_swap::ArcSwap;
use metrics::counter;
use pipeline_common::catalog;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use time::OffsetDateTime;

/// Why a certificate and key pair is refused. Each names the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("{}: cannot read it: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: not valid PEM: {detail}", path.display())]
    Pem { path: PathBuf, detail: String },
    #[error("{}: holds no certificate (a PEM `-----BEGIN CERTIFICATE-----` block, the server's first)", .0.display())]
    NoCertificate(PathBuf),
    #[error("{}: certificate {index} of the file is not X.509: {detail}", path.display())]
    BadCertificate { path: PathBuf, index: usize, detail: String },
    #[error("{}: certificate {index} of the file ({subject}) expired at {not_after} (it is now {now})", path.display())]
    Expired { path: PathBuf, index: usize, subject: String, not_after: String, now: String },
    #[error(
        "{}: certificate {index} of the file ({subject}) is not valid before {not_before} (it is now {now})",
        path.display()
    )]
    NotYetValid { path: PathBuf, index: usize, subject: String, not_before: String, now: String },
    #[error(
        "{}: holds no private key (an unencrypted PEM `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY` block)",
        .0.display()
    )]
    NoKey(PathBuf),
    #[error("{}: not a private key this server can sign with: {detail}", path.display())]
    BadKey { path: PathBuf, detail: String },
    #[error(
        "{}: the key does not match the certificate of {} (their public keys differ)",
        key.display(),
        cert.display()
    )]
    Mismatch { cert: PathBuf, key: PathBuf },
    #[error("{}: the key cannot be checked against this certificate: {detail}", cert.display())]
    Unusable { cert: PathBuf, detail: String },
}

/// A pair that passed every check, and what the logs say of it.
#[derive(Debug)]
pub(crate) struct Pair {
    key: Arc<CertifiedKey>,
    subject: String,
    not_after: OffsetDateTime,
    /// SHA-256 of the server's certificate, as `openssl x509 -fingerprint -sha256` prints it
    /// without the colons: what an operator compares to see which certificate is served.
    sha256: String,
}

/// The crypto provider of the listener and of the key parsing: *ring* (see the module's comment).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A time as the logs and errors show it: RFC 3339, to the second.
fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.replace_nanosecond(0).unwrap_or(t);
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| t.to_string())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_path_buf(), source })
}

/// Reads and checks the pair as of `now`.
pub(crate) fn load(cert: &Path, key: &Path, provider: &CryptoProvider, now: OffsetDateTime) -> Result<Pair, TlsError> {
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    let pem_error = |path: &Path, e: pem::Error| TlsError::Pem { path: path.to_path_buf(), detail: e.to_string() };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&cert_pem).collect::<Result<_, _>>().map_err(|e| pem_error(cert, e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_path_buf()));
    }
    // Every certificate of the file is sent to clients, and a client refuses the chain if any of
    // them is out of its dates: check each, the server's (the first) and the intermediates.
    let mut leaf = None;
    for (i, der) in chain.iter().enumerate() {
        let index = i + 1;
        let (_, x509) = x509_parser::parse_x509_certificate(der).map_err(|e| TlsError::BadCertificate {
            path: cert.to_path_buf(),
            index,
            detail: e.to_string(),
        })?;
        let subject = x509.subject().to_string();
        let validity = x509.validity();
        let (not_before, not_after) = (validity.not_before.to_datetime(), validity.not_after.to_datetime());
        if now < not_before {
            return Err(TlsError::NotYetValid {
                path: cert.to_path_buf(),
                index,
                subject,
                not_before: rfc3339(not_before),
                now: rfc3339(now),
            });
        }
        if now > not_after {
            return Err(TlsError::Expired {
                path: cert.to_path_buf(),
                index,
                subject,
                not_after: rfc3339(not_after),
                now: rfc3339(now),
            });
        }
        leaf.get_or_insert_with(|| {
            let sha256: String = Sha256::digest(der).iter().map(|b| format!("{b:02X}")).collect();
            (subject, not_after, sha256)
        });
    }
    let (subject, not_after, sha256) = leaf.ok_or_else(|| TlsError::NoCertificate(cert.to_path_buf()))?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoKey(key.to_path_buf()),
        e => pem_error(key, e),
    })?;
    let signer = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| TlsError::BadKey { path: key.to_path_buf(), detail: e.to_string() })?;
    let certified = CertifiedKey::new(chain, signer);
    // A key that is not the certificate's would fail every handshake with an error the client
    // cannot explain; rustls compares the two public keys (every *ring* key can tell its own).
    match certified.keys_match() {
        Ok(()) => {}
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            return Err(TlsError::Mismatch { cert: cert.to_path_buf(), key: key.to_path_buf() })
        }
        Err(e) => return Err(TlsError::Unusable { cert: cert.to_path_buf(), detail: e.to_string() }),
    }
    Ok(Pair { key: Arc::new(certified), subject, not_after, sha256 })
}

/// Fourteen days: a certificate closer than this to its end is logged as a warning at every load.
const EXPIRY_WARNING: time::Duration = time::Duration::days(14);

fn log_pair(pair: &Pair, what: &str, now: OffsetDateTime) {
    let left = pair.not_after - now;
    if left < EXPIRY_WARNING {
        tracing::warn!(
            subject = %pair.subject, not_after = %rfc3339(pair.not_after), sha256 = %pair.sha256,
            days_left = left.whole_days(), "{what}: the certificate expires soon: replace the files"
        );
    } else {
        tracing::info!(subject = %pair.subject, not_after = %rfc3339(pair.not_after), sha256 = %pair.sha256, "{what}");
    }
}

/// The certificate and key in force, answered to every new handshake and swapped whole when the
/// files change.
#[derive(Debug)]
pub(crate) struct Certificates {
    current: ArcSwap<CertifiedKey>,
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
}

impl Certificates {
    /// Reads and checks the pair at start: any problem is an error naming the file.
    pub(crate) fn load(cert: &Path, key: &Path) -> Result<Arc<Certificates>, TlsError> {
        let provider = provider();
        let now = OffsetDateTime::now_utc();
        let pair = load(cert, key, &provider, now)?;
        log_pair(&pair, "HTTPS on the API listener", now);
        Ok(Arc::new(Certificates {
            current: ArcSwap::new(pair.key),
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            provider,
        }))
    }

    /// Reads the files again; the pair in force stays when the new one is refused.
    pub(crate) fn reload(&self) {
        let now = OffsetDateTime::now_utc();
        match load(&self.cert, &self.key, &self.provider, now) {
            Ok(pair) => {
                log_pair(&pair, "TLS certificate reloaded: new connections get it", now);
                self.current.store(pair.key);
                counter!(catalog::INGEST_TLS_RELOADS_TOTAL, "result" => "ok").increment(1);
            }
            Err(e) => {
                tracing::error!(error = %e, "the TLS certificate or key was refused: the pair in force is kept");
                counter!(catalog::INGEST_TLS_RELOADS_TOTAL, "result" => "refused").increment(1);
            }
        }
    }

    /// The listener's configuration: HTTP/1.1 over TLS 1.2 or 1.3, every handshake asking this
    /// pair.
    pub(crate) fn server_config(self: &Arc<Certificates>) -> Result<ServerConfig, rustls::Error> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        // Stateless resumption (TLS 1.3 tickets, keys rotated by rustls every 6 hours): a client
        // that reconnects after --keep-alive-secs resumes without a new key exchange and
        // signature, which are most of a handshake's CPU. A resumed session skips the
        // certificate, so after a rotation a client may resume a session made under the old one
        // until its ticket ends: new sessions get the new certificate.
        config.ticketer = rustls::crypto::ring::Ticketer::new()?;
        Ok(config)
    }

    /// Reloads on SIGHUP, and when either file's modification time or size changed and then held
    /// still for one look (checked every 2 s): a pair replaced one file after the other is read
    /// once both are in place, not refused half-way. Kubernetes' secret volumes swap both at once
    /// (a symlink), and the modification time followed is the new files'. Runs until the runtime
    /// stops.
    pub(crate) async fn watch(self: Arc<Certificates>) {
        let paths = vec![self.cert.clone(), self.key.clone()];
        crate::reload::watch(paths, crate::reload::Settle::OneLook, "the TLS files are", || self.reload()).await
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    #[test]
    fn a_pair_that_matches_loads_and_names_its_certificate() {
        let pki = pipeline_testkit::pki();
        let pair = load(&pki.cert, &pki.key, &provider(), now()).expect("the test PKI's pair");
        assert!(pair.subject.contains("CN=localhost"), "{}", pair.subject);
        assert_eq!(pair.sha256.len(), 64);
        // One file holding both (stunnel's form) serves as either.
        load(&pki.cert_and_key, &pki.cert_and_key, &provider(), now()).expect("certificate and key in one file");
    }

    #[test]
    fn each_bad_pair_is_refused_naming_the_file_and_the_problem() {
        let pki = pipeline_testkit::pki();
        let (cert, key) = (pki.cert.as_path(), pki.key.as_path());
        let missing = pki.dir.join("missing.pem");
        let other_key = pki.dir.join("ca.key"); // the CA's key: a key, not the certificate's
        let text = pki.dir.join("text.pem");
        std::fs::write(&text, "not a certificate\n").expect("write");
        let cases: [(&Path, &Path, OffsetDateTime, &str); 7] = [
            (&missing, key, now(), "missing.pem: cannot read it"),
            (cert, &missing, now(), "missing.pem: cannot read it"),
            (key, key, now(), "server.key: holds no certificate"),
            (&text, key, now(), "text.pem: holds no certificate"),
            (cert, cert, now(), "server.pem: holds no private key"),
            (cert, &other_key, now(), "ca.key: the key does not match the certificate of"),
            (
                cert,
                key,
                datetime!(2200-01-01 0:00 UTC),
                "server.pem: certificate 1 of the file (CN=localhost) expired at",
            ),
        ];
        for (c, k, at, want) in cases {
            let e = load(c, k, &provider(), at).expect_err(want).to_string();
            assert!(e.contains(want), "want {want:?}: {e}");
        }
        let e = load(cert, key, &provider(), datetime!(2000-01-01 0:00 UTC)).expect_err("before").to_string();
        assert!(e.contains("is not valid before") && e.contains("it is now 2000-01-01T00:00:00Z"), "{e}");
        // A chain: the server's certificate, then its issuer's, each checked.
        let chain = pki.dir.join("chain.pem");
        let both = [std::fs::read(cert).expect("cert"), std::fs::read(&pki.ca).expect("ca")].concat();
        std::fs::write(&chain, both).expect("write");
        load(&chain, key, &provider(), now()).expect("a chain within its dates");
        let e = load(&chain, &text, &provider(), now()).expect_err("no key").to_string();
        assert!(e.contains("text.pem: holds no private key"), "{e}");
    }

    #[test]
    fn a_refused_reload_keeps_the_pair_in_force_and_a_good_one_replaces_it() {
        let (a, b) = (pipeline_testkit::pki(), pipeline_testkit::pki());
        let dir = a.dir.join("live");
        std::fs::create_dir_all(&dir).expect("dir");
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        let put = |p: &pipeline_testkit::Pki| {
            std::fs::copy(&p.cert, &cert).expect("cert");
            std::fs::copy(&p.key, &key).expect("key");
        };
        put(&a);
        let certs = Certificates::load(&cert, &key).expect("a's pair");
        let served = || certs.current.load().cert[0].to_vec();
        let der = |p: &pipeline_testkit::Pki| CertificateDer::from_pem_file(&p.cert).expect("pem").to_vec();
        assert_eq!(served(), der(&a));
        // b's certificate with a's key: refused, a's pair stays.
        std::fs::copy(&b.cert, &cert).expect("cert");
        certs.reload();
        assert_eq!(served(), der(&a), "a mismatched pair is refused");
        put(&b);
        certs.reload();
        assert_eq!(served(), der(&b), "the whole new pair is in force");
    }
}
