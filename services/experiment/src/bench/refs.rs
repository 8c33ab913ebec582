//! The bench's references, each measured alone: what k6 gets from a server that does nothing but
//! answer 202, and what each server of the stack does with our clients' batches. The pipeline's
//! figures are read as shares of these, measured in the same run (machines differ ~3× per core).
//!
//! Each reference leaves its raw output and `NAME.cpu.json` (CPU seconds of the server, and of
//! k6 where it ran) in the references folder; the table is made from those alone.

use super::settings::BenchArgs;
use crate::procs::{self, Launch};
use anyhow::{bail, Context};
use pipeline_common::procstat::cpu_seconds;
use std::path::Path;
use std::time::Duration;
use tracing::info;

pub(super) struct Refs<'a> {
    pub root: &'a Path,
    /// Where the example binaries are (`target/<profile>/examples`).
    pub examples: &'a Path,
    pub k6: &'a Path,
    /// The references folder of the evidence.
    pub dir: &'a Path,
}

impl Refs<'_> {
    /// k6 against the null-202 server: single POSTs, then batch POSTs, the same scripts and id
    /// log as the pipeline runs, so the only difference is what answers.
    pub(super) async fn null_202(&self, args: &BenchArgs) -> anyhow::Result<()> {
        let (server, base) = self.start_null(args).await?;
        let dur = ("DURATION", args.duration.clone());
        info!("reference: null 202, single POSTs at {} VUs, {}", args.vus, args.duration);
        let single = [("VUS", args.vus.to_string()), dur.clone(), ("WARMUP_ROUNDS", "0".into())];
        self.null_k6(server.pid, &base, "null-single", "k6/closed-loop.js", &single).await?;
        info!("reference: null 202, batches of {} at {} VUs, {}", args.batch, args.batch_vus, args.duration);
        let batch = [("VUS", args.batch_vus.to_string()), ("BATCH", args.batch.to_string()), dur];
        self.null_k6(server.pid, &base, "null-batch", "k6/batch.js", &batch).await?;
        server.stop(Duration::from_secs(5)).await;
        Ok(())
    }

    /// The null-202 server on its own port, ready.
    async fn start_null(&self, args: &BenchArgs) -> anyhow::Result<(procs::Service, String)> {
        let base = format!("http://{}", args.null_listen);
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
        let env = [("INGEST_LISTEN".to_string(), args.null_listen.clone())];
        let launch = Launch {
            name: "null_202",
            bin: &self.examples.join("null_202"),
            args: &[],
            env: &env,
            log: &self.dir.join("null_202.log"),
            base: &base,
            ready: "/healthz",
            timeout: Duration::from_secs(30),
        };
        Ok((procs::start(&http, launch).await?, base))
    }

    /// The latency references at each of `rates` requests/s, open loop: k6 against the null-202
    /// server (`null-open-RATE`), and the broker's own produce acknowledgement of one-message
    /// records with the ingest's producer settings (`broker-latency-RATE`): what the pipeline's
    /// p99 at that rate is compared with.
    pub(super) async fn latency(&self, args: &BenchArgs, rates: &[u32]) -> anyhow::Result<()> {
        let secs = crate::duration::seconds(&args.duration).unwrap_or(60.0).to_string();
        for &rate in rates {
            let (server, base) = self.start_null(args).await?;
            info!("reference: null 202, open loop at {rate} requests/s, {}", args.duration);
            let vars = [
                ("RATE", rate.to_string()),
                ("DURATION", args.duration.clone()),
                ("MAX_VUS", "100".to_string()),
                ("PRE_VUS", rate.clamp(10, 100).to_string()),
            ];
            self.null_k6(server.pid, &base, &format!("null-open-{rate}"), "k6/open-loop.js", &vars).await?;
            server.stop(Duration::from_secs(5)).await;
            info!("reference: the broker's acknowledgement alone, one message a record, {rate} records/s");
            let name = format!("broker-latency-{rate}");
            self.example(&name, "broker_batches", &["latency", &rate.to_string(), &secs], Some("kafka")).await?;
        }
        Ok(())
    }

    async fn null_k6(
        &self,
        pid: u32,
        base: &str,
        name: &str,
        script: &str,
        vars: &[(&str, String)],
    ) -> anyhow::Result<()> {
        let summary = self.dir.join(format!("{name}.json"));
        let ids = self.dir.join(format!("{name}.ids"));
        let log = self.dir.join(format!("{name}.k6.txt"));
        let mut env = crate::k6::base_env(self.root, base, &summary, &ids, &format!("bench-{name}"));
        env.extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
        let server0 = cpu_seconds(Some(pid)).unwrap_or(0.0);
        let mut child = crate::k6::spawn(self.k6, self.root, script, &env, &log)?;
        let kpid = child.id();
        // k6's own CPU, sampled until it exits: its /proc entry is gone after.
        let mut k6_cpu = 0.0;
        let status = loop {
            tokio::select! {
                st = child.wait() => break st.context("waiting for k6")?,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    k6_cpu = cpu_seconds(kpid).unwrap_or(k6_cpu);
                }
            }
        };
        let server_cpu = cpu_seconds(Some(pid)).unwrap_or(server0) - server0;
        let cpu = serde_json::json!({ "server_cpu_s": server_cpu, "k6_cpu_s": k6_cpu, "k6_exit": status.code() });
        std::fs::write(self.dir.join(format!("{name}.cpu.json")), cpu.to_string() + "\n")?;
        if std::fs::metadata(&summary).map(|m| m.len() == 0).unwrap_or(true) {
            bail!("k6 ({status}) wrote no summary for {name}; see {}", log.display());
        }
        Ok(())
    }

    /// Every store's server of the run (--stores), then the broker, each driven by our own
    /// client code with the server's CPU read around it.
    pub(super) async fn servers_alone(&self, args: &BenchArgs) -> anyhow::Result<()> {
        let batches = (args.records / args.batch.max(1)).max(1);
        let (batch, in_flight) = (args.batch.to_string(), args.in_flight.to_string());
        for kind in crate::procs::stores().kinds() {
            let name = kind.name();
            info!("reference: {name} alone, {batches} batches of {batch}, {in_flight} in flight");
            // A quarter of the work first, not measured: a freshly started OpenSearch compiles its
            // hot paths while it serves, and measured cold it costs several times more per message.
            let warm = (batches / 4).max(1).to_string();
            self.example(&format!("warmup-{name}"), "store_batches", &[name, &warm, &batch, &in_flight], None).await?;
            let n = batches.to_string();
            self.example(&format!("alone-{name}"), "store_batches", &[name, &n, &batch, &in_flight], Some(name))
                .await?;
        }
        info!("reference: the broker alone, {} messages, {batch} to a record, produced then consumed", args.records);
        let records = args.records.to_string();
        self.example("alone-kafka", "broker_batches", &[&records, "256", &batch], Some("kafka")).await
    }

    /// Runs an example to its end, its output in `NAME.txt`; with `server`, that server's CPU
    /// over the run in `NAME.cpu.json`.
    async fn example(&self, name: &str, bin: &str, argv: &[&str], server: Option<&str>) -> anyhow::Result<()> {
        let pid = match server {
            Some(s) => Some(
                procs::server_pid(self.root, s)
                    .with_context(|| format!("no running {s} server of the native stack (scripts/stack up)"))?,
            ),
            None => None,
        };
        let cpu0 = pid.and_then(|p| cpu_seconds(Some(p)));
        let (status, text) = procs::run_to_end(&self.examples.join(bin), argv, self.root)
            .await
            .with_context(|| format!("starting {bin}"))?;
        let path = self.dir.join(format!("{name}.txt"));
        std::fs::write(&path, &text)?;
        if !status.success() {
            bail!("{bin} {} failed ({status}); see {}", argv.join(" "), path.display());
        }
        if let (Some(pid), Some(cpu0)) = (pid, cpu0) {
            let used = cpu_seconds(Some(pid)).unwrap_or(cpu0) - cpu0;
            std::fs::write(
                self.dir.join(format!("{name}.cpu.json")),
                serde_json::json!({ "server_cpu_s": used }).to_string() + "\n",
            )?;
        }
        info!("{}", text.lines().last().unwrap_or(""));
        Ok(())
    }
}
