//! A `StoreError` keeps the error it was built from: it displays as it always did (`mysql: <the
//! driver's text>`), its chain (`{:#}` through anyhow) adds what the text does not already say,
//! each cause once, and no store's failure to connect shows the password of its URL, in the text,
//! the chain or the debug form. No server is needed: the connections go to a closed port.

use pipeline_stores::{Backend, Sink, StoreArgs, StoreError, StoreKind};
use std::fmt;
use std::io;

/// An error whose text does not say its cause (as reqwest's `error sending request` does not).
#[derive(Debug)]
struct Terse(io::Error);

impl fmt::Display for Terse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request failed")
    }
}

impl std::error::Error for Terse {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

fn refused() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, "connection refused")
}

#[test]
fn the_text_is_as_before_and_the_chain_says_each_cause_once() {
    let plain = StoreError::transient(StoreKind::Mysql, "pool timed out");
    assert_eq!(plain.to_string(), "mysql: pool timed out");
    assert!(plain.transient && plain.origin().is_none());
    assert!(std::error::Error::source(&plain).is_none());

    // sqlx says its cause in its own text: the chain adds nothing, and nothing twice.
    let e = StoreError::permanent_from(StoreKind::Mysql, sqlx::Error::Io(refused()));
    assert!(!e.transient);
    assert_eq!(e.to_string(), "mysql: error communicating with database: connection refused");
    assert_eq!(e.message, "error communicating with database: connection refused");
    assert!(e.origin().and_then(|o| o.downcast_ref::<sqlx::Error>()).is_some(), "the driver's error is kept");
    let chain = format!("{:#}", anyhow::Error::from(e).context("connecting"));
    assert_eq!(chain, "connecting: mysql: error communicating with database: connection refused");

    // A driver that does not say its cause: the chain says it, once.
    let e = StoreError::transient_from(StoreKind::Es, Terse(refused()));
    assert_eq!(e.to_string(), "es: request failed");
    assert_eq!(format!("{:#}", anyhow::Error::from(e)), "es: request failed: connection refused");
}

/// A password in every store's URL, and each store's connection failing (a closed port, or a URL
/// the driver refuses): the password is in no form of the error.
#[tokio::test]
async fn no_failed_connection_shows_its_password() {
    const SECRET: &str = "canary-s3cret";
    fn shown(e: StoreError) -> String {
        let debug = format!("{e:?}");
        let e = anyhow::Error::from(e);
        format!("{e:#}\n{e:?}\n{debug}")
    }
    let base = StoreArgs::from_env();
    // The stores at once: MySQL's and MongoDB's failures take their connect timeout.
    let mysql = async {
        let mut out = Vec::new();
        for url in
            [format!("mysql://pipeline:{SECRET}@127.0.0.1:1/pipeline"), format!("mysql://pipeline:{SECRET}@h:99999/p")]
        {
            let mut args = base.mysql.clone();
            (args.url, args.url_file, args.admin_url, args.admin_url_file) = (url.clone(), None, None, None);
            let e = pipeline_stores::mysql::MysqlStore::connect(&args).await.err().expect("no MySQL there");
            out.push((url, shown(e)));
        }
        out
    };
    let redis = async {
        let mut out = Vec::new();
        for url in [format!("redis://:{SECRET}@127.0.0.1:1/0"), format!("redis://:{SECRET}@127.0.0.1:1/not-a-db")] {
            let mut args = base.redis.clone();
            (args.url, args.url_file) = (url.clone(), None);
            let e = pipeline_stores::redis::RedisStore::connect(&args).await.err().expect("no Redis there");
            out.push((url, shown(e)));
        }
        out
    };
    // Basic auth is sent as a header, never in the URL a failed request names (an empty user too).
    let es = async {
        let mut out = Vec::new();
        for url in [format!("http://elastic:{SECRET}@127.0.0.1:1"), format!("http://:{SECRET}@127.0.0.1:1")] {
            let mut args = base.es.clone();
            (args.url, args.url_file, args.api_key_file, args.bearer_file) = (url.clone(), None, None, None);
            let store = pipeline_stores::es::EsStore::connect(&args).await.expect("connecting makes no request");
            let said = shown(store.healthcheck().await.expect_err("no Elasticsearch there"));
            assert!(said.to_lowercase().contains("refused"), "the chain says why the request failed: {said}");
            out.push((url, said));
        }
        out
    };
    let mongo = async {
        let mut out = Vec::new();
        for url in [format!("mongodb://u:{SECRET}@127.0.0.1:1/"), format!("mongodb://u:{SECRET}@127.0.0.1:1/?bogus")] {
            let mut args = base.mongo.clone();
            (args.url, args.url_file) = (url.clone(), None);
            let e = match pipeline_stores::mongo::MongoStore::connect(&args).await {
                Ok(store) => store.healthcheck().await.expect_err("no MongoDB there"),
                Err(e) => e,
            };
            out.push((url, shown(e)));
        }
        out
    };
    let (mysql, redis, es, mongo) = futures::join!(mysql, redis, es, mongo);
    let failures: Vec<(String, String)> = [mysql, redis, es, mongo].concat();
    assert_eq!(failures.len(), 2 * StoreKind::ALL.len());
    for (url, said) in &failures {
        assert!(!said.is_empty());
        assert!(!said.contains(SECRET), "{url}: the password is shown:\n{said}");
    }
}
