//! A TCP proxy between the writer and one store's server that holds every request back by the
//! store's condition (latency, jitter, latency growing with the requests already held, a rate
//! cap), so a slow store is an experiment condition without touching the store's code path.
//!
//! What it delays is each chunk the writer sends (one read from the socket: a request, or a
//! part of a large one); chunks of one connection keep their order, so a request in several
//! chunks is delayed once, not once per chunk. The rate cap, though, counts chunks: a large
//! request (an Elasticsearch bulk of several reads) takes several of its slots. Answers come back undelayed: the round trip
//! grows by the condition's delay. "In flight" is the number of chunks held back across all
//! connections to the store: with `+PER*inflight` each new chunk waits longer the more there
//! are, as requests do in front of a saturated server.

use super::spec::StoreDelay;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Chunks one connection may hold back before its reader waits (the writer's requests then
/// queue in the kernel's socket buffer, as they would in front of a slow server).
const HELD_PER_CONNECTION: usize = 1024;

/// What a proxy did, for the round's record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ProxyStats {
    pub condition: String,
    pub connections: u64,
    pub chunks: u64,
    pub bytes: u64,
    /// Sum of the delays added, in seconds (÷ chunks: the mean delay).
    pub delay_s: f64,
    pub peak_inflight: u64,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    chunks: AtomicU64,
    bytes: AtomicU64,
    delay_us: AtomicU64,
    inflight: AtomicU64,
    peak_inflight: AtomicU64,
}

/// The shared state of one store's condition: counters, the rate cap's next free slot, the
/// jitter's generator.
struct Shaper {
    spec: StoreDelay,
    n: Counters,
    next_slot: Mutex<Instant>,
    rng: Mutex<u64>,
}

impl Shaper {
    /// When a chunk that arrived `now` may go on, given that the previous one of its connection
    /// goes at `after`.
    fn release_at(&self, now: Instant, after: Instant) -> Instant {
        let held = self.n.inflight.load(Ordering::Relaxed);
        let mut delay = self.spec.base + self.spec.per_inflight.saturating_mul(u32::try_from(held).unwrap_or(u32::MAX));
        if !self.spec.jitter.is_zero() {
            let r = self.rng.lock().map(|mut s| {
                *s ^= *s << 13;
                *s ^= *s >> 7;
                *s ^= *s << 17;
                *s
            });
            let unit = (r.unwrap_or(0) % 2001) as f64 / 1000.0 - 1.0; // -1.0 ..= 1.0
            let j = self.spec.jitter.as_secs_f64() * unit;
            delay = Duration::from_secs_f64((delay.as_secs_f64() + j).max(0.0));
        }
        let mut at = (now + delay).max(after);
        if let Some(rate) = self.spec.rate {
            if let Ok(mut slot) = self.next_slot.lock() {
                at = at.max(*slot);
                *slot = at + Duration::from_secs_f64(1.0 / rate);
            }
        }
        at
    }
}

/// A running proxy; dropping it stops it and every connection through it.
pub(crate) struct Proxy {
    shaper: Arc<Shaper>,
    tasks: JoinSet<()>,
}

impl Proxy {
    /// Forwards what `listener` accepts to `upstream` under `spec`.
    pub(crate) fn start(spec: StoreDelay, listener: TcpListener, upstream: String) -> Proxy {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        let shaper = Arc::new(Shaper {
            spec,
            n: Counters::default(),
            next_slot: Mutex::new(Instant::now()),
            rng: Mutex::new(seed),
        });
        let mut tasks = JoinSet::new();
        let s = shaper.clone();
        tasks.spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                // An accept error (too many open files, an aborted handshake) must not end the
                // proxy and with it every connection through it: wait a moment and go on.
                let client = match listener.accept().await {
                    Ok((c, _)) => c,
                    Err(e) => {
                        tracing::warn!("store delay proxy: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                s.n.connections.fetch_add(1, Ordering::Relaxed);
                let (s, up) = (s.clone(), upstream.clone());
                conns.spawn(async move {
                    if let Ok(server) = TcpStream::connect(&up).await {
                        serve(s, client, server).await;
                    }
                });
                while conns.try_join_next().is_some() {}
            }
        });
        Proxy { shaper, tasks }
    }

    pub(crate) fn stats(&self) -> ProxyStats {
        let n = &self.shaper.n;
        ProxyStats {
            condition: self.shaper.spec.to_string(),
            connections: n.connections.load(Ordering::Relaxed),
            chunks: n.chunks.load(Ordering::Relaxed),
            bytes: n.bytes.load(Ordering::Relaxed),
            delay_s: n.delay_us.load(Ordering::Relaxed) as f64 / 1e6,
            peak_inflight: n.peak_inflight.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting and drops every connection.
    pub(crate) fn stop(mut self) -> ProxyStats {
        let stats = self.stats();
        self.tasks.abort_all();
        stats
    }
}

/// One connection: the writer's chunks through the shaper, the server's answers straight back.
async fn serve(s: Arc<Shaper>, client: TcpStream, server: TcpStream) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(HELD_PER_CONNECTION);
    let shaper = s.clone();
    let forward = async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            shaper.n.inflight.fetch_sub(1, Ordering::Relaxed);
            if sw.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // Chunks still held when the server's side closed are no longer in flight.
        rx.close();
        while rx.recv().await.is_some() {
            shaper.n.inflight.fetch_sub(1, Ordering::Relaxed);
        }
        let _ = sw.shutdown().await;
    };
    let read = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut last = Instant::now();
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let now = Instant::now();
            let at = s.release_at(now, last);
            last = at;
            let held = s.n.inflight.fetch_add(1, Ordering::Relaxed) + 1;
            s.n.peak_inflight.fetch_max(held, Ordering::Relaxed);
            s.n.chunks.fetch_add(1, Ordering::Relaxed);
            s.n.bytes.fetch_add(n as u64, Ordering::Relaxed);
            s.n.delay_us.fetch_add(
                u64::try_from(at.saturating_duration_since(now).as_micros()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            if tx.send((at, buf[..n].to_vec())).await.is_err() {
                s.n.inflight.fetch_sub(1, Ordering::Relaxed);
                break;
            }
        }
    };
    let back = async move {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(forward, read, back);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server behind the proxy: an answer comes back no sooner than the delay (a lower
    /// bound only, which no slow machine can break), and the bytes arrive unchanged, in order.
    #[tokio::test]
    async fn a_round_trip_through_the_proxy_takes_at_least_its_delay() {
        let echo = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = echo.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut c, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = c.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let spec: StoreDelay = "redis=80ms".parse().expect("spec");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let listen = listener.local_addr().expect("proxy address");
        let proxy = Proxy::start(spec, listener, addr.to_string());
        let mut c = TcpStream::connect(listen).await.expect("connect");
        for round in 0..3u8 {
            let t = Instant::now();
            let msg: Vec<u8> = (0..200u8).map(|b| b.wrapping_add(round)).collect();
            c.write_all(&msg).await.expect("write");
            let mut back = vec![0u8; msg.len()];
            c.read_exact(&mut back).await.expect("read");
            assert_eq!(back, msg);
            assert!(t.elapsed() >= Duration::from_millis(80), "round {round}: {:?}", t.elapsed());
        }
        let stats = proxy.stop();
        assert_eq!((stats.connections, stats.bytes), (1, 600));
        assert!(stats.delay_s >= 0.24, "{stats:?}");
    }

    /// With a rate cap, chunks leave no closer together than 1/rate, whatever the arrivals.
    #[test]
    fn the_rate_cap_spaces_releases() {
        let spec: StoreDelay = "es=0ms@10/s".parse().expect("spec");
        let s = Shaper { spec, n: Counters::default(), next_slot: Mutex::new(Instant::now()), rng: Mutex::new(1) };
        let now = Instant::now();
        let a = s.release_at(now, now);
        let b = s.release_at(now, now);
        assert!(b.duration_since(a) >= Duration::from_millis(99), "{:?}", b.duration_since(a));
    }
}
