//! The partition scenarios' hosts: a [`Net`] of network namespaces (one process each: a writer
//! or an ingest), the relays that let them reach the five servers, and the environment that
//! points their processes there.
//!
//! The servers stay where they are, in the root namespace on 127.0.0.1, which no other
//! namespace can reach. So this process puts a TCP relay per server on the bridge's address,
//! forwarding to the server: the broker's on the port it advertises (tansu advertises
//! `localhost:9092`; a Kafka client bootstraps from any address but then connects to the
//! advertised one, which inside a host resolves to the bridge, see [`super::net`]), each store's
//! on a port of its own. A host's processes get the bootstrap broker at the bridge, the store
//! URLs rewritten to the relays (`StoreArgs::redirect`, URLs from files rewritten into a private
//! folder) and `--allow-plaintext` (the servers are on another machine, as far as they can
//! tell: what the flag is for). Everything they send to a server crosses their veth, where a cut
//! is made; the relays themselves are never cut (they are the servers' side of the link), so a
//! cut host's half-open connections stay open on the relay until the heal or a TCP timeout, as
//! they would on a server.
//!
//! Reconcile, the monitor and k6 stay in the root namespace and reach the servers directly and
//! the ingests over the bridge.

use super::net::{Cut, Host, Link, Net, Subnet};
use pipeline_common::config::KafkaArgs;
use pipeline_stores::{StoreArgs, StoreKind};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// The namespaces' tag: `br-chaos`, `chaos-w1`, `vchaos-w1`, `/etc/netns/chaos-w1`.
const TAG: &str = "chaos";

/// The hosts of a partition scenario: three writers and two ingests.
pub(super) const WRITERS: [&str; 3] = ["w1", "w2", "w3"];
pub(super) const INGESTS: [&str; 2] = ["ingest-a", "ingest-b"];

/// What a cut takes from a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lose {
    /// Every packet: the host is gone from the network.
    All,
    /// The broker only.
    Kafka,
    /// One store only.
    Store(StoreKind),
    /// One store, held back for a while during a cut from the broker (zombie-writer): the same
    /// link as `Store`, named apart so the verdict does not judge it as a store cut.
    Hold(StoreKind),
}

impl Lose {
    /// `all`, `kafka` or the store's name (the events' and the notes' word).
    pub(super) fn word(&self) -> String {
        match self {
            Lose::All => "all".into(),
            Lose::Kafka => "kafka".into(),
            Lose::Store(k) => k.name().into(),
            Lose::Hold(k) => format!("{HOLD}{k}"),
        }
    }
}

/// The start of a held store's word (`hold-mysql`).
pub(super) const HOLD: &str = "hold-";

/// Connections each relay took, by the host they came from.
type Tally = Arc<Mutex<BTreeMap<(String, IpAddr), u64>>>;

/// The hosts, their relays and their processes' environment; dropping it stops the relays and
/// removes the namespaces.
pub(super) struct Hosts {
    /// Declared before `net`: the relays stop before the namespaces go.
    _relays: JoinSet<()>,
    net: Net,
    kafka_port: u16,
    store_ports: BTreeMap<StoreKind, u16>,
    env: Vec<(String, String)>,
    tally: Tally,
    /// Store URLs read from files, rewritten for the hosts (mode 600), removed with the hosts.
    _secrets: tempfile::TempDir,
}

impl Hosts {
    /// The namespaces, the bridge and a relay per server. Must run as root, in a tokio runtime.
    pub(super) async fn build(stores: &StoreArgs, kafka: &KafkaArgs, subnet: Subnet) -> Result<Hosts, String> {
        let (khost, kport) = first_broker(&kafka.brokers)?;
        if !pipeline_common::secret::is_loopback(&khost) {
            return Err(format!(
                "the partition scenarios relay the broker from this machine's loopback; KAFKA_BROKERS names {khost}"
            ));
        }
        let names: Vec<&str> = WRITERS.iter().chain(INGESTS.iter()).copied().collect();
        let net = Net::build(TAG, subnet, &names)?;
        let bridge = net.bridge_ip;
        let tally: Tally = Arc::default();
        let mut relays = JoinSet::new();
        let listener = bind(bridge, kport).await?;
        relays.spawn(relay("kafka", listener, format!("{khost}:{kport}"), tally.clone()));
        let secrets = tempfile::Builder::new()
            .prefix("chaos-hosts.")
            .tempdir()
            .map_err(|e| format!("cannot make a private folder: {e}"))?;
        let mut redirected = stores.clone();
        let mut store_ports = BTreeMap::new();
        for kind in StoreKind::ALL {
            let listener = bind(bridge, 0).await?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            let upstream = redirected
                .redirect(kind, &format!("{bridge}:{port}"), secrets.path())
                .map_err(|e| format!("cannot point {kind} at its relay: {e}"))?;
            relays.spawn(relay(kind.name(), listener, upstream, tally.clone()));
            store_ports.insert(kind, port);
        }
        let mut env = redirected.env();
        env.extend([
            ("KAFKA_BROKERS".to_string(), format!("{bridge}:{kport}")),
            ("PIPELINE_ALLOW_PLAINTEXT".to_string(), "true".to_string()),
        ]);
        Ok(Hosts { _relays: relays, net, kafka_port: kport, store_ports, env, tally, _secrets: secrets })
    }

    pub(super) fn host(&self, name: &str) -> Option<&Host> {
        self.net.host(name)
    }

    /// What a killed run had left and the build removed.
    pub(super) fn stale(&self) -> &[String] {
        &self.net.stale
    }

    /// The environment a host's process gets on top of the scenario's: stores through the
    /// relays, the bootstrap broker at the bridge, plaintext to "another machine" allowed.
    pub(super) fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// `ip netns exec NS`: what runs a program on host `name` (`ip` execs it in place, so the
    /// pid is the program's and signals reach it).
    pub(super) fn exec(&self, name: &str) -> Option<(String, Vec<String>)> {
        let h = self.host(name)?;
        Some(("ip".into(), vec!["netns".into(), "exec".into(), h.ns.clone()]))
    }

    /// Cuts host `name` off as `lose` says, until the guard is healed or dropped.
    pub(super) fn cut(&self, name: &str, lose: Lose) -> Result<Cut, String> {
        let host = self.host(name).ok_or_else(|| format!("no host {name}"))?;
        let link = match lose {
            Lose::All => Link::All,
            Lose::Kafka => Link::Ports(vec![self.kafka_port]),
            Lose::Store(k) | Lose::Hold(k) => Link::Ports(vec![self.store_ports.get(&k).copied().ok_or("no relay")?]),
        };
        self.net.cut(host, &link)
    }

    /// One line per host: the connections it opened to each server (evidence that its traffic
    /// went through the relays, i.e. over its link).
    pub(super) fn connections(&self) -> Vec<String> {
        let tally = self.tally.lock().map(|t| t.clone()).unwrap_or_default();
        self.net
            .hosts
            .iter()
            .map(|h| {
                let each: Vec<String> = tally
                    .iter()
                    .filter(|((_, ip), _)| *ip == IpAddr::V4(h.ip))
                    .map(|((server, _), n)| format!("{server} {n}"))
                    .collect();
                format!("{} ({}, {}): connections {}", h.name, h.ns, h.ip, each.join(", "))
            })
            .collect()
    }
}

/// `host:port` of the first of `KAFKA_BROKERS`.
fn first_broker(brokers: &str) -> Result<(String, u16), String> {
    let first = brokers.split(',').next().unwrap_or("").trim();
    let (host, port) = first.rsplit_once(':').ok_or_else(|| format!("KAFKA_BROKERS {first} has no port"))?;
    let port = port.parse().map_err(|_| format!("KAFKA_BROKERS {first}: {port} is not a port"))?;
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

async fn bind(ip: Ipv4Addr, port: u16) -> Result<TcpListener, String> {
    TcpListener::bind((ip, port)).await.map_err(|e| format!("cannot listen on {ip}:{port} for a relay: {e}"))
}

/// Forwards every connection `listener` accepts to `upstream`, both ways, until aborted (which
/// drops every connection through it).
async fn relay(server: &'static str, listener: TcpListener, upstream: String, tally: Tally) {
    let mut conns = JoinSet::new();
    loop {
        // An accept error (descriptors, an aborted handshake) must not end the relay.
        let (client, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("relay {server}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Ok(mut t) = tally.lock() {
            *t.entry((server.to_string(), peer.ip())).or_default() += 1;
        }
        let up = upstream.clone();
        conns.spawn(async move {
            // The server is on this machine: a connect that takes seconds is a server that is
            // down or frozen, and the client's own timeout then decides, as it would without us.
            let Ok(Ok(mut server)) = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(&up)).await
            else {
                return;
            };
            let mut client = client;
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        });
        while conns.try_join_next().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_broker_is_read_with_its_port() {
        assert_eq!(first_broker("localhost:9092,other:9093"), Ok(("localhost".to_string(), 9092)));
        assert_eq!(first_broker("[::1]:9092"), Ok(("::1".to_string(), 9092)));
        assert!(first_broker("localhost").is_err());
    }
}
