//! Wiring: Kafka producer, ring, HTTP server; and the shutdown order that keeps every 202:
//! stop accepting → finish in-flight requests → drain the ring → flush the producer.

use crate::config::IngestConfig;
use crate::edge::Edge;
use crate::kafka::Publisher;
use crate::ring::{Drained, Ring, RingOptions};
use crate::routes::{self, WorkerRing};
use actix_web::dev::Server;
use actix_web::{middleware, web, App, HttpServer};
use anyhow::Context;
use pipeline_common::kafka::ensure_topic;
use pipeline_common::telemetry;
use pipeline_common::version::{random_instance, VersionClock};
use std::cell::RefCell;
use std::net::TcpListener;
use std::time::{Duration, Instant};

pub struct Application {
    port: u16,
    server: Server,
    /// The admin listener (`--admin-listen`), stopped when the API server has stopped.
    admin: Option<Server>,
    ring: Ring,
    drained: Drained,
    publisher: Publisher,
}

impl Application {
    /// Creates the topic if missing, starts the ring and binds the listener (port 0 = any free
    /// port, for tests). Serving starts with [`Application::run`].
    pub async fn build(cfg: IngestConfig) -> anyhow::Result<Application> {
        cfg.check().map_err(anyhow::Error::msg)?;
        let plaintext = pipeline_common::kafka::plaintext_brokers(&cfg.kafka);
        pipeline_common::secret::check_plaintext(&plaintext, cfg.kafka.allow_plaintext).map_err(anyhow::Error::msg)?;
        // The TLS pair first: a wrong file stops the ingest before it does anything else, with the
        // file and the problem named (clap already refused one flag without the other).
        let tls = match (&cfg.tls_cert_file, &cfg.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::tls::Certificates::load(cert, key)?),
            (None, None) => None,
            _ => anyhow::bail!("--tls-cert-file and --tls-key-file go together: give both or neither"),
        };
        let handle = telemetry::metrics_handle();
        // Kafka being down is not a reason to refuse to start: /readyz says not ready and
        // requests get 503s until it answers. The topic is created in the background, asked
        // again while the broker does not answer (the writer creates it too).
        let kafka = cfg.kafka.clone();
        tokio::spawn(async move {
            if let Err(e) = ensure_topic(&kafka, &kafka.topic, kafka.partitions).await {
                tracing::warn!(error = %e, topic = %kafka.topic, brokers = %kafka.brokers, "could not create the topic");
            }
        });
        let publisher = Publisher::new(&cfg.producer()).context("creating the Kafka producer")?;
        let ready = crate::ready::Readiness::new();
        tokio::spawn(ready.clone().keep(publisher.clone()));
        let ready = web::Data::from(ready);
        let (ring, drained) = Ring::start(
            RingOptions {
                size: cfg.ring_size,
                max_bytes: cfg.ring_max_bytes,
                idle_sleep_max: Duration::from_micros(cfg.ring_idle_sleep_us),
                record_max_bytes: cfg.record_max_bytes,
                window: Duration::from_millis(cfg.linger_ms),
                adaptive: cfg.linger_mode == crate::config::LingerMode::Adaptive,
            },
            publisher.clone(),
        )
        .context("starting the ring consumer")?;
        let listener = TcpListener::bind(cfg.listen).with_context(|| format!("binding {}", cfg.listen))?;
        let port = listener.local_addr()?.port();
        let workers = crate::config::http_workers(cfg.workers);
        let shutdown_grace = cfg.deadline() + Duration::from_secs(1);
        let instance = cfg.ingest_id.unwrap_or_else(random_instance);
        tracing::info!(ingest_id = instance, "stamping versions as this ingest");
        let clock = VersionClock::new(instance);
        let auth = crate::auth::Auth::from_config(&cfg)?;
        tokio::spawn(auth.clone().watch());
        let tls_config = match &tls {
            Some(certs) => {
                tokio::spawn(certs.clone().watch());
                Some(certs.server_config().context("the TLS configuration")?)
            }
            None => None,
        };
        let budget = crate::body::BodyBudget::new(cfg.body_budget_bytes);
        let key_limits = crate::limits::KeyLimits::new(cfg.ring_max_bytes);
        let (head_timeout, keep_alive) =
            (Duration::from_millis(cfg.head_timeout_ms), Duration::from_secs(cfg.keep_alive_secs));
        let per_worker = cfg.max_connections.div_ceil(workers).max(1);
        // With --admin-listen, /healthz, /readyz and /metrics are served there only; without
        // it, beside the API (docs/explanation/security.md).
        let admin = match cfg.admin_listen {
            Some(addr) => {
                let listener = TcpListener::bind(addr).with_context(|| format!("binding the admin listener {addr}"))?;
                let (ready, handle) = (ready.clone(), handle.clone());
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(ready.clone())
                        .app_data(web::Data::new(handle.clone()))
                        .configure(admin_routes)
                        .default_service(web::to(routes::not_found))
                })
                .workers(1)
                .disable_signals()
                .listen(listener)?
                .run();
                if tls.is_some() {
                    // Health, readiness and metrics carry no client data; the kubelet, Prometheus
                    // and the healthchecks would each need the CA. docs/explanation/security.md.
                    tracing::info!(%addr, "admin listener: /healthz, /readyz, /metrics, plain HTTP");
                } else {
                    tracing::info!(%addr, "admin listener: /healthz, /readyz, /metrics");
                }
                Some(server)
            }
            None => None,
        };
        let public_admin = admin.is_none();
        let listen = cfg.listen;
        let edge = web::Data::new(Edge { settings: cfg, auth, budget, key_limits, clock });
        let worker_ring = ring.clone();
        let server = HttpServer::new(move || {
            let app = App::new()
                .wrap(middleware::from_fn(crate::telemetry_mw::observe))
                .app_data(edge.clone())
                .app_data(ready.clone())
                .app_data(web::Data::new(handle.clone()))
                .app_data(web::Data::new(WorkerRing(RefCell::new(worker_ring.clone()))))
                .service(
                    web::scope("/v1")
                        .wrap(middleware::from_fn(crate::key_mw::require_key))
                        .service(
                            web::resource("/messages")
                                .route(web::post().to(routes::post_message))
                                .default_service(web::to(routes::method_not_allowed)),
                        )
                        .service(
                            web::resource("/messages/batch")
                                .route(web::post().to(routes::post_batch))
                                .default_service(web::to(routes::method_not_allowed)),
                        ),
                );
            let app = if public_admin { app.configure(admin_routes) } else { app };
            app.default_service(web::to(routes::not_found))
        })
        .workers(workers)
        .client_request_timeout(head_timeout)
        .keep_alive(keep_alive)
        .max_connections(per_worker)
        .shutdown_timeout(shutdown_grace.as_secs());
        // With a certificate the API port speaks HTTPS only: a plaintext request on it fails the
        // handshake and never reaches a route.
        let server = match tls_config {
            Some(config) => {
                tracing::info!(%listen, "the API listener speaks HTTPS only");
                server.tls_handshake_timeout(head_timeout).listen_rustls_0_23(listener, config)?
            }
            None => server.listen(listener)?,
        }
        .run();
        Ok(Application { port, server, admin, ring, drained, publisher })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until SIGTERM/SIGINT (actix stops accepting and lets in-flight requests finish),
    /// then drains the ring into the producer and flushes it.
    pub async fn run(self) -> anyhow::Result<()> {
        tracing::info!(port = self.port, boot_id = %telemetry::boot().id, "ingest listening");
        // If this future is dropped instead of finishing (a test's runtime ending), records
        // stuck behind a dead broker give up at once, so dropping the ring cannot hang.
        let _close_on_drop = CloseOnDrop(self.publisher.clone());
        let admin = self.admin.map(|s| {
            let handle = s.handle();
            tokio::spawn(s);
            handle
        });
        self.server.await?;
        if let Some(h) = admin {
            h.stop(false).await;
        }
        let started = Instant::now();
        self.publisher.close(Duration::from_secs(30));
        // Once every ring handle is gone the consumer drains the ring, sends what it gathered and
        // finishes; only then is the producer's flush the last word.
        let (ring, drained) = (self.ring, self.drained);
        let finished = tokio::task::spawn_blocking(move || {
            drop(ring);
            drained.wait(Duration::from_secs(30))
        })
        .await?;
        if !finished {
            tracing::error!("the ring consumer did not finish within 30 s; flushing what the producer has");
        }
        self.publisher.flush(Duration::from_secs(30)).context("flushing the Kafka producer")?;
        tracing::info!(drain_ms = started.elapsed().as_millis() as u64, "ring drained and producer flushed; bye");
        Ok(())
    }
}

/// What the admin listener serves: liveness, readiness, the metrics and the OpenAPI document
/// (liveness and metrics as every service serves them, `telemetry::routes`).
fn admin_routes(cfg: &mut web::ServiceConfig) {
    cfg.configure(telemetry::routes)
        .route("/readyz", web::get().to(routes::readyz))
        .route("/openapi.json", web::get().to(routes::openapi));
}

struct CloseOnDrop(Publisher);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close(Duration::ZERO);
    }
}
