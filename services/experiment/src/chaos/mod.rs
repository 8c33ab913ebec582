//! `experiment chaos`: the fault scenarios against the native stack, under k6 load with client
//! ids, each ending in an exact reconcile of all four stores at id level and content, one table
//! row per scenario. The same process supervisor, k6 driver and reconcile runner as the
//! experiment's rounds.
//!
//! Isolation: the run uses a namespace of its own in every store (each store's fixture; MySQL
//! database `<db>_chaos`, ES index and Mongo database `chaos`, Redis database 2), and every
//! scenario its own topic, group and dead-letter topic, after `reconcile reset` of those stores.
//! The services listen on their own ports, so a `scripts/run` or the tests next to it are not
//! touched -- except by the freezes, which stop the shared servers. One load run at a time per
//! machine (the load lock, shared with the experiment). Evidence per scenario in OUT/<scenario>/:
//! k6 summaries and id logs, expected id files, reconcile JSON, monitor samples, /metrics
//! snapshots, scenario.json (events, checks, notes), row.json, process logs; OUT/table.txt.
//!
//! The partition scenarios (`partitions.rs`) run their two ingests and three writers on hosts of
//! their own, network namespaces the run makes and removes (`net.rs`: the bridge, the veths, the
//! cuts; `hosts.rs`: the relays to the servers), and cut links between them and the servers
//! instead of killing processes; they also post a few ids again and again (`versions.rs`), so
//! that an old version landing over a newer one would show, and read their cuts' verdicts from
//! the monitor's samples (`cuts.rs`). They need root and iproute2.

mod cuts;
mod files;
mod freeze;
mod hosts;
mod ids;
mod monitor;
mod net;
mod partitions;
mod poison;
mod record;
mod scenarios;
mod setting;
mod sizes;
mod stage;
mod table;
mod verdict;
mod versions;

use crate::faults::Scenario;
use anyhow::Context;
use pipeline_common::config::KafkaArgs;
use pipeline_stores::StoreArgs;
use setting::Setting;
use sizes::Sizes;
use std::path::PathBuf;
use std::time::Duration;
use tracing::info;

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ChaosArgs {
    /// Scenarios, comma separated: names, `freeze` (every freeze-STORE), `wipe` (every
    /// wipe-STORE), `partition` (partition-writer, zombie-writer, partition-ingest,
    /// partition-store: root only) or `all`. `experiment chaos --list` prints them.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    pub scenarios: Vec<String>,
    /// Print the scenarios, one per line, and exit.
    #[arg(long)]
    pub list: bool,
    /// The CI version: one kill, one join/leave, 5 s freezes, one cut of each partition scenario,
    /// small loads (~12 min in all, ~5 of them the partition scenarios).
    #[arg(long)]
    pub short: bool,
    /// writer-kill: how many kills (default 10, short 1).
    #[arg(long)]
    pub kills: Option<u32>,
    /// Seconds before a SIGKILLed writer is restarted (tansu keeps a killed member's partitions
    /// until its 10 s session expires).
    #[arg(long, default_value_t = 12)]
    pub restart_delay: u64,
    /// The store namespace of the run (see the module's isolation note).
    #[arg(long, env = "CHAOS_NAMESPACE", default_value = "chaos")]
    pub namespace: String,
    /// Where each scenario's ingest listens (127.0.0.1; in the partition scenarios, its host's
    /// address).
    #[arg(long, env = "CHAOS_INGEST_PORT", default_value_t = 28180)]
    pub ingest_port: u16,
    /// Metrics ports of the scenario's writers (127.0.0.1; in the partition scenarios, their hosts'
    /// addresses), at least three, comma separated.
    #[arg(long, env = "CHAOS_WRITER_PORTS", value_delimiter = ',', default_value = "29464,29465,29466")]
    pub writer_ports: Vec<u16>,
    /// The private /24 of the partition scenarios' hosts (A.B.C.0/24): the bridge br-chaos takes
    /// .1, the hosts (namespaces chaos-w1 ... chaos-ingest-b) .11 to .15. Must not be routed here
    /// already.
    #[arg(long, env = "CHAOS_HOSTS_SUBNET", default_value = "10.77.0.0/24")]
    pub hosts_subnet: net::Subnet,
    /// Evidence folder (default k6/out/chaos-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: crate::args::Common,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub stores: StoreArgs,
}

/// Runs the selected scenarios; true when every verdict is exact and every check passed.
pub(crate) async fn run(args: &ChaosArgs) -> Result<bool, crate::run::RunError> {
    let mut selected = Scenario::select(&args.scenarios).map_err(|e| anyhow::anyhow!(e))?;
    // A store left out of --stores is no part of the pipeline: no freeze or wipe of it.
    selected.retain(|s| match s {
        Scenario::Freeze(k) | Scenario::Wipe(k) => args.stores.selection.contains(*k),
        _ => true,
    });
    if args.list {
        for s in Scenario::all() {
            println!("{}", s.name());
        }
        return Ok(true);
    }
    if args.writer_ports.len() < 3 {
        return Err(anyhow::anyhow!("--writer-ports needs three ports (the rebalance runs three writers)").into());
    }
    let stamp = crate::run::stamp();
    let root = crate::paths::root(args.common.root.as_deref()).map_err(anyhow::Error::from)?;
    let out = args.out.clone().unwrap_or_else(|| root.join("k6/out").join(format!("chaos-{stamp}")));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let out = out.canonicalize().with_context(|| format!("resolving {}", out.display()))?;
    std::fs::write(
        out.join("command.txt"),
        std::env::args().map(|a| pipeline_common::secret::redact_arg(&a)).collect::<Vec<_>>().join(" ") + "\n",
    )
    .context("writing command.txt")?;
    let _lock = crate::run::lock_for(&args.common)?;
    let bins = crate::run::prepare(&args.common, &root, &BINARIES)?;
    let private = private_copy(&bins)?;
    let k6 = crate::paths::k6(args.common.k6.as_deref()).map_err(anyhow::Error::from)?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().context("HTTP client")?;
    for port in std::iter::once(args.ingest_port).chain(args.writer_ports.iter().copied()) {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Err(anyhow::anyhow!("port {port} is in use: set --ingest-port / --writer-ports").into());
        }
    }
    let mut stores = args.stores.clone();
    pipeline_stores::isolate(&mut stores, &args.namespace, pipeline_stores::Slot::Chaos)
        .await
        .context("the chaos namespace in every store")?;
    let set = Setting {
        root,
        bins: private.path().to_path_buf(),
        k6,
        http,
        out: out.clone(),
        stores,
        kafka: args.kafka.clone(),
        run_id: format!("c{:x}", time::OffsetDateTime::now_utc().unix_timestamp() % 0xFFF_FFFF),
        stamp,
        ingest_port: args.ingest_port,
        writer_ports: args.writer_ports.clone(),
        sizes: Sizes::new(args.short, args.kills),
        restart_delay_s: args.restart_delay,
        hosts_subnet: args.hosts_subnet,
    };
    info!("namespace {}; {} scenarios; evidence in {}", args.namespace, selected.len(), out.display());
    info!("writer restart delay after SIGKILL: {} s", set.restart_delay_s);
    let t0 = std::time::Instant::now();
    let mut rows = Vec::new();
    for scenario in selected {
        let mut stage =
            stage::Stage::begin(&set, &scenario.name(), scenario.on_hosts()).await.map_err(|e| anyhow::anyhow!(e.0))?;
        if !stage.is_aborted() {
            let _ = scenarios::run(&mut stage, scenario).await;
        }
        rows.push(stage.finish().await);
    }
    let text = format!(
        "experiment chaos · {} · {} s · writer restart delay {} s · evidence {}\n{}",
        args.common.profile,
        t0.elapsed().as_secs(),
        set.restart_delay_s,
        out.display(),
        table::table(&rows)
    );
    print!("{text}");
    std::fs::write(out.join("table.txt"), &text).context("writing table.txt")?;
    Ok(verdict::all_passed(&rows))
}

/// The binaries a chaos run starts.
const BINARIES: [&str; 3] = ["ingest", "writer", "reconcile"];

/// Copies the binaries into a private folder, removed when the run ends.
fn private_copy(bins: &std::path::Path) -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("chaos-bin.").tempdir().context("creating a private folder")?;
    for b in BINARIES {
        std::fs::copy(bins.join(b), dir.path().join(b))
            .with_context(|| format!("copying {}", bins.join(b).display()))?;
    }
    Ok(dir)
}
