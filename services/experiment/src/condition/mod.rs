//! Experiment conditions: a store made slow (`--store-delay es=20ms±5ms,...`) by a proxy between
//! the writer and that store's server. A condition is not a fault: a round run under one is
//! valid by the same gates as any other, and the report names its condition. Only the writer's
//! links go through the proxies; reconcile and the ingest reach the servers directly.

pub(crate) mod proxy;
pub(crate) mod spec;

use pipeline_stores::StoreArgs;
use proxy::{Proxy, ProxyStats};
use spec::StoreDelay;

/// The proxies of one round, and the environment that points a writer through them.
pub(crate) struct Conditions {
    proxies: Vec<Proxy>,
    /// Store flags for the writer (the redirected URLs, or files holding them).
    pub writer_env: Vec<(String, String)>,
    /// Where a URL read from a file is rewritten to (never into the environment); a private
    /// folder, removed with the conditions.
    _secrets: Option<tempfile::TempDir>,
}

impl Conditions {
    /// Starts one proxy per delayed store, in front of the server the environment names.
    pub(crate) async fn start(delays: &[StoreDelay]) -> anyhow::Result<Conditions> {
        if delays.is_empty() {
            return Ok(Conditions { proxies: Vec::new(), writer_env: Vec::new(), _secrets: None });
        }
        let secrets = tempfile::Builder::new().prefix("experiment-conditions.").tempdir()?;
        let mut args = StoreArgs::from_env();
        let mut proxies = Vec::new();
        for d in delays {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let upstream = args.redirect(d.store, &listener.local_addr()?.to_string(), secrets.path())?;
            proxies.push(Proxy::start(*d, listener, upstream));
        }
        let writer_env = args.env();
        Ok(Conditions { proxies, writer_env, _secrets: Some(secrets) })
    }

    pub(crate) fn stop(self) -> Vec<ProxyStats> {
        self.proxies.into_iter().map(Proxy::stop).collect()
    }
}
