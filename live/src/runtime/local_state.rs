//! A starting task's restore through its local store ([`crate::state`]):
//! the store's slots, then the changelog after its checkpoint, read with
//! a consumer of the task's own made only when there is something to read.

use std::sync::Arc;

use parsley::App;
use parsley::Assembly;
use parsley::Tp;
use parsley::{ConsumedRecord, RecordData};
use parsley::{Task, TaskError, TaskId};

use super::super::client::{fetch_visible, Isolation, LogEnds};
use super::super::state::{self, LocalStore, RestoreError, Restored, Slots, StateError};
use super::figures::Figures;
use super::shared_clients::consumer_for;
use super::task_loop::drop_elsewhere;
use super::{RuntimeConfig, RuntimeError};

/// The task's slots, as a restore fills them; a reset makes the task
/// anew, with no slot restored.
struct TaskSlots<'a> {
    task: &'a mut Task,
    fresh: &'a dyn Fn() -> Result<Task, TaskError>,
}

impl Slots for TaskSlots<'_> {
    type Error = TaskError;

    fn load(&mut self, offset: u64, record: &RecordData) -> Result<(), TaskError> {
        self.task.restore_state(offset, record)
    }

    fn load_stored(&mut self, record: &RecordData) -> Result<(), String> {
        // The core names a changelog offset in its error; a stored slot
        // has none, so only the reason is kept.
        self.task
            .restore_state(0, record)
            .map_err(|error| match error {
                TaskError::BadChangelog { reason, .. } => reason,
                other => other.to_string(),
            })
    }

    fn reset(&mut self) -> Result<(), TaskError> {
        *self.task = (self.fresh)()?;
        Ok(())
    }
}

/// Opens task `id`'s local store and restores `task`'s slots through it
/// (S5): the store, then `changelog` after the store's checkpoint, or the
/// whole changelog into a cleared store when the store cannot be trusted.
///
/// A store that another run of the task on this machine still holds (a
/// zombie that has yet to learn of its fence, in an instance sharing the
/// state directory) is not waited for: this run restores the whole
/// changelog and keeps its state in memory only (`None`), with a warning.
// The handles a task's start holds; a struct of them would only be
// unpacked here.
#[allow(clippy::too_many_arguments)]
pub(super) fn restore_local(
    app: &App,
    assembly: &Assembly,
    id: &TaskId,
    config: &RuntimeConfig,
    figures: &Figures,
    log_ends: &Arc<LogEnds>,
    changelog: &Tp,
    task: &mut Task,
) -> Result<(Option<LocalStore>, Restored), RuntimeError> {
    let dir = state::task_dir(&config.state_dir, app.id(), id);
    let state_error = |source| RuntimeError::State {
        task: id.clone(),
        dir: dir.clone(),
        source,
    };
    let opened = LocalStore::open_checkpointing(
        &dir,
        app.id(),
        changelog.topic.as_str(),
        changelog.partition,
        config.checkpoint_every,
    );
    let end = log_ends.watermarks(changelog)?.high_watermark;
    let group = task.group().to_owned();
    let mut restorer = None;
    let mut fetch = |from: u64| -> Result<Vec<ConsumedRecord>, RuntimeError> {
        if from >= end {
            return Ok(Vec::new());
        }
        figures.restoring(id, end - from);
        // A consumer of its own: restoring assigns the changelog alone,
        // which the stage's shared consumer must not.
        let consumer = match &restorer {
            Some(consumer) => consumer,
            None => &*restorer.insert(Arc::new(consumer_for(&config.live, &group)?)),
        };
        let fetched = fetch_visible(
            consumer,
            &group,
            log_ends,
            Isolation::ReadCommitted,
            changelog,
            from,
            config.live.timeout,
        )?;
        Ok(fetched.records)
    };
    let fresh = || Task::new(app, assembly, &id.stage, id.partition, config.task);
    let mut slots = TaskSlots {
        task,
        fresh: &fresh,
    };
    let restored = match opened {
        Ok(mut store) => state::restore(&mut store, id, end, &mut fetch, &mut slots)
            .map(|restored| (Some(store), restored)),
        Err(StateError::Locked) => {
            tracing::warn!(
                task = %id,
                dir = %dir.display(),
                "the local store is held by another run of the task on this machine: restoring the whole changelog, keeping the state in memory only for this run"
            );
            in_memory(&mut fetch, &mut slots)
        }
        Err(error) => Err(RestoreError::State(error)),
    };
    if let Some(restorer) = restorer {
        drop_elsewhere(restorer);
    }
    figures.restoring(id, 0);
    match restored {
        Ok(restored) => Ok(restored),
        Err(RestoreError::Fetch(error)) => Err(error),
        Err(RestoreError::Slots(error)) => Err(error.into()),
        Err(RestoreError::State(error)) => Err(state_error(error)),
    }
}

/// The whole changelog into the slots, with no store.
fn in_memory<F, S: Slots>(
    fetch: &mut impl FnMut(u64) -> Result<Vec<ConsumedRecord>, F>,
    slots: &mut S,
) -> Result<(Option<LocalStore>, Restored), RestoreError<F, S::Error>> {
    let records = fetch(0).map_err(RestoreError::Fetch)?;
    for record in &records {
        slots
            .load(record.offset, &record.data)
            .map_err(RestoreError::Slots)?;
    }
    Ok((
        None,
        Restored {
            from_store: 0,
            from_changelog: records.len(),
            changelog_from: 0,
            rebuilt: None,
        },
    ))
}
