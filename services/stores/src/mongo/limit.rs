//! What one document may hold on this server: `maxBsonObjectSize` from `hello` (16 MiB on
//! every MongoDB so far, but the server says so itself, and a MongoDB-protocol server such as
//! nx-27017 may differ).

use super::codec::to_doc;
use super::{err, KIND};
use crate::limits::fits;
use crate::StoreError;
use mongodb::bson::{doc, Bson};
use mongodb::Client;
use pipeline_common::message::Message;

/// Fails unless the server takes each message as the document the writer stores.
pub(super) async fn holds(client: &Client, largest: &[Message]) -> Result<(), StoreError> {
    let hello = client.database("admin").run_command(doc! { "hello": 1 }).await.map_err(err)?;
    let allows = match hello.get("maxBsonObjectSize") {
        Some(Bson::Int32(n)) => u64::try_from(*n).ok(),
        Some(Bson::Int64(n)) => u64::try_from(*n).ok(),
        Some(Bson::Double(n)) if n.is_finite() && *n >= 0.0 => Some(*n as u64),
        _ => None,
    };
    let allows = allows.ok_or_else(|| {
        StoreError::transient(KIND, format!("hello: maxBsonObjectSize is {:?}", hello.get("maxBsonObjectSize")))
    })?;
    let needs = largest
        .iter()
        .map(|m| Ok(mongodb::bson::to_vec(&to_doc(m)).map_err(|e| StoreError::permanent_from(KIND, e))?.len() as u64));
    fits(KIND, "maxBsonObjectSize", allows, needs)
}
