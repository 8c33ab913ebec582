//! [`Edge`]: what every API request reads, built once at startup and registered once as
//! `web::Data`, so a handler takes the request, its body, the edge and its worker's ring.

use crate::auth::Auth;
use crate::body::BodyBudget;
use crate::config::IngestConfig;
use crate::limits::KeyLimits;
use pipeline_common::version::VersionClock;
use std::sync::Arc;

/// The state the API routes and their middleware share across every HTTP worker: the settings,
/// who may write (`crate::auth`), the bytes of bodies being read (`crate::body`), each key's
/// limits (`crate::limits`) and the version clock.
///
/// The ring is not here: each worker has its own producer handle ([`crate::routes::WorkerRing`],
/// not `Sync`), registered per worker beside this shared one.
pub(crate) struct Edge {
    pub(crate) settings: IngestConfig,
    /// An `Arc` because its watcher task (`Auth::watch`) holds it too, to reload the keys file.
    pub(crate) auth: Arc<Auth>,
    pub(crate) budget: BodyBudget,
    pub(crate) key_limits: KeyLimits,
    pub(crate) clock: VersionClock,
}
