//! What the writer's black-box tests share: a private namespace, the stores, a spawned writer
//! and its metrics.
#![allow(dead_code)] // each test binary uses its own part of this

use pipeline_common::kafka::group_lag;
use pipeline_stores::Store;
use pipeline_testkit::{
    assert_exact_ids, free_port, messages, produce, wait_for_counts, wait_port, Child, Namespace, Service,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DRAIN: Duration = Duration::from_secs(240);

pub struct Run {
    pub ns: Namespace,
    pub stores: Vec<Arc<dyn Store>>,
    pub metrics_port: u16,
}

impl Run {
    pub async fn new(label: &str) -> Run {
        let ns = Namespace::new(label).await;
        let stores = ns.stores().await;
        Run { ns, stores, metrics_port: free_port() }
    }

    pub fn writer(&self, args: &[&str]) -> Service {
        self.writer_with_env(args, &[])
    }

    /// A writer with extra environment variables (after the namespace's).
    pub fn writer_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Service {
        let mut all = vec![("WRITER_METRICS_ADDR", format!("127.0.0.1:{}", self.metrics_port))];
        all.extend(env.iter().map(|(k, v)| (*k, v.to_string())));
        self.ns.spawn("writer", args, &all)
    }

    /// Produces `n` messages tagged `tag` and returns their ids.
    pub async fn produce(&self, n: usize, tag: &str) -> Vec<String> {
        let msgs = messages(n, tag);
        produce(&self.ns.kafka, &msgs).await;
        msgs.into_iter().map(|m| m.id).collect()
    }

    pub async fn assert_stored(&self, ids: &[String]) {
        let counts = wait_for_counts(&self.stores, ids.len() as u64, DRAIN).await;
        assert!(counts.iter().all(|(_, c)| *c == ids.len() as u64), "counts {counts:?}, want {}", ids.len());
        assert_exact_ids(&self.stores, ids).await;
    }

    /// Sum of committed offsets and of high watermarks over the topic's partitions.
    pub async fn committed_and_high(&self) -> (i64, i64) {
        let k = self.ns.kafka.clone();
        let lag = tokio::task::spawn_blocking(move || group_lag(&k, &k.group, &k.topic)).await.unwrap().unwrap();
        (lag.iter().map(|p| p.committed).sum(), lag.iter().map(|p| p.high).sum())
    }

    pub async fn wait_committed(&self, want: i64) {
        let deadline = Instant::now() + DRAIN;
        loop {
            let (c, _) = self.committed_and_high().await;
            if c == want {
                return;
            }
            assert!(Instant::now() < deadline, "committed {c}, want {want}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    pub async fn metric(&self, name_and_labels: &str) -> f64 {
        pipeline_testkit::metric(self.metrics_port, name_and_labels).await
    }

    /// Waits until the writer's group has settled: each of its `consumers` holds at least one
    /// partition and together they hold all of them, at two scrapes a second apart. A rebalance
    /// after the writes hands stored but uncommitted partitions to consumers that have not read
    /// them again yet; a stop then leaves them uncommitted (redelivered on the next start and
    /// rewritten idempotently: at least once, not a loss), which is not what a test of the final
    /// commit is about.
    pub async fn wait_settled(&self, consumers: usize) {
        let deadline = Instant::now() + DRAIN;
        let healthz = format!("http://127.0.0.1:{}/healthz", self.metrics_port);
        let mut settled_before = false;
        loop {
            let up = reqwest::get(&healthz).await.is_ok_and(|r| r.status().is_success());
            let mut settled = false;
            if up {
                let mut held = Vec::with_capacity(consumers);
                for c in 0..consumers {
                    held.push(self.metric(&format!("writer_assigned_partitions{{consumer=\"{c}\"}}")).await);
                }
                settled = held.iter().all(|n| *n >= 1.0) && held.iter().sum::<f64>() == self.ns.kafka.partitions as f64;
            }
            if settled && settled_before {
                return;
            }
            settled_before = settled;
            assert!(Instant::now() < deadline, "the writer's {consumers} consumers never settled");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// A private Redis that a test may stop and start again: append-only with fsync always, so a
/// graceful stop and restart keeps every key.
pub struct PrivateRedis {
    pub port: u16,
    dir: std::path::PathBuf,
    /// Server settings beyond the defaults, as `redis-server` arguments (kept for a restart).
    settings: Vec<String>,
    pub server: Child,
}

impl PrivateRedis {
    fn spawn(port: u16, dir: &std::path::Path, settings: &[String]) -> Child {
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .args(["--save", ""])
            .args(settings)
            .arg("--dir")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server");
        Child(child)
    }

    /// Stops the server (SIGTERM) and waits for it to exit.
    pub fn stop(&mut self) {
        self.server.signal("TERM");
        self.server.wait_exit(Duration::from_secs(10)).expect("redis stopped");
    }

    /// Starts the server again on the same port and data.
    pub fn start(&mut self) {
        self.server = Self::spawn(self.port, &self.dir, &self.settings);
    }
}

impl Run {
    /// Points this run's Redis at a private server of its own (started here), so the test may
    /// stop it without disturbing the shared one.
    pub async fn with_private_redis(&mut self) -> PrivateRedis {
        self.with_private_redis_set(&[]).await
    }

    /// [`Run::with_private_redis`] with server settings (`["--proto-max-bulk-len", "1mb"]`).
    pub async fn with_private_redis_set(&mut self, settings: &[&str]) -> PrivateRedis {
        let settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
        let port = free_port();
        let dir = std::env::temp_dir().join(&self.ns.name);
        std::fs::create_dir_all(&dir).expect("redis data dir");
        let server = PrivateRedis::spawn(port, &dir, &settings);
        assert!(wait_port(port, 20), "the private redis-server never listened on {port}");
        self.ns.stores.redis.url = format!("redis://127.0.0.1:{port}/0");
        self.stores = self.ns.stores().await;
        PrivateRedis { port, dir, settings, server }
    }
}
