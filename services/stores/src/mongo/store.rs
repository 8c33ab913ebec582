//! MongoDB: `insert_many(ordered = false)` into `<db>.<collection>` with `_id` = message id.
//!
//! A redelivered message hits the `_id` unique index and fails with duplicate key (11000),
//! which is success for us: the document is there exactly once. Unordered inserts let the rest
//! of the batch go in around such duplicates. A write error the document itself causes (a
//! validation failure, a document too large) refuses that document alone; anything else is
//! transient and the writer retries it.

use super::MongoArgs;
use crate::{Backend, Rejected, Store, StoreError, StoreKind, StoredId, CONNECT_TIMEOUT};
use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, DateTime, Document};
use mongodb::error::ErrorKind;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection};
use pipeline_common::message::Message;

const KIND: StoreKind = StoreKind::Mongo;
const DUPLICATE_KEY: i32 = 11000;
/// Per-document write errors that the same document hits every time: BadValue, TypeMismatch,
/// DollarPrefixedFieldName, DocumentValidationFailure, BSONObjectTooLarge, KeyTooLong. Any other
/// code (NotWritablePrimary, ShutdownInProgress, WriteConflict, ...) is retried.
const PERMANENT_WRITE_ERRORS: [i32; 6] = [2, 14, 52, 121, 10334, 17280];

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::transient(KIND, e)
}

pub struct MongoStore {
    coll: Collection<Document>,
}

/// A message as its document, borrowing the message's text: the driver serializes it straight
/// into BSON. (Building a `Document` first cloned every field and was then serialized again:
/// ~5 % of the writer's CPU samples under batch load.)
#[derive(serde::Serialize)]
struct Doc<'a> {
    _id: &'a str,
    sender: &'a str,
    recipient: &'a str,
    body: &'a str,
    sent_at: DateTime,
}

fn to_doc(m: &Message) -> Doc<'_> {
    let millis = (m.sent_at.unix_timestamp_nanos() / 1_000_000) as i64;
    Doc {
        _id: &m.id,
        sender: &m.sender,
        recipient: &m.recipient,
        body: &m.body,
        sent_at: DateTime::from_millis(millis),
    }
}

/// What an insert_many failure means for the batch: `Ok(refused)` when every failed document
/// is either already there (duplicate key) or refused for good, else the error to retry.
fn classify(e: mongodb::error::Error, batch: &[Message]) -> Result<Vec<Rejected>, StoreError> {
    match e.kind.as_ref() {
        ErrorKind::InsertMany(ime) if ime.write_concern_error.is_none() => {
            let mut refused = Vec::new();
            for we in ime.write_errors.iter().flatten() {
                match (we.code, batch.get(we.index)) {
                    (DUPLICATE_KEY, _) => {}
                    (code, Some(m)) if PERMANENT_WRITE_ERRORS.contains(&code) => {
                        refused.push(Rejected { id: m.id.clone(), reason: format!("code {code}: {}", we.message) })
                    }
                    _ => return Err(err(&e)),
                }
            }
            Ok(refused)
        }
        // The whole request cannot be encoded or is malformed: the writer splits the batch to
        // find the document that causes it.
        ErrorKind::BsonSerialization(_) | ErrorKind::InvalidArgument { .. } => Err(StoreError::permanent(KIND, &e)),
        _ => Err(err(&e)),
    }
}

#[async_trait]
impl Backend for MongoStore {
    type Args = MongoArgs;

    async fn connect(args: &MongoArgs) -> Result<Self, StoreError> {
        let mut opts = ClientOptions::parse(&args.url).await.map_err(|e| StoreError::permanent(KIND, e))?;
        opts.connect_timeout = Some(CONNECT_TIMEOUT);
        opts.server_selection_timeout = Some(CONNECT_TIMEOUT);
        opts.app_name = Some("pipeline".into());
        let client = Client::with_options(opts).map_err(err)?;
        Ok(Self { coll: client.database(&args.database).collection(&args.collection) })
    }
}

#[async_trait]
impl Store for MongoStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    async fn prepare(&self) -> Result<(), StoreError> {
        // Collections are created on first insert; this checks the server answers.
        self.coll.client().database("admin").run_command(doc! { "ping": 1 }).await.map_err(err)?;
        Ok(())
    }

    async fn write(&self, batch: &[Message]) -> Result<Vec<Rejected>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let docs = self.coll.clone_with_type::<Doc<'_>>();
        match docs.insert_many(batch.iter().map(to_doc)).ordered(false).await {
            Ok(_) => Ok(Vec::new()),
            Err(e) => classify(e, batch),
        }
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.coll.count_documents(doc! {}).await.map_err(err)
    }

    async fn ids(&self) -> Result<Vec<StoredId>, StoreError> {
        let mut cursor = self.coll.find(doc! {}).projection(doc! { "_id": 1 }).batch_size(10_000).await.map_err(err)?;
        let mut out = Vec::new();
        while let Some(d) = cursor.try_next().await.map_err(err)? {
            let id = match d.get("_id") {
                Some(Bson::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => continue,
            };
            out.push(StoredId { id, place: None });
        }
        Ok(out)
    }

    async fn reset(&self) -> Result<(), StoreError> {
        self.coll.drop().await.map_err(err)
    }
}
