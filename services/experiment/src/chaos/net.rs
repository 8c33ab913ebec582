//! Hosts as network namespaces, the bridge that joins them to the root namespace, and cuts of
//! their links: the machinery under the partition scenarios ([`super::hosts`] puts the servers'
//! relays and the processes on it).
//!
//! The layout: a bridge `br-TAG` holds the root namespace's address on a private /24 (`.1`);
//! every host is a namespace `TAG-HOST` with a veth pair, `vTAG-HOST` on the bridge and `eth0`
//! inside at `.11`, `.12`, ... Inside, `/etc/netns/TAG-HOST/hosts` maps `localhost` to the
//! bridge's address: `ip netns exec` bind-mounts it over `/etc/hosts` for what it starts, so a
//! name the servers advertise as `localhost` (tansu's `localhost:9092`) leads, inside a host,
//! over the veth to the root namespace, where [`super::hosts`] relays it to the server.
//!
//! A cut: the kernel here has no netem (`CONFIG_NET_SCH_NETEM` is off, so `tc ... netem loss
//! 100%` is refused), but it has `clsact` and the BPF classifier. A cut is a classic BPF program
//! in direct-action mode on the host's veth, on its ingress (packets from the host) and its
//! egress (packets to it), returning TC_ACT_SHOT for every packet (the whole host: a link with
//! 100 % loss, ARP included) or for TCP to or from given server ports (the host cut from those
//! servers only), and TC_ACT_UNSPEC for the rest, which hands the packet to the next cut's
//! filter, so that cuts of one host add up and each heals alone. Nothing is refused or reset:
//! packets vanish as in a partition, and TCP retransmits until the heal or a timeout of its own.
//! [`Cut`] is a guard: dropping it heals.
//!
//! Clean-up: dropping [`Net`] kills what still runs in its namespaces and deletes them, the
//! veths, the bridge and the `/etc/netns` entries. A run killed with SIGKILL leaves them: the
//! next [`Net::build`] of the same tag first removes every namespace, link and entry of that
//! tag, with any process still inside (a killed run's writer, otherwise left running cut off).

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Where `ip netns exec` finds a namespace's own `/etc` files.
const NETNS_ETC: &str = "/etc/netns";
/// Longest interface name Linux takes (IFNAMSIZ less the NUL).
const IFNAMSIZ: usize = 15;

/// A private /24 (`A.B.C.0/24`): the bridge takes `.1`, the hosts `.11` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Subnet([u8; 3]);

impl std::str::FromStr for Subnet {
    type Err = String;
    fn from_str(s: &str) -> Result<Subnet, String> {
        let bad = || format!("`{s}` is not a /24 written A.B.C.0/24 (e.g. 10.77.0.0/24)");
        let (addr, len) = s.trim().split_once('/').ok_or_else(bad)?;
        let ip: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let o = ip.octets();
        if len != "24" || o[3] != 0 {
            return Err(bad());
        }
        if !ip.is_private() {
            return Err(format!(
                "{s} is not a private range (10/8, 172.16/12, 192.168/16): the hosts must not shadow a real network"
            ));
        }
        Ok(Subnet([o[0], o[1], o[2]]))
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c] = self.0;
        write!(f, "{a}.{b}.{c}.0/24")
    }
}

impl Subnet {
    fn at(&self, last: u8) -> Ipv4Addr {
        let [a, b, c] = self.0;
        Ipv4Addr::new(a, b, c, last)
    }
}

/// One host: a namespace with one veth into the bridge.
#[derive(Debug, Clone)]
pub(super) struct Host {
    pub name: String,
    pub ns: String,
    /// The root namespace's end of the veth pair, where cuts are made.
    pub veth: String,
    pub ip: Ipv4Addr,
}

/// The bridge and the hosts of one tag; dropping it removes them.
pub(super) struct Net {
    tag: String,
    pub bridge_ip: Ipv4Addr,
    pub hosts: Vec<Host>,
    /// What the build found left over by a killed run and removed, for the scenario's notes.
    pub stale: Vec<String>,
    /// The next cut's filter priority (each cut its own, so it can be removed alone).
    next_pref: AtomicU32,
}

/// `ip`, `tc`: by PATH, else where Debian puts them (a root shell's PATH may lack /usr/sbin).
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Runs `prog args`; its stdout, or what it said on stderr.
fn run(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(tool(prog))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {prog} (iproute2): {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{prog} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &[&str]) -> Result<String, String> {
    run("ip", args)
}

impl Net {
    fn bridge(tag: &str) -> String {
        format!("br-{tag}")
    }

    /// Makes the bridge and one namespace per name in `hosts`, after removing whatever a killed
    /// run of the same tag left. Must run as root.
    pub(super) fn build(tag: &str, subnet: Subnet, hosts: &[&str]) -> Result<Net, String> {
        for h in hosts {
            let veth = format!("v{tag}-{h}");
            if veth.len() > IFNAMSIZ {
                return Err(format!("interface name {veth} is longer than {IFNAMSIZ} characters"));
            }
        }
        let stale = remove_stale(tag);
        let bridge_ip = subnet.at(1);
        let mut net = Net { tag: tag.into(), bridge_ip, hosts: Vec::new(), stale, next_pref: AtomicU32::new(10) };
        net.subnet_is_free(subnet)?;
        let br = Net::bridge(tag);
        ip(&["link", "add", &br, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{bridge_ip}/24"), "dev", &br])?;
        ip(&["link", "set", &br, "up"])?;
        for (i, h) in hosts.iter().enumerate() {
            let host = Host {
                name: h.to_string(),
                ns: format!("{tag}-{h}"),
                veth: format!("v{tag}-{h}"),
                ip: subnet.at(11 + u8::try_from(i).map_err(|_| "too many hosts".to_string())?),
            };
            // Pushed first: a step failing below still has it removed by the drop.
            net.hosts.push(host.clone());
            let (ns, veth) = (host.ns.as_str(), host.veth.as_str());
            ip(&["netns", "add", ns])?;
            ip(&["link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])?;
            ip(&["link", "set", veth, "master", &br])?;
            ip(&["link", "set", veth, "up"])?;
            ip(&["-n", ns, "addr", "add", &format!("{}/24", host.ip), "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            let etc = Path::new(NETNS_ETC).join(ns);
            std::fs::create_dir_all(&etc).map_err(|e| format!("cannot create {}: {e}", etc.display()))?;
            let text = format!(
                "# experiment chaos (services/experiment/src/chaos/net.rs): inside this host the servers, tansu's\n\
                 # advertised localhost:9092 included, are reached at the bridge's address.\n{bridge_ip} localhost\n"
            );
            std::fs::write(etc.join("hosts"), text)
                .map_err(|e| format!("cannot write {}/hosts: {e}", etc.display()))?;
        }
        Ok(net)
    }

    /// Refuses a subnet an interface or a route of this machine already covers (other than the
    /// default route): the hosts would shadow it, or not be reached.
    fn subnet_is_free(&self, subnet: Subnet) -> Result<(), String> {
        let probe = subnet.at(1).to_string();
        let taken: Vec<String> = ip(&["-4", "route", "show", "match", &probe])?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("default"))
            .map(str::to_string)
            .collect();
        if taken.is_empty() {
            Ok(())
        } else {
            Err(format!("{subnet} is already routed here ({}): choose another with --hosts-subnet", taken.join("; ")))
        }
    }

    pub(super) fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// Cuts `host`'s link as `link` says, until the [`Cut`] is healed or dropped; on top of
    /// any cut of it already in place.
    pub(super) fn cut(&self, host: &Host, link: &Link) -> Result<Cut, String> {
        let dev = host.veth.clone();
        let (from_host, to_host) = match link {
            Link::All => (drop_all(), drop_all()),
            Link::Ports(p) => (drop_ports(p, Side::Dst), drop_ports(p, Side::Src)),
        };
        // The hook holding the filters; the host's first cut adds it, and it stays (empty, it
        // passes everything) until the veth goes.
        if let Err(e) = run("tc", &["qdisc", "add", "dev", &dev, "clsact"]) {
            if !run("tc", &["qdisc", "show", "dev", &dev]).unwrap_or_default().contains("clsact") {
                return Err(e);
            }
        }
        let pref = self.next_pref.fetch_add(1, Ordering::Relaxed).to_string();
        // From here the guard removes this cut's filters on every path.
        let cut = Cut { dev, pref, healed: false };
        for (hook, prog) in [("ingress", &from_host), ("egress", &to_host)] {
            let code = bytecode(prog);
            run("tc", &["filter", "add", "dev", &cut.dev, hook, "pref", &cut.pref, "bpf", "da", "bytecode", &code])?;
        }
        Ok(cut)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for h in &self.hosts {
            remove_namespace(&h.ns);
            // Gone with its namespace, unless a process still held that namespace open.
            let _ = ip(&["link", "del", &h.veth]);
        }
        let _ = ip(&["link", "del", &Net::bridge(&self.tag)]);
    }
}

/// Kills what runs in namespace `ns` (a process there was started by this tool: a writer or an
/// ingest of a run), deletes the namespace and its `/etc/netns` entry; says what it found.
fn remove_namespace(ns: &str) -> Option<String> {
    let listed = ip(&["netns", "list"]).unwrap_or_default();
    let exists = listed.lines().any(|l| l.split_whitespace().next() == Some(ns));
    let mut killed = 0;
    if exists {
        let pids: Vec<i32> = ip(&["netns", "pids", ns])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .filter(|p| *p > 1)
            .collect();
        for p in &pids {
            if kill(Pid::from_raw(*p), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
        // The namespace (and its veth) lives until its last process has exited.
        let deadline = Instant::now() + Duration::from_secs(5);
        while pids.iter().any(|p| Path::new(&format!("/proc/{p}")).exists()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = ip(&["netns", "del", ns]);
    }
    let etc = Path::new(NETNS_ETC).join(ns);
    let had_etc = etc.exists();
    let _ = std::fs::remove_dir_all(&etc);
    (exists || had_etc).then(|| format!("namespace {ns} ({killed} processes in it killed)"))
}

/// Removes every namespace, veth, bridge and `/etc/netns` entry of `tag` (a killed run's).
fn remove_stale(tag: &str) -> Vec<String> {
    let prefix = format!("{tag}-");
    let mut found = Vec::new();
    let mut names: Vec<String> = ip(&["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n.starts_with(&prefix))
        .collect();
    if let Ok(dir) = std::fs::read_dir(NETNS_ETC) {
        names.extend(dir.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with(&prefix)));
    }
    names.sort();
    names.dedup();
    found.extend(names.iter().filter_map(|n| remove_namespace(n)));
    let veth = format!("v{tag}-");
    let links = ip(&["-o", "link", "show"]).unwrap_or_default();
    for l in links.lines() {
        // `7: vchaos-w1@if2: <...`: the name, without the peer's suffix.
        let name =
            l.split(':').nth(1).map(|n| n.trim().split('@').next().unwrap_or("").to_string()).unwrap_or_default();
        if (name.starts_with(&veth) || name == Net::bridge(tag)) && ip(&["link", "del", &name]).is_ok() {
            found.push(format!("link {name}"));
        }
    }
    found
}

/// What a cut takes from a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Link {
    /// Every packet, both ways.
    All,
    /// TCP to and from these ports of the root namespace's side (the servers' relays).
    Ports(Vec<u16>),
}

/// A cut link; healed by [`Cut::heal`] or when dropped.
#[must_use = "the cut heals when this guard is dropped"]
pub(super) struct Cut {
    dev: String,
    /// The priority of its two filters (ingress and egress).
    pref: String,
    healed: bool,
}

impl Cut {
    /// Removes this cut's filters: what it dropped flows again (unless another cut drops it).
    pub(super) fn heal(mut self) -> Result<(), String> {
        self.healed = true;
        self.remove()
    }

    /// Both filters, the second even when the first fails.
    fn remove(&self) -> Result<(), String> {
        let del = |hook: &str| run("tc", &["filter", "del", "dev", &self.dev, hook, "pref", &self.pref]).map(|_| ());
        let (a, b) = (del("ingress"), del("egress"));
        a.and(b)
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        if !self.healed {
            let _ = self.remove();
        }
    }
}

/// A classic BPF instruction `(code, jt, jf, k)`, as `tc ... bpf bytecode` takes them.
type Insn = (u16, u8, u8, u32);

/// Direct-action verdicts (linux/pkt_cls.h): UNSPEC (-1) goes on to the next filter, and past
/// the last one the packet passes; SHOT drops it.
const TC_ACT_UNSPEC: u32 = u32::MAX;
const TC_ACT_SHOT: u32 = 2;

// The opcodes used (linux/filter.h).
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_H_IND: u16 = 0x48;
const LDX_B_MSH: u16 = 0xb1;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

/// Which TCP port a filter reads: the source (packets from a server) or the destination.
#[derive(Debug, Clone, Copy)]
enum Side {
    Src,
    Dst,
}

fn drop_all() -> Vec<Insn> {
    vec![(RET_K, 0, 0, TC_ACT_SHOT)]
}

/// Drops IPv4 TCP whose `side` port is one of `ports` (unfragmented, or a first fragment);
/// everything else goes on to the next filter. The packet starts at its Ethernet header (cls_bpf pushes it back on
/// ingress too).
fn drop_ports(ports: &[u16], side: Side) -> Vec<Insn> {
    let n = u8::try_from(ports.len()).unwrap_or(u8::MAX).min(200);
    let off = match side {
        Side::Src => 14,
        Side::Dst => 16,
    };
    let mut p: Vec<Insn> = vec![
        (LD_H_ABS, 0, 0, 12),       // 0: ethertype
        (JEQ_K, 0, 6 + n, 0x0800),  // 1: IPv4, else pass
        (LD_B_ABS, 0, 0, 23),       // 2: IP protocol
        (JEQ_K, 0, 4 + n, 6),       // 3: TCP, else pass
        (LD_H_ABS, 0, 0, 20),       // 4: flags and fragment offset
        (JSET_K, 2 + n, 0, 0x1fff), // 5: a later fragment has no ports: pass
        (LDX_B_MSH, 0, 0, 14),      // 6: x = IP header length
        (LD_H_IND, 0, 0, off),      // 7: the port
    ];
    for (i, port) in ports.iter().take(usize::from(n)).enumerate() {
        let i = u8::try_from(i).unwrap_or(0);
        p.push((JEQ_K, n - i, 0, u32::from(*port))); // to the drop below
    }
    p.push((RET_K, 0, 0, TC_ACT_UNSPEC));
    p.push((RET_K, 0, 0, TC_ACT_SHOT));
    p
}

/// `N,code jt jf k,...`
fn bytecode(p: &[Insn]) -> String {
    let insns: Vec<String> = p.iter().map(|(c, t, f, k)| format!("{c} {t} {f} {k}")).collect();
    format!("{},{}", p.len(), insns.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's classic BPF for the opcodes above; a load past the packet returns 0, as
    /// the kernel's does.
    fn eval(p: &[Insn], pkt: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let h = |o: usize| -> Option<u32> { Some((u32::from(*pkt.get(o)?) << 8) | u32::from(*pkt.get(o + 1)?)) };
        loop {
            let (code, jt, jf, k) = p[pc];
            pc += 1;
            match code {
                LD_H_ABS => match h(k as usize) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_B_ABS => match pkt.get(k as usize) {
                    Some(v) => a = u32::from(*v),
                    None => return 0,
                },
                LD_H_IND => match h((x + k) as usize) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LDX_B_MSH => match pkt.get(k as usize) {
                    Some(v) => x = 4 * u32::from(v & 0xf),
                    None => return 0,
                },
                JEQ_K => pc += usize::from(if a == k { jt } else { jf }),
                JSET_K => pc += usize::from(if (a & k) != 0 { jt } else { jf }),
                RET_K => return k,
                other => panic!("opcode {other:#x}"),
            }
        }
    }

    /// Ethernet + IPv4 (with `options` words of options) + the first bytes of a TCP or UDP header.
    fn packet(proto: u8, src: u16, dst: u16, options: u8, frag: u16) -> Vec<u8> {
        let mut p = vec![0u8; 12];
        p.extend([0x08, 0x00]);
        let ihl = 5 + options;
        let mut iph = vec![0x40 | ihl, 0, 0, 0, 0, 0];
        iph.extend(frag.to_be_bytes());
        iph.extend([64, proto, 0, 0, 10, 77, 0, 11, 10, 77, 0, 1]);
        iph.extend(vec![1u8; usize::from(options) * 4]);
        p.extend(iph);
        p.extend(src.to_be_bytes());
        p.extend(dst.to_be_bytes());
        p.extend([0u8; 16]);
        p
    }

    #[test]
    fn a_port_cut_drops_tcp_of_those_ports_only() {
        let to = drop_ports(&[9092, 3306], Side::Dst);
        let from = drop_ports(&[9092, 3306], Side::Src);
        assert_eq!(eval(&to, &packet(6, 40000, 9092, 0, 0)), TC_ACT_SHOT);
        assert_eq!(eval(&to, &packet(6, 40000, 3306, 0, 0)), TC_ACT_SHOT);
        assert_eq!(eval(&to, &packet(6, 40000, 3306, 3, 0)), TC_ACT_SHOT, "IP options move the TCP header");
        assert_eq!(eval(&to, &packet(6, 40000, 9200, 0, 0)), TC_ACT_UNSPEC);
        assert_eq!(
            eval(&to, &packet(6, 9092, 40000, 0, 0)),
            TC_ACT_UNSPEC,
            "the other direction is the egress filter's"
        );
        assert_eq!(eval(&from, &packet(6, 9092, 40000, 0, 0)), TC_ACT_SHOT);
        assert_eq!(eval(&to, &packet(17, 40000, 9092, 0, 0)), TC_ACT_UNSPEC, "UDP");
        assert_eq!(eval(&to, &packet(6, 40000, 9092, 0, 0x0010)), TC_ACT_UNSPEC, "a later fragment");
        assert_eq!(eval(&to, &packet(6, 40000, 9092, 0, 0x4000)), TC_ACT_SHOT, "don't-fragment set");
        let mut arp = vec![0u8; 12];
        arp.extend([0x08, 0x06]);
        arp.extend([0u8; 28]);
        assert_eq!(eval(&to, &arp), TC_ACT_UNSPEC);
        assert_eq!(eval(&drop_all(), &arp), TC_ACT_SHOT);
        assert_eq!(bytecode(&drop_all()), "1,6 0 0 2");
        assert!(bytecode(&to).starts_with("12,40 0 0 12,21 0 8 2048,"), "{}", bytecode(&to));
    }

    #[test]
    fn subnets_are_private_slash_24s() {
        let s: Subnet = "10.77.0.0/24".parse().expect("subnet");
        assert_eq!((s.at(1), s.to_string()), (Ipv4Addr::new(10, 77, 0, 1), "10.77.0.0/24".to_string()));
        for bad in ["10.77.0.0/16", "10.77.0.1/24", "8.8.8.0/24", "10.77.0.0", "ten/24"] {
            assert!(bad.parse::<Subnet>().is_err(), "{bad}");
        }
    }

    /// `bash -c 'exec 3<>/dev/tcp/IP/PORT'` from inside `ns`, within 3 s: true when it connected.
    fn connects(ns: &str, to: std::net::SocketAddr) -> bool {
        let script = format!("exec 3<>/dev/tcp/{}/{}", to.ip(), to.port());
        Command::new(tool("ip"))
            .args(["netns", "exec", ns, "timeout", "3", "bash", "-c", &script])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// On the real kernel (root, iproute2): a host reaches the root namespace over the bridge,
    /// `localhost` inside it is the bridge, a port cut stops that port only, a whole cut stops
    /// everything, a heal (or the guard's drop) restores it, and dropping the net leaves no
    /// namespace, link or /etc/netns entry behind. A tag and subnet of its own, so that it never
    /// touches a chaos run's.
    #[test]
    fn cuts_drop_what_they_say_and_heal_and_the_net_leaves_nothing() {
        let net = Net::build("ctest", "10.78.0.0/24".parse().expect("subnet"), &["t1"]).expect("root and iproute2");
        let host = net.host("t1").expect("host").clone();
        let a = std::net::TcpListener::bind((net.bridge_ip, 0)).expect("bind a");
        let b = std::net::TcpListener::bind((net.bridge_ip, 0)).expect("bind b");
        let (a, b) = (a.local_addr().expect("a"), b.local_addr().expect("b"));
        let named = Command::new(tool("ip"))
            .args(["netns", "exec", &host.ns, "getent", "hosts", "localhost"])
            .output()
            .expect("getent");
        assert!(String::from_utf8_lossy(&named.stdout).starts_with(&net.bridge_ip.to_string()), "{named:?}");
        assert!(connects(&host.ns, a) && connects(&host.ns, b), "no cut: both ports answer");
        let cut = net.cut(&host, &Link::Ports(vec![a.port()])).expect("cut a");
        assert!(!connects(&host.ns, a), "port cut: a dropped");
        assert!(connects(&host.ns, b), "port cut: b still answers");
        let cut_b = net.cut(&host, &Link::Ports(vec![b.port()])).expect("cut b on top");
        assert!(!connects(&host.ns, a) && !connects(&host.ns, b), "two cuts add up");
        cut.heal().expect("heal");
        assert!(connects(&host.ns, a), "a's cut healed: a answers again");
        assert!(!connects(&host.ns, b), "b's cut still holds");
        cut_b.heal().expect("heal b");
        assert!(connects(&host.ns, b), "b's cut healed");
        let cut = net.cut(&host, &Link::All).expect("cut all");
        assert!(!connects(&host.ns, b), "whole cut: b dropped too");
        drop(cut);
        assert!(connects(&host.ns, b), "the dropped guard healed it");
        drop(net);
        let left = ip(&["netns", "list"]).expect("netns list");
        assert!(!left.contains("ctest-"), "{left}");
        assert!(!ip(&["-o", "link", "show"]).expect("links").contains("ctest"), "a link left behind");
        assert!(!Path::new(NETNS_ETC).join("ctest-t1").exists());
    }

    /// A namespace and its entry left by a killed run (with a process inside) are removed by the
    /// next build of the same tag, and the process is killed.
    #[test]
    fn a_killed_runs_namespace_is_removed_at_the_next_build() {
        let tag = "cstale";
        remove_stale(tag);
        ip(&["netns", "add", "cstale-x"]).expect("root and iproute2");
        std::fs::create_dir_all(Path::new(NETNS_ETC).join("cstale-x")).expect("etc");
        let mut sleeper =
            Command::new(tool("ip")).args(["netns", "exec", "cstale-x", "sleep", "60"]).spawn().expect("sleep");
        std::thread::sleep(Duration::from_millis(300));
        let net = Net::build(tag, "10.79.0.0/24".parse().expect("subnet"), &["y"]).expect("build");
        assert!(net.stale.iter().any(|s| s.contains("cstale-x") && s.contains("1 processes")), "{:?}", net.stale);
        assert!(sleeper.wait().is_ok_and(|s| !s.success()), "the process inside was killed");
        assert!(!ip(&["netns", "list"]).expect("list").contains("cstale-x"));
        drop(net);
        assert!(!ip(&["netns", "list"]).expect("list").contains("cstale-"));
    }
}
