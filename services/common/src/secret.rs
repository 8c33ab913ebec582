//! Secrets: read from files, and kept out of what the services print and record.
//!
//! Every flag that can hold a credential (a store URL with its password, Kafka's `sasl.*` and
//! `ssl.*` options) has a `--…-file` twin and a `…_FILE` variable, the Docker and Kubernetes
//! secrets convention, and hides its environment value from `--help` (clap prints it otherwise).
//! [`redact`] is what evidence and logs print instead of a value that may hold one.

use std::path::Path;

/// The value of a secret flag: the file's content when one is named (without its trailing
/// newline), else the inline value.
pub fn read_or(inline: &str, file: Option<&Path>) -> std::io::Result<String> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
            Ok(text.trim_end_matches(['\n', '\r']).to_string())
        }
        None => Ok(inline.to_string()),
    }
}

/// Whether a `key=value` option's key names a secret (librdkafka's `sasl.password`,
/// `ssl.key.password`, `sasl.oauthbearer.client.secret`, `ssl.keystore.password`, …).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "token", "credential", "jaas", "private", "ssl.key.pem", "api_key", "apikey"]
        .iter()
        .any(|w| k.contains(w))
}

/// `scheme://user:secret@host` → `scheme://user:***@host` (the last `@` before the path ends the
/// credentials, so a password holding `@` is masked whole), and the values of secret keys in
/// `key=value,key=value` lists → `***`. Anything else is returned as it is.
pub fn redact(value: &str) -> String {
    if let Some(scheme_end) = value.find("://") {
        let rest = &value[scheme_end + 3..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            let creds = &rest[..at];
            let user = creds.split_once(':').map_or(creds, |(u, _)| u);
            return format!("{}{user}:***{}", &value[..scheme_end + 3], &rest[at..]);
        }
        return value.to_string();
    }
    if value.contains('=') {
        return value
            .split(',')
            .map(|item| match item.split_once('=') {
                Some((k, _)) if is_secret_key(k.trim()) => format!("{k}=***"),
                _ => item.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",");
    }
    value.to_string()
}

/// A command-line argument as evidence may show it: `--flag=value` with the value redacted,
/// anything else through [`redact`] (a URL's password, a secret option's value).
pub fn redact_arg(arg: &str) -> String {
    match arg.strip_prefix("--").and_then(|a| a.split_once('=')) {
        Some((flag, value)) => format!("--{flag}={}", redact(value)),
        None => redact(arg),
    }
}

/// Whether `host` is this machine: `localhost`, 127.0.0.0/8 or ::1 (a link that never leaves it
/// needs no encryption).
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The links that would carry data in plaintext to another machine (`what`, e.g. `mysql at
/// db.internal`): an error naming them unless `allowed`, in which case they are logged loudly.
pub fn check_plaintext(links: &[String], allowed: bool) -> Result<(), String> {
    match (links.is_empty(), allowed) {
        (true, _) => Ok(()),
        (false, true) => {
            tracing::warn!(links = ?links, "plaintext links to other machines allowed (--allow-plaintext)");
            Ok(())
        }
        (false, false) => Err(format!(
            "plaintext links to other machines: {}; configure TLS (docs/explanation/security.md) or pass --allow-plaintext \
             (PIPELINE_ALLOW_PLAINTEXT=true) for a network you trust",
            links.join(", ")
        )),
    }
}

/// Whether an environment variable's name says it holds a secret (or a URL that may).
pub fn is_secret_var(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_URL")
        || n.ends_with("_OPTIONS")
        || ["PASSWORD", "SECRET", "TOKEN", "KEY"].iter().any(|w| n.contains(w) && !n.ends_with("_FILE"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_secret_options_are_masked() {
        assert_eq!(redact("mysql://pipeline:secret@127.0.0.1:3306/p"), "mysql://pipeline:***@127.0.0.1:3306/p");
        assert_eq!(redact("mysql://u:p@ss@w0rd@h:1/db"), "mysql://u:***@h:1/db", "a password holding @");
        assert_eq!(redact("redis://:only-pass@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact("redis://127.0.0.1:6379/0"), "redis://127.0.0.1:6379/0");
        assert_eq!(redact("http://h:9200/a@b"), "http://h:9200/a@b", "an @ in the path is not a credential");
        assert_eq!(
            redact("security.protocol=SASL_SSL,sasl.username=app,sasl.password=hunter2"),
            "security.protocol=SASL_SSL,sasl.username=app,sasl.password=***"
        );
        assert_eq!(redact("linger.ms=5"), "linger.ms=5");
        assert_eq!(
            redact_arg("--kafka-options=sasl.password=x,linger.ms=1"),
            "--kafka-options=sasl.password=***,linger.ms=1"
        );
        assert_eq!(redact_arg("--mysql-url=mysql://u:p@h/d"), "--mysql-url=mysql://u:***@h/d");
        assert_eq!(redact_arg("--vus"), "--vus");
    }

    #[test]
    fn a_secret_file_is_read_without_its_newline() {
        let p = std::env::temp_dir().join(format!("secret-{}", std::process::id()));
        std::fs::write(&p, "mysql://u:s3cret@h/db\n").unwrap();
        assert_eq!(read_or("ignored", Some(&p)).unwrap(), "mysql://u:s3cret@h/db");
        assert_eq!(read_or("inline", None).unwrap(), "inline");
        assert!(read_or("x", Some(Path::new("/nonexistent/secret"))).unwrap_err().to_string().contains("/nonexistent"));
        assert!(is_secret_var("MYSQL_URL") && is_secret_var("KAFKA_OPTIONS") && !is_secret_var("MYSQL_URL_FILE"));
    }
}
