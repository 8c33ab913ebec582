//! Any document `reconcile --json` prints, told apart by the fields only it has.

use super::{
    CheckReport, DlqList, DlqReplayReport, ErrorAnswer, IdsReport, Level, NotDrained, RepairReport, ResetReport,
    TopicReplayReport, TotalsReport,
};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};

/// Why a document is not one of reconcile's answers.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("not reconcile's JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no line of reconcile's output is one of its JSON answers")]
    NoAnswer,
}

/// One `reconcile --json` answer, whichever subcommand printed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Check(CheckReport),
    Totals(TotalsReport),
    Reset(ResetReport),
    Repair(RepairReport),
    TopicReplay(TopicReplayReport),
    DlqReplay(DlqReplayReport),
    DlqList(DlqList),
    Ids(IdsReport),
    NotDrained(NotDrained),
    Error(ErrorAnswer),
}

/// `replay` is `"topic"` in a topic replay, `true` in a dead-letter replay.
#[derive(Deserialize)]
#[serde(untagged)]
enum ReplayField {
    Topic(super::TopicTag),
    Dlq(bool),
}

/// The fields that tell the answers apart.
#[derive(Deserialize)]
struct Probe {
    error: Option<IgnoredAny>,
    drained: Option<bool>,
    check: Option<Level>,
    repair: Option<IgnoredAny>,
    replay: Option<ReplayField>,
    replay_group: Option<IgnoredAny>,
    first: Option<IgnoredAny>,
    ids: Option<IgnoredAny>,
}

impl<'de> Deserialize<'de> for Answer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Answer, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        let p = Probe::deserialize(&v).map_err(D::Error::custom)?;
        let answer = if p.error.is_some() {
            ErrorAnswer::deserialize(v).map(Answer::Error)
        } else if p.drained == Some(false) {
            NotDrained::deserialize(v).map(Answer::NotDrained)
        } else if p.check == Some(Level::Totals) {
            TotalsReport::deserialize(v).map(Answer::Totals)
        } else if p.check.is_some() {
            CheckReport::deserialize(v).map(Answer::Check)
        } else if p.repair.is_some() {
            RepairReport::deserialize(v).map(Answer::Repair)
        } else if let Some(r) = p.replay {
            match r {
                ReplayField::Topic(_) => TopicReplayReport::deserialize(v).map(Answer::TopicReplay),
                ReplayField::Dlq(true) => DlqReplayReport::deserialize(v).map(Answer::DlqReplay),
                ReplayField::Dlq(false) => {
                    return Err(D::Error::custom("`replay: false` is none of reconcile's answers"))
                }
            }
        } else if p.replay_group.is_some() {
            DlqList::deserialize(v).map(Answer::DlqList)
        } else if p.first.is_some() {
            ResetReport::deserialize(v).map(Answer::Reset)
        } else if p.ids.is_some() {
            IdsReport::deserialize(v).map(Answer::Ids)
        } else {
            return Err(D::Error::custom("none of reconcile's answers (no field tells which)"));
        };
        answer.map_err(D::Error::custom)
    }
}

impl Answer {
    /// The answer in `text`, one JSON document (surrounding white space allowed).
    pub fn parse(text: &str) -> Result<Answer, ReportError> {
        Ok(serde_json::from_str(text.trim())?)
    }

    /// The last line of `text` that is an answer: a file a run appended to, or cut short.
    pub fn last_in(text: &str) -> Result<Answer, ReportError> {
        text.lines().rev().find_map(|l| Answer::parse(l).ok()).ok_or(ReportError::NoAnswer)
    }

    pub fn check(&self) -> Option<&CheckReport> {
        match self {
            Answer::Check(r) => Some(r),
            _ => None,
        }
    }

    pub fn totals(&self) -> Option<&TotalsReport> {
        match self {
            Answer::Totals(r) => Some(r),
            _ => None,
        }
    }

    pub fn reset(&self) -> Option<&ResetReport> {
        match self {
            Answer::Reset(r) => Some(r),
            _ => None,
        }
    }

    pub fn repair(&self) -> Option<&RepairReport> {
        match self {
            Answer::Repair(r) => Some(r),
            _ => None,
        }
    }

    pub fn topic_replay(&self) -> Option<&TopicReplayReport> {
        match self {
            Answer::TopicReplay(r) => Some(r),
            _ => None,
        }
    }

    pub fn dlq_replay(&self) -> Option<&DlqReplayReport> {
        match self {
            Answer::DlqReplay(r) => Some(r),
            _ => None,
        }
    }

    pub fn dlq_list(&self) -> Option<&DlqList> {
        match self {
            Answer::DlqList(r) => Some(r),
            _ => None,
        }
    }

    pub fn ids(&self) -> Option<&IdsReport> {
        match self {
            Answer::Ids(r) => Some(r),
            _ => None,
        }
    }

    pub fn not_drained(&self) -> Option<&NotDrained> {
        match self {
            Answer::NotDrained(r) => Some(r),
            _ => None,
        }
    }

    pub fn error(&self) -> Option<&ErrorAnswer> {
        match self {
            Answer::Error(r) => Some(r),
            _ => None,
        }
    }

    /// The level a count or diff checked at (`None` for other answers).
    pub fn level(&self) -> Option<Level> {
        match self {
            Answer::Check(r) => Some(r.check),
            Answer::Totals(r) => Some(r.check),
            _ => None,
        }
    }

    /// The outcome sentence of the reports that have one.
    pub fn message(&self) -> Option<&str> {
        match self {
            Answer::Check(r) => Some(&r.message),
            Answer::Totals(r) => Some(&r.message),
            Answer::Repair(r) => Some(&r.message),
            Answer::TopicReplay(r) => Some(&r.message),
            Answer::DlqReplay(r) => Some(&r.message),
            _ => None,
        }
    }
}
