//! One scenario on stage: its own topic, group and dead-letter topic in the run's store
//! namespace, the processes it starts (writers, the ingest, k6 runs), the monitor, and what it
//! records (events, checks, notes) for the verdict. [`Stage::finish`] always runs: it waits for
//! the load, reconciles, checks that nothing crashed and that the writers exit 0 on SIGTERM, and
//! writes the row.

use super::files;
use super::hosts::Hosts;
use super::monitor::{now, Monitor};
use super::record::CutInfo;
use super::setting::Setting;
use super::verdict::{self, Check, Event, EventKind, Progress, Record, Row};
use crate::procs::{self, Launch, ProcError, Service};
use pipeline_common::config::KafkaArgs;
use pipeline_common::reconcile_report::Answer;
use pipeline_stores::StoreKind;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tokio::process::Child;
use tracing::{info, warn};

/// Why a scenario stopped early; it is also a failed check of the scenario.
#[derive(Debug)]
pub(super) struct Abort(pub String);

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) type Step = Result<(), Abort>;

/// Longest wait for the pipeline to drain before one of the scenario's reconciles gives up.
pub(super) const DRAIN_S: &str = "180";

/// A pause that an interrupt of the whole run cuts short (the run's future is dropped).
pub(super) async fn nap(secs: u64) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

pub(super) struct Stage<'a> {
    pub set: &'a Setting,
    pub dir: PathBuf,
    pub kafka: KafkaArgs,
    /// What every process of the scenario gets: the namespace's stores, topic, group, DLQ.
    pub child_env: Vec<(String, String)>,
    pub ingest_url: String,
    /// More environment for every writer this scenario starts (a partition scenario's stall
    /// watch).
    pub writer_env: Vec<(String, String)>,
    writers: BTreeMap<String, Service>,
    /// By name: `ingest` on 127.0.0.1, or the partition scenarios' `ingest-a` and `ingest-b`.
    ingests: BTreeMap<String, Service>,
    k6: BTreeMap<String, Child>,
    monitor: Option<Monitor>,
    pub record: Record,
    aborted: bool,
    /// A wipe scenario: the store `finish` repairs before the final reconcile.
    pub repair: Option<StoreKind>,
    last_event: f64,
    /// A partition scenario's hosts: a writer or ingest named after one runs there. Declared
    /// last, so that on a drop (an interrupt) the processes are killed before their namespaces
    /// go.
    pub hosts: Option<Hosts>,
}

impl<'a> Stage<'a> {
    /// A new topic, group and dead-letter topic; the namespace's stores reset; with `hosts`, the
    /// partition scenarios' hosts built; the monitor on.
    pub(super) async fn begin(set: &'a Setting, name: &str, hosts: bool) -> Result<Stage<'a>, Abort> {
        let dir = set.out.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| Abort(format!("cannot create {}: {e}", dir.display())))?;
        let mut kafka = set.kafka.clone();
        kafka.topic = format!("chaos-{}-{name}", set.stamp);
        kafka.group = format!("{}-writers", kafka.topic);
        let mut child_env: Vec<(String, String)> = set.stores.env();
        child_env.extend([
            ("KAFKA_TOPIC".to_string(), kafka.topic.clone()),
            ("KAFKA_GROUP".to_string(), kafka.group.clone()),
            ("KAFKA_PARTITIONS".to_string(), kafka.partitions.to_string()),
            ("WRITER_DLQ_TOPIC".to_string(), format!("{}.dlq", kafka.topic)),
            ("RUST_LOG".to_string(), std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())),
        ]);
        info!("== {name}: topic {}, group {}", kafka.topic, kafka.group);
        let mut stage = Stage {
            set,
            ingest_url: format!("http://127.0.0.1:{}", set.ingest_port),
            dir,
            kafka,
            child_env,
            writer_env: Vec::new(),
            writers: BTreeMap::new(),
            ingests: BTreeMap::new(),
            k6: BTreeMap::new(),
            monitor: None,
            record: Record { scenario: name.into(), ..Record::default() },
            aborted: false,
            repair: None,
            last_event: now(),
            hosts: None,
        };
        if let Err(Abort(why)) = stage.setup(hosts).await {
            stage.abort(why);
        }
        Ok(stage)
    }

    async fn setup(&mut self, hosts: bool) -> Step {
        pipeline_common::kafka::ensure_topic(&self.kafka, &self.kafka.topic, self.kafka.partitions)
            .await
            .map_err(|e| Abort(format!("cannot create topic {}: {e}", self.kafka.topic)))?;
        let code = self.reconcile(&["reset", "--yes"], "reset").await;
        if code != Some(0) {
            return Err(Abort(format!("reconcile reset exited {code:?} (see reset.log)")));
        }
        if hosts {
            let h = Hosts::build(&self.set.stores, &self.kafka, self.set.hosts_subnet)
                .await
                .map_err(|e| Abort(format!("cannot build the hosts (root and iproute2 needed): {e}")))?;
            for s in h.stale() {
                self.note(format!("removed what a killed run left: {s}"));
            }
            self.hosts = Some(h);
        }
        let writers = (0..self.set.writer_ports.len()).map(|slot| {
            let (port, base) = (self.set.writer_ports[slot], self.writer_base(slot));
            (port.to_string(), base)
        });
        let monitor =
            Monitor::start(&self.kafka, &self.dir.join("monitor.jsonl"), writers.collect(), Duration::from_millis(500))
                .map_err(|e| Abort(format!("monitor: {e:#}")))?;
        self.monitor = Some(monitor);
        Ok(())
    }

    pub(super) fn is_aborted(&self) -> bool {
        self.aborted
    }

    pub(super) fn name(&self) -> &str {
        &self.record.scenario
    }

    pub(super) fn check(&mut self, ok: bool, what: &str, detail: &str) {
        if !ok {
            warn!("{}: FAILED {what} {detail}", self.name());
        }
        self.record.checks.push(Check { ok, check: what.into(), detail: detail.into() });
    }

    /// Records why the scenario cannot go on, as a failed check.
    pub(super) fn abort(&mut self, why: String) -> Abort {
        self.check(false, "scenario aborted", &why);
        self.aborted = true;
        Abort(why)
    }

    pub(super) fn note(&mut self, text: String) {
        info!("{}: {text}", self.name());
        self.record.notes.push(text);
    }

    pub(super) fn event(&mut self, kind: EventKind, label: &str, progress: Option<Progress>) {
        self.last_event = now();
        self.record.events.push(Event { t: self.last_event, kind, label: label.into(), progress, cut: None });
    }

    /// A cut's start or end, with what it took from which host (the verdict's `cuts` reads it).
    pub(super) fn cut_event(&mut self, kind: EventKind, label: &str, cut: CutInfo) {
        self.last_event = now();
        self.record.events.push(Event {
            t: self.last_event,
            kind,
            label: label.into(),
            progress: None,
            cut: Some(cut),
        });
    }

    /// The host writer `slot` runs on in a partition scenario (`w1`, `w2`, `w3`).
    pub(super) fn writer_host(slot: usize) -> String {
        format!("w{}", slot + 1)
    }

    /// Where writer `slot` serves /metrics: on its host's address in a partition scenario.
    pub(super) fn writer_base(&self, slot: usize) -> String {
        let ip = self.host_ip(&Stage::writer_host(slot)).unwrap_or_else(|| "127.0.0.1".into());
        format!("http://{ip}:{}", self.set.writer_ports[slot])
    }

    fn host_ip(&self, name: &str) -> Option<String> {
        Some(self.hosts.as_ref()?.host(name)?.ip.to_string())
    }

    /// The base URL of ingest `name` (`ingest`: the one on 127.0.0.1).
    pub(super) fn ingest_base(&self, name: &str) -> String {
        match self.host_ip(name) {
            Some(ip) => format!("http://{ip}:{}", self.set.ingest_port),
            None => self.ingest_url.clone(),
        }
    }

    /// The latest monitor samples that carry offsets.
    pub(super) fn samples(&self) -> Vec<super::monitor::Sample> {
        self.monitor.as_ref().map(Monitor::samples).unwrap_or_default()
    }

    /// The program and arguments that start `bin` as process `name`: on its host when the
    /// scenario has one of that name, with the host's environment added to `env`.
    fn launcher(&self, name: &str, bin: &std::path::Path, env: &mut Vec<(String, String)>) -> (PathBuf, Vec<String>) {
        match self.hosts.as_ref().and_then(|h| Some((h.exec(name)?, h.env()))) {
            Some(((prog, mut args), host_env)) => {
                env.extend(host_env.iter().cloned());
                args.push(bin.display().to_string());
                (PathBuf::from(prog), args)
            }
            None => (bin.to_path_buf(), Vec::new()),
        }
    }

    /// Until every partition that lagged at the last event has moved again (so the next fault
    /// does not land on an unfinished recovery), at most `secs`.
    pub(super) async fn wait_recovered(&mut self, secs: u64) {
        for _ in 0..secs {
            let samples = self.monitor.as_ref().map(Monitor::samples).unwrap_or_default();
            if verdict::recovery(&samples, self.last_event, Progress::Consume).is_some() {
                return;
            }
            nap(1).await;
        }
        info!("{}: no full recovery within {secs} s of the last fault; going on", self.name());
    }

    /// Starts writer `name` on metrics port slot `slot`. As a supervisor would, a writer that
    /// exits before answering /healthz (it never joined the group, so there is no session to
    /// wait out) is started again after 2 s, at most 3 times; each such exit is a note.
    pub(super) async fn start_writer(&mut self, name: &str, slot: usize) -> Step {
        let port = self.set.writer_ports[slot];
        let mut env = self.child_env.clone();
        let ip = self.host_ip(name).unwrap_or_else(|| "127.0.0.1".into());
        let (log, base) = (self.dir.join(format!("{name}.log")), format!("http://{ip}:{port}"));
        let (bin, args) = self.launcher(name, &self.set.bins.join("writer"), &mut env);
        env.push(("WRITER_METRICS_ADDR".into(), format!("{ip}:{port}")));
        env.extend(self.writer_env.iter().cloned());
        for attempt in 1..=3 {
            let launch = Launch {
                name,
                bin: &bin,
                args: &args,
                env: &env,
                log: &log,
                base: &base,
                ready: "/healthz",
                timeout: Duration::from_secs(120),
            };
            match procs::start(&self.set.http, launch).await {
                Ok(s) => {
                    self.writers.insert(name.into(), s);
                    return Ok(());
                }
                Err(ProcError::Exited(_, status, _)) => {
                    let err = std::fs::read_to_string(&log).unwrap_or_default();
                    let first: String =
                        err.lines().find(|l| l.contains("Error")).unwrap_or("").chars().take(200).collect();
                    self.note(format!(
                        "{name} exited ({status}) before answering /healthz (start {attempt} of 3): {first}"
                    ));
                    nap(2).await;
                }
                Err(e) => return Err(self.abort(format!("writer {name}: {e}"))),
            }
        }
        Err(self.abort(format!("writer {name} did not answer /healthz on :{port}")))
    }

    pub(super) async fn start_ingest(&mut self) -> Step {
        self.start_ingest_named("ingest", None).await
    }

    /// Starts ingest `name` (on its host in a partition scenario) with version number `id`.
    pub(super) async fn start_ingest_named(&mut self, name: &str, id: Option<u16>) -> Step {
        let mut env = self.child_env.clone();
        let (bin, args) = self.launcher(name, &self.set.bins.join("ingest"), &mut env);
        let ip = self.host_ip(name).unwrap_or_else(|| "127.0.0.1".into());
        env.push(("INGEST_LISTEN".into(), format!("{ip}:{}", self.set.ingest_port)));
        if let Some(id) = id {
            env.push(("INGEST_ID".into(), id.to_string()));
        }
        env.extend(crate::paths::lab_key_env(&self.set.root));
        let log = self.dir.join(format!("{name}.log"));
        let base = self.ingest_base(name);
        let launch = Launch {
            name,
            bin: &bin,
            args: &args,
            env: &env,
            log: &log,
            base: &base,
            ready: "/readyz",
            timeout: Duration::from_secs(60),
        };
        match procs::start(&self.set.http, launch).await {
            Ok(s) => {
                self.ingests.insert(name.into(), s);
                Ok(())
            }
            Err(e) => Err(self.abort(format!("ingest not ready at {base}: {e}"))),
        }
    }

    /// SIGKILL a writer (the fault): it must have been alive until then.
    pub(super) async fn kill_writer(&mut self, name: &str) {
        let s = self.writers.remove(name);
        self.kill(name, s).await;
    }

    /// SIGKILL the ingest (the fault): it must have been alive until then.
    pub(super) async fn kill_ingest(&mut self) {
        let s = self.ingests.remove("ingest");
        self.kill("ingest", s).await;
    }

    async fn kill(&mut self, name: &str, service: Option<Service>) {
        let Some(s) = service else { return };
        if let Err(st) = s.kill().await {
            self.check(
                false,
                &format!("{name} alive until it is killed"),
                &format!("it had exited ({st}) on its own: see {name}.log"),
            );
        }
    }

    /// Checks that `name` is still running at the end of the scenario.
    fn check_alive(&mut self, name: &str, exited: Option<std::process::ExitStatus>) {
        let detail = exited.map(|st| format!("it exited ({st}) on its own: see {name}.log")).unwrap_or_default();
        self.check(exited.is_none(), &format!("{name} alive at the end"), &detail);
    }

    /// SIGTERM a writer and wait (a leave): true when it exited 0.
    pub(super) async fn stop_writer(&mut self, name: &str) -> (bool, String) {
        match self.writers.remove(name) {
            Some(s) => {
                let how = s.stop(Duration::from_secs(45)).await;
                (how.clean(), how.to_string())
            }
            None => (false, "not running".into()),
        }
    }

    /// The boot id of the first writer and of the ingest.
    pub(super) async fn boot_ids(&self) -> (Option<String>, Option<String>) {
        let w = match self.writers.values().next() {
            Some(s) => procs::boot_id(&self.set.http, &s.base).await.ok(),
            None => None,
        };
        (w, procs::boot_id(&self.set.http, &self.ingest_url).await.ok())
    }

    /// `/metrics` of every running writer and the ingest, as `metrics-LABEL-NAME.txt`.
    pub(super) async fn snapshot(&self, label: &str) {
        let targets: Vec<(String, String)> =
            self.writers.iter().chain(self.ingests.iter()).map(|(n, s)| (n.clone(), s.base.clone())).collect();
        for (name, base) in targets {
            if let Ok(r) = self.set.http.get(format!("{base}/metrics")).send().await {
                if let Ok(body) = r.text().await {
                    let _ = std::fs::write(self.dir.join(format!("metrics-{label}-{name}.txt")), body);
                }
            }
        }
    }

    /// A k6 run in the background: summary `k6-TAG.json`, id log `k6-TAG.ids`.
    pub(super) fn k6_start(&mut self, tag: &str, script: &str, secs: u64, vars: &[(&str, String)]) -> Step {
        let url = self.ingest_url.clone();
        self.k6_start_at(tag, &url, script, secs, vars)
    }

    /// The same against the ingest at `url`.
    pub(super) fn k6_start_at(
        &mut self,
        tag: &str,
        url: &str,
        script: &str,
        secs: u64,
        vars: &[(&str, String)],
    ) -> Step {
        let summary = self.dir.join(format!("k6-{tag}.json"));
        let ids = self.dir.join(format!("k6-{tag}.ids"));
        let mut env = crate::k6::base_env(&self.set.root, url, &summary, &ids, &format!("{}{tag}", self.set.run_id));
        env.push(("DURATION".into(), format!("{secs}s")));
        env.extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
        let log = self.dir.join(format!("k6-{tag}.log"));
        match crate::k6::spawn(&self.set.k6, &self.set.root, script, &env, &log) {
            Ok(child) => {
                self.k6.insert(tag.into(), child);
                Ok(())
            }
            Err(e) => Err(self.abort(format!("k6 {tag}: {e}"))),
        }
    }

    /// The open loop at `rate` requests/s for `secs`.
    pub(super) fn open_loop(&mut self, tag: &str, secs: u64, rate: u32) -> Step {
        let url = self.ingest_url.clone();
        self.open_loop_at(tag, &url, secs, rate, 200)
    }

    /// The open loop against the ingest at `url`, with at most `max_vus` requests in flight.
    pub(super) fn open_loop_at(&mut self, tag: &str, url: &str, secs: u64, rate: u32, max_vus: u32) -> Step {
        let vars = [("RATE", rate.to_string()), ("PRE_VUS", "20".into()), ("MAX_VUS", max_vus.to_string())];
        self.k6_start_at(tag, url, "k6/open-loop.js", secs, &vars)
    }

    /// Waits for k6 run `tag`; it must have written its summary, which is returned.
    pub(super) async fn k6_wait(&mut self, tag: &str) -> Result<serde_json::Value, Abort> {
        let code = match self.k6.remove(tag) {
            Some(mut c) => c.wait().await.ok().and_then(|s| s.code()),
            None => None,
        };
        let summary = self.dir.join(format!("k6-{tag}.json"));
        let Some(s) =
            std::fs::read_to_string(&summary).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            return Err(self.abort(format!("k6 {tag} (exit {code:?}) wrote no summary (see k6-{tag}.log)")));
        };
        info!(
            "{}: k6 {tag}: accepted {}, uncertain {}, refused {}, non-202 {}",
            self.name(),
            s["accepted"],
            s["uncertain"],
            s["refused"],
            s["measured"]["non_202"]
        );
        Ok(s)
    }

    /// `reconcile --json ARGS` with the scenario's environment, into `OUT.json` and `OUT.log`.
    pub(super) async fn reconcile(&self, args: &[&str], out: &str) -> Option<i32> {
        let (json, log) = (self.dir.join(format!("{out}.json")), self.dir.join(format!("{out}.log")));
        procs::reconcile(&self.set.bins, &self.child_env, args, &json, &log).await.unwrap_or(None)
    }

    /// The same, with its JSON answer (`None` when it printed none).
    pub(super) async fn reconcile_json(&self, args: &[&str], out: &str) -> (Option<i32>, Option<Answer>) {
        let code = self.reconcile(args, out).await;
        (code, files::last_json(&self.dir.join(format!("{out}.json"))))
    }

    /// `reconcile count` against the k6 run `load`, waiting for the drain, into `OUT.json`.
    pub(super) async fn count_load(&self, out: &str) -> (Option<i32>, Option<Answer>) {
        let summary = self.dir.join("k6-load.json").display().to_string();
        self.reconcile_json(&["--drain-timeout", DRAIN_S, "count", "--expect-from", &summary], out).await
    }

    /// Ends the scenario: the load, the reconcile, the processes' checks, the row.
    pub(super) async fn finish(mut self) -> Row {
        let tags: Vec<String> = self.k6.keys().cloned().collect();
        for tag in tags {
            if self.aborted {
                // SIGINT first: k6 then writes its summary and id log, evidence of the abort.
                if let Some(mut c) = self.k6.remove(&tag) {
                    if let Some(pid) = c.id() {
                        procs::signal(pid, nix::sys::signal::Signal::SIGINT);
                    }
                    if tokio::time::timeout(Duration::from_secs(20), c.wait()).await.is_err() {
                        let _ = c.kill().await;
                    }
                }
            } else {
                let _ = self.k6_wait(&tag).await;
            }
        }
        if let (Some(store), false) = (self.repair, self.aborted) {
            self.repair_store(store).await;
        }
        // Reconcile also after an abort when a writer is still up to drain: its data is evidence.
        if !self.aborted || !self.writers.is_empty() {
            let code = self.final_reconcile().await;
            self.record.reconciled = Some(code);
        }
        self.snapshot("end").await;
        let names: Vec<String> = self.writers.keys().cloned().collect();
        for n in &names {
            let exited = self.writers.get_mut(n).and_then(Service::exited);
            self.check_alive(n, exited);
        }
        let ingests: Vec<String> = self.ingests.keys().cloned().collect();
        for n in &ingests {
            let exited = self.ingests.get_mut(n).and_then(Service::exited);
            self.check_alive(n, exited);
        }
        if let Some(m) = self.monitor.take() {
            m.stop().await;
        }
        for n in &names {
            let (clean, how) = self.stop_writer(n).await;
            self.check(clean, &format!("{n} exits 0 on SIGTERM"), if clean { "" } else { &how });
        }
        for (_, s) in std::mem::take(&mut self.ingests) {
            s.stop(Duration::from_secs(30)).await;
        }
        if let Some(h) = &self.hosts {
            // Evidence that each host's traffic went through the relays, i.e. over its link.
            let _ = std::fs::write(self.dir.join("hosts.txt"), h.connections().join("\n") + "\n");
        }
        let _ = crate::round::write_json(&self.dir.join("scenario.json"), &self.record);
        let row = verdict::row(&self.dir, &self.record);
        let _ = crate::round::write_json(&self.dir.join("row.json"), &row);
        let failures: String = row.failures.join("; ").chars().take(600).collect();
        info!("{}: {} {failures}", self.name(), row.verdict);
        row
    }
}
