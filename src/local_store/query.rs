//! What an interactive query of one slot answers (Q1): which task holds
//! the key's slot, and what the instance asked says of it: the slot's
//! committed state, read from the task's local store, or a typed refusal
//! when the task is not this instance's, not started, restoring, ended,
//! or runs without a store.
//!
//! Sans-IO: a driver says where the task stands and hands a reader of its
//! store; the answer comes back. The live runtime reads its fjall store,
//! the simulator its model of a local disk, so both run the one rule.
//! The store holds committed state only (S6: a transaction's changelog
//! records are applied after it commits), and a query reads nothing else,
//! whatever else the driver could show it (the task's open transaction).

use bytes::Bytes;

use crate::app::{App, StagePlan};
use crate::assembly::Assembly;
use crate::mutation::{self, Mutation};
use crate::partitioner::partition_for;
use crate::stage::SlotKey;
use crate::task::TaskId;

/// Why a query names no task to ask.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryTargetError {
    /// The application has no stage of that name.
    #[error("unknown stage `{stage}`: the application's stages are {known:?}")]
    UnknownStage {
        /// The stage asked for.
        stage: String,
        /// The application's stages.
        known: Vec<String>,
    },
    /// The stage declares no state: there is nothing to read.
    #[error("stage `{stage}` is stateless: it declares no state to query")]
    StatelessStage {
        /// The stage.
        stage: String,
    },
}

/// The stage named `stage` of `app`, if a query may read it: it exists
/// and keeps its state on a changelog.
pub fn queryable_stage<'a>(app: &'a App, stage: &str) -> Result<&'a StagePlan, QueryTargetError> {
    let unknown = || QueryTargetError::UnknownStage {
        stage: stage.to_owned(),
        known: app.stages().iter().map(|p| p.name().to_owned()).collect(),
    };
    let plan = app.stage(stage).ok_or_else(unknown)?;
    if !plan.stage.is_stateful() || plan.changelog.is_none() {
        return Err(QueryTargetError::StatelessStage {
            stage: stage.to_owned(),
        });
    }
    Ok(plan)
}

/// The task of `assembly` whose slots hold `key` (its bytes) of stage
/// `stage`: a task consumes one partition of each source, so the key's
/// task is the partition Kafka's default partitioner gives the key among
/// the stage's tasks.
pub fn query_task(
    app: &App,
    assembly: &Assembly,
    stage: &str,
    key: &[u8],
) -> Result<TaskId, QueryTargetError> {
    let plan = queryable_stage(app, stage)?;
    let tasks = assembly
        .tasks_of(plan.name())
        .ok_or_else(|| QueryTargetError::UnknownStage {
            stage: stage.to_owned(),
            known: app.stages().iter().map(|p| p.name().to_owned()).collect(),
        })?;
    Ok(TaskId {
        stage: plan.name().into(),
        partition: partition_for(Some(key), tasks, 0),
    })
}

/// Where the task a query names stands on the instance asked, as its
/// driver sees it; `S` the reader of the store it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryStanding<S> {
    /// Another instance owns the task (or none does, as far as this one
    /// knows).
    NotOwned,
    /// Assigned here; its run has not started.
    NotStarted,
    /// Its run here is restoring its slots (or waits to retry a start),
    /// with `remaining` changelog records still to restore.
    Restoring {
        /// Changelog records still to restore, as last counted.
        remaining: u64,
    },
    /// Its run here is over or ending (stopped, failed, fenced).
    Ended,
    /// It runs here with its state in memory only: no store to read.
    NoStore,
    /// It runs here, its restore over: its local store is read.
    Serving(S),
}

/// A task's local store, as a query reads it.
pub trait QueryStore {
    /// Why a read failed.
    type Error;

    /// The value the store holds under changelog key `slot`: the slot's
    /// state as of the last transaction the store applied.
    fn committed(&self, slot: &[u8]) -> Result<Option<Bytes>, Self::Error>;

    /// The open transaction's change of `slot`, when the driver can see
    /// the task's memory (`Some(None)`: it deleted the slot); `None` when
    /// the open transaction did not change it or the driver cannot tell.
    /// A query never answers it: it is there so that a driver showing
    /// more than committed state cannot make a query read it.
    fn open_change(&self, slot: &[u8]) -> Option<Option<Bytes>> {
        let _ = slot;
        None
    }
}

/// An in-memory local store beside its task, as the simulator keeps one:
/// the committed changelog records applied after each commit (S6), by
/// changelog key, and the task's open transaction in sight, so that a
/// query that read it would show.
pub struct StoreBeside<'a> {
    /// The store: changelog key to the slot's committed value.
    pub store: &'a std::collections::BTreeMap<Bytes, Bytes>,
    /// The task the store belongs to.
    pub task: &'a crate::task::Task,
}

impl QueryStore for StoreBeside<'_> {
    type Error = std::convert::Infallible;

    fn committed(&self, slot: &[u8]) -> Result<Option<Bytes>, Self::Error> {
        Ok(self.store.get(slot).cloned())
    }

    fn open_change(&self, slot: &[u8]) -> Option<Option<Bytes>> {
        self.task
            .open_changes()
            .find(|(changed, _)| changed.changelog_key() == slot)
            .map(|(_, value)| value.cloned())
    }
}

/// Why the instance asked answers no state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryRefusal<E> {
    /// Another instance owns the task: ask it.
    NotOwner,
    /// The task's run here has not started.
    NotStarted,
    /// The task is restoring here.
    Restoring {
        /// Changelog records still to restore.
        remaining: u64,
    },
    /// The task's run here is over or ending.
    Ended,
    /// The task runs here without a store.
    NoStore,
    /// The store failed as it was read.
    Store(E),
}

/// What a query of `key` (the record key's bytes) answers on an instance
/// where the key's task stands at `standing` (Q1): the slot's committed
/// state (`None`: the slot holds none, and the stage reads its initial
/// state), or why there is none here.
pub fn answer_query<S: QueryStore>(
    standing: QueryStanding<&S>,
    key: &[u8],
) -> Result<Option<Bytes>, QueryRefusal<S::Error>> {
    let store = match standing {
        QueryStanding::NotOwned => return Err(QueryRefusal::NotOwner),
        QueryStanding::NotStarted => return Err(QueryRefusal::NotStarted),
        QueryStanding::Restoring { remaining } => {
            return Err(QueryRefusal::Restoring { remaining })
        }
        QueryStanding::Ended => return Err(QueryRefusal::Ended),
        QueryStanding::NoStore => return Err(QueryRefusal::NoStore),
        QueryStanding::Serving(store) => store,
    };
    let slot = SlotKey::Key(Bytes::copy_from_slice(key)).changelog_key();
    // Planted bug (Q1, I20): the open transaction's change is answered
    // before the commit that may never come.
    if mutation::active(Mutation::QueryReadsUncommitted) {
        if let Some(open) = store.open_change(&slot) {
            return Ok(open);
        }
    }
    store.committed(&slot).map_err(QueryRefusal::Store)
}
