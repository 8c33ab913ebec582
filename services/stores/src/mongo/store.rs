//! MongoDB: `insert_many(ordered = false)` into `<db>.<collection>` with `_id` = message id, and
//! a conditional replace for the ids already there.
//!
//! Almost every message is new, so a batch is first inserted as it is (the cheap path). A
//! message whose id is already held fails with duplicate key (11000); those, and only those, are
//! then replaced with a filtered upsert: `{_id, version: {$lt: v}}` (or no version: written
//! before versions) matches the stored document only when its version is older, and when it
//! does not match, the upsert's insert hits the `_id` index again (11000): a newer or the same
//! version is stored, which is success. So a redelivery changes nothing and two versions end
//! as the newer one in either order. Unordered writes let the rest of a batch go in around each
//! failure. A write error the document itself causes (a validation failure, a document too
//! large) refuses that document alone; anything else is transient and the writer retries it.
//! The audit side is in [`super::audit`].

use super::args::MongoArgs;
use super::codec::{to_doc, Doc};
use super::limit;
use super::{err, KIND};
use crate::Sink;
use crate::{Backend, Overwrite, Rejected, StoreError, StoreKind, CONNECT_TIMEOUT};
use async_trait::async_trait;
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::ErrorKind;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection};
use pipeline_common::message::Message;

const DUPLICATE_KEY: i32 = 11000;
/// Per-document write errors that the same document hits every time: BadValue, TypeMismatch,
/// DollarPrefixedFieldName, DocumentValidationFailure, BSONObjectTooLarge, KeyTooLong. Any other
/// code (NotWritablePrimary, ShutdownInProgress, WriteConflict, ...) is retried.
const PERMANENT_WRITE_ERRORS: [i32; 6] = [2, 14, 52, 121, 10334, 17280];

pub struct MongoStore {
    pub(super) coll: Collection<Document>,
}

/// The outcome of one batch's write errors: which messages are already held (to be replaced
/// when older), which were refused for good; or the error to retry.
struct Sorted<'a> {
    held: Vec<&'a Message>,
    refused: Vec<Rejected>,
}

/// Sorts the write errors of an insert (`index` into `batch`). A server that names one index
/// twice still gets each message sorted once: the writer counts what it stored as the batch
/// less what was refused, and dead-letters each refusal.
fn sort_errors<'a>(
    errors: impl Iterator<Item = (usize, i32, String)>,
    batch: &[&'a Message],
) -> Result<Sorted<'a>, (i32, String)> {
    let mut out = Sorted { held: Vec::new(), refused: Vec::new() };
    let mut seen = std::collections::HashSet::<usize>::new();
    for (index, code, message) in errors {
        if !seen.insert(index) {
            continue;
        }
        match (code, batch.get(index)) {
            (DUPLICATE_KEY, Some(m)) => out.held.push(*m),
            (code, Some(m)) if PERMANENT_WRITE_ERRORS.contains(&code) => {
                out.refused.push(Rejected { id: m.id.clone(), reason: format!("code {code}: {message}") })
            }
            (code, _) => return Err((code, message)),
        }
    }
    Ok(out)
}

/// What an insert_many failure means for the batch: the messages whose ids are already held and
/// those refused for good, or the error to retry.
fn classify<'a>(e: mongodb::error::Error, batch: &[&'a Message]) -> Result<Sorted<'a>, StoreError> {
    let sorted = match e.kind.as_ref() {
        ErrorKind::InsertMany(ime) if ime.write_concern_error.is_none() => {
            let errors = ime.write_errors.iter().flatten().map(|we| (we.index, we.code, we.message.clone()));
            sort_errors(errors, batch).ok()
        }
        // The whole request cannot be encoded or is malformed: the writer splits the batch to
        // find the document that causes it.
        ErrorKind::BsonSerialization(_) | ErrorKind::InvalidArgument { .. } => {
            return Err(StoreError::permanent_from(KIND, e))
        }
        _ => None,
    };
    sorted.ok_or_else(|| err(e))
}

impl MongoStore {
    /// Replaces the documents of `held` whose stored version is older (or, for repair, the
    /// same), in one unordered `update` command of filtered upserts (see the module docs).
    async fn replace_older(&self, held: &[&Message], overwrite: Overwrite) -> Result<Vec<Rejected>, StoreError> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let op = match overwrite {
            Overwrite::Older => "$lt",
            Overwrite::OlderOrSame => "$lte",
        };
        let mut updates = Vec::with_capacity(held.len());
        for m in held {
            let doc = mongodb::bson::to_document(&to_doc(m)).map_err(|e| StoreError::permanent_from(KIND, e))?;
            // `$or` with `$exists` rather than `$not: {$gte}`: the same documents, and nx-27017
            // implements it.
            let older =
                doc! { "$or": [ { "version": { op: m.version as i64 } }, { "version": { "$exists": false } } ] };
            let filter = doc! { "_id": &m.id, "$and": [older] };
            updates.push(doc! { "q": filter, "u": doc, "upsert": true });
        }
        let cmd = doc! { "update": self.coll.name(), "updates": updates, "ordered": false };
        let reply =
            self.coll.client().database(self.coll.namespace().db.as_str()).run_command(cmd).await.map_err(err)?;
        let errors = reply.get_array("writeErrors").map(|a| a.iter().collect::<Vec<_>>()).unwrap_or_default();
        let errors = errors.into_iter().filter_map(Bson::as_document).map(|we| {
            let index = we.get_i32("index").map(|i| i as usize).unwrap_or(usize::MAX);
            let code = we.get_i32("code").unwrap_or(0);
            (index, code, we.get_str("errmsg").unwrap_or_default().to_string())
        });
        // Duplicate key here is the newer (or same) version already stored: nothing to do.
        let sorted = sort_errors(errors, held)
            .map_err(|(code, m)| StoreError::transient(KIND, format!("replace: code {code}: {m}")))?;
        Ok(sorted.refused)
    }
}

#[async_trait]
impl Backend for MongoStore {
    type Args = MongoArgs;

    async fn connect(args: &MongoArgs) -> Result<Self, StoreError> {
        let mut opts =
            ClientOptions::parse(args.connection_url()?).await.map_err(|e| StoreError::permanent_from(KIND, e))?;
        opts.connect_timeout = Some(CONNECT_TIMEOUT);
        opts.server_selection_timeout = Some(CONNECT_TIMEOUT);
        opts.app_name = Some("pipeline".into());
        let client = Client::with_options(opts).map_err(err)?;
        Ok(Self { coll: client.database(&args.db).collection(&args.collection) })
    }
}

#[async_trait]
impl Sink for MongoStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    async fn prepare(&self) -> Result<(), StoreError> {
        // Collections are created on first insert; this checks the server answers.
        self.coll.client().database("admin").run_command(doc! { "ping": 1 }).await.map_err(err)?;
        Ok(())
    }

    async fn write(&self, batch: &[Message], overwrite: Overwrite) -> Result<Vec<Rejected>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let all: Vec<&Message> = batch.iter().collect();
        let docs = self.coll.clone_with_type::<Doc<'_>>();
        let sorted = match docs.insert_many(batch.iter().map(to_doc)).ordered(false).await {
            Ok(_) => return Ok(Vec::new()),
            Err(e) => classify(e, &all)?,
        };
        let mut refused = sorted.refused;
        refused.extend(self.replace_older(&sorted.held, overwrite).await?);
        Ok(refused)
    }

    async fn holds(&self, largest: &[Message]) -> Result<(), StoreError> {
        limit::holds(self.coll.client(), largest).await
    }

    async fn healthcheck(&self) -> Result<(), StoreError> {
        self.coll.client().database("admin").run_command(mongodb::bson::doc! { "ping": 1 }).await.map(drop).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_common::message::{Limits, NewMessage};

    fn message(id: &str) -> Message {
        NewMessage { id: Some(id.into()), sender: "s".into(), recipient: "r".into(), body: "b".into(), sent_at: None }
            .into_message(Limits::default(), time::OffsetDateTime::now_utc(), 1)
            .unwrap()
    }

    #[test]
    fn an_index_named_twice_is_sorted_once() {
        let (a, b) = (message("a"), message("b"));
        let batch = [&a, &b];
        let errors = [
            (0, 121, "x".to_string()),
            (0, 121, "x".to_string()),
            (1, DUPLICATE_KEY, "d".to_string()),
            (1, DUPLICATE_KEY, "d".to_string()),
        ];
        let sorted = sort_errors(errors.into_iter(), &batch).unwrap();
        assert_eq!(sorted.refused.len(), 1, "one refusal for message a");
        assert_eq!(sorted.held.len(), 1, "message b held once");
    }
}
