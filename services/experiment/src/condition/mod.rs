//! Experiment conditions: a store made slow (`--store-delay es=20ms±5ms,...`) by a proxy between
//! the writer and that store's server. A condition is not a fault: a round run under one is
//! valid by the same gates as any other, and the report names its condition. Only the writer's
//! links go through the proxies; reconcile and the ingest reach the servers directly.

pub mod proxy;
pub mod spec;

use pipeline_stores::StoreArgs;
use proxy::{Proxy, ProxyStats};
use spec::StoreDelay;
use std::path::PathBuf;

/// The proxies of one round, and the environment that points a writer through them.
pub struct Conditions {
    proxies: Vec<Proxy>,
    /// Store flags for the writer (the redirected URLs, or files holding them).
    pub writer_env: Vec<(String, String)>,
    secret_dir: Option<PathBuf>,
}

impl Conditions {
    /// Starts one proxy per delayed store, in front of the server the environment names.
    pub async fn start(delays: &[StoreDelay]) -> anyhow::Result<Conditions> {
        let mut c = Conditions { proxies: Vec::new(), writer_env: Vec::new(), secret_dir: None };
        if delays.is_empty() {
            return Ok(c);
        }
        // A URL read from a file is rewritten into a file of its own, never into the environment.
        // mkdtemp: mode 0700 and a name nobody could prepare in advance.
        let dir = nix::unistd::mkdtemp(&std::env::temp_dir().join("experiment-conditions.XXXXXX"))?;
        c.secret_dir = Some(dir.clone());
        let mut args = StoreArgs::from_env();
        for d in delays {
            let upstream = args.clone().redirect(d.store, "127.0.0.1:9", &dir)?;
            let proxy = Proxy::start(*d, upstream).await?;
            args.redirect(d.store, &proxy.listen.to_string(), &dir)?;
            c.proxies.push(proxy);
        }
        c.writer_env = args.env().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        Ok(c)
    }

    pub fn stop(mut self) -> Vec<ProxyStats> {
        std::mem::take(&mut self.proxies).into_iter().map(Proxy::stop).collect()
    }
}

impl Drop for Conditions {
    fn drop(&mut self) {
        if let Some(d) = self.secret_dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
