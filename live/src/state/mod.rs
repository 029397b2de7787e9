//! A task's local state store: its changelog partition's latest value per
//! key, on disk, so that a start restores only the changelog after the
//! store's checkpoint instead of the whole of it.
//!
//! The store holds committed state only. The runtime applies a
//! transaction's changelog records to it after the transaction commits,
//! as one atomic batch, in changelog order; an abort or a crash before the
//! commit leaves nothing of the transaction in it (what KIP-892 gets for
//! Kafka Streams by buffering writes). So after a crash the store reflects
//! a prefix of the committed changelog that reaches at least its
//! checkpoint ([`checkpoint`]), and restoring the changelog from the
//! checkpoint's offset on (records already applied are applied again, the
//! last value per key winning) brings it to the changelog's end.
//!
//! Each task has a directory of its own, `<state dir>/<app>/<stage>-<partition>`,
//! holding the store (`store/`, an [`fjall`] database: a pure-Rust LSM tree
//! whose journal keeps each write batch atomic) and the checkpoint file.
//! The store's own lock keeps two runs of a task on one machine from
//! using the directory at once ([`StateError::Locked`]).
//!
//! A start checks the store before trusting it ([`restore`]): a missing
//! or unreadable checkpoint, a store that is missing or will not open, a
//! checkpoint of another application or changelog, a checkpoint beyond
//! the changelog's end, a changelog whose record at the checkpoint's last
//! applied offset is not the one the store applied (or is gone), a store
//! that fails as it is read, or a stored value the stage cannot read,
//! each makes the task clear the store and rebuild it from the whole
//! changelog, with one log line saying why. None of them yields wrong state.
//! What to trust, where to restore from and the order of a checkpoint's
//! writes are the core's (`parsley::restore_start`, `parsley::StoreLedger`,
//! S6), shared with the simulator's model of a local disk; this module does
//! the I/O.

pub mod checkpoint;

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use parsley::TaskId;
use parsley::{ConsumedRecord, RecordData};

use parsley::{check_last_applied, judge_opened, restore_start};
use parsley::{CheckpointFound, CheckpointStep, Opened, RestoreStart, StoreLedger};

use checkpoint::{Checkpoint, CheckpointFile, ReadError};

/// The default root of local state: `parsley` in the system's temporary
/// directory, as Kafka Streams' `state.dir` defaults to `kafka-streams`
/// there. Each application has a directory of its own under it.
pub fn default_state_dir() -> PathBuf {
    std::env::temp_dir().join("parsley")
}

/// Task `id`'s directory under the state root `root`.
pub fn task_dir(root: &Path, app: &str, id: &TaskId) -> PathBuf {
    root.join(app)
        .join(format!("{}-{}", id.stage, id.partition))
}

/// The store's directory inside a task's directory.
const STORE: &str = "store";
/// The store's one keyspace: changelog key to latest value.
const KEYSPACE: &str = "changelog";
/// How many changelog records a restore applies per batch.
const RESTORE_BATCH: usize = 10_000;
/// How many changelog records a running task applies between two
/// checkpoints (each one an fsync of the store and of the file) by default
/// ([`RuntimeConfig::checkpoint_every`](crate::RuntimeConfig)); a stop
/// checkpoints whatever the count.
pub const CHECKPOINT_EVERY: usize = 10_000;

/// Why a task's local store could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Another run of the task on this machine holds the store (a run
    /// still stopping, or another instance sharing the state directory).
    #[error("the local store is in use by another run of the task")]
    Locked,
    /// The store or its directory failed.
    #[error("the local store failed: {0}")]
    Store(String),
    /// The checkpoint could not be written or removed.
    #[error("the checkpoint could not be written: {0}")]
    Checkpoint(#[source] std::io::Error),
}

impl StateError {
    fn store(error: impl std::fmt::Display) -> StateError {
        StateError::Store(error.to_string())
    }
}

/// A task's open local store.
pub struct LocalStore {
    dir: PathBuf,
    db: fjall::Database,
    changes: fjall::Keyspace,
    /// What the start found: the checkpoint it may trust, or why not.
    opened: Opened,
    /// What the store applied and when it checkpoints.
    ledger: StoreLedger,
}

/// Reads a task's local store from another thread ([`LocalStore::reader`]).
#[derive(Clone)]
pub struct StoreReader(fjall::Keyspace);

impl StoreReader {
    /// The committed value of the slot under changelog key `key`; `None`
    /// when the slot holds none.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, StateError> {
        let value = self.0.get(key).map_err(StateError::store)?;
        Ok(value.map(|value| Bytes::copy_from_slice(&value)))
    }
}

/// A query reads the committed store; the task's open transaction is in
/// the task loop's memory, out of a query's sight (Q1).
impl parsley::QueryStore for StoreReader {
    type Error = StateError;

    fn committed(&self, slot: &[u8]) -> Result<Option<Bytes>, StateError> {
        self.get(slot)
    }
}

impl std::fmt::Debug for StoreReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreReader")
    }
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Slots loaded from the local store.
    pub from_store: usize,
    /// Changelog records read and applied.
    pub from_changelog: usize,
    /// The offset the changelog was read from.
    pub changelog_from: u64,
    /// Why the store was cleared and rebuilt, if it was.
    pub rebuilt: Option<String>,
}

/// Where a restore puts what it reads: the task's slots.
pub trait Slots {
    /// The error of a changelog record the slots refused.
    type Error;
    /// Loads the changelog record at `offset`.
    fn load(&mut self, offset: u64, record: &RecordData) -> Result<(), Self::Error>;
    /// Loads one slot from the store, as a changelog record; `Err` says
    /// why the slots refused it.
    fn load_stored(&mut self, record: &RecordData) -> Result<(), String>;
    /// Forgets everything loaded so far.
    fn reset(&mut self) -> Result<(), Self::Error>;
}

/// Why a restore stopped.
#[derive(Debug)]
pub enum RestoreError<F, S> {
    /// Reading the changelog failed.
    Fetch(F),
    /// The slots refused a changelog record.
    Slots(S),
    /// The store failed.
    State(StateError),
}

impl<F, S> From<StateError> for RestoreError<F, S> {
    fn from(error: StateError) -> Self {
        RestoreError::State(error)
    }
}

impl LocalStore {
    /// [`LocalStore::open_checkpointing`] every [`CHECKPOINT_EVERY`]
    /// records.
    #[cfg(test)]
    pub fn open(
        dir: &Path,
        app: &str,
        changelog: &str,
        partition: u32,
    ) -> Result<LocalStore, StateError> {
        LocalStore::open_checkpointing(dir, app, changelog, partition, CHECKPOINT_EVERY)
    }

    /// Opens (or creates) the store in task directory `dir` for changelog
    /// partition `changelog`/`partition` of application `app`,
    /// checkpointing every `every` changelog records applied (at least 1).
    /// A store that does not open is removed and made anew; whatever makes
    /// it untrustworthy is kept for [`restore`] to log.
    pub fn open_checkpointing(
        dir: &Path,
        app: &str,
        changelog: &str,
        partition: u32,
        every: usize,
    ) -> Result<LocalStore, StateError> {
        fs::create_dir_all(dir).map_err(StateError::store)?;
        let existed = dir.join(STORE).exists();
        let mut distrust = None;
        let (db, changes) = match open_db(dir) {
            Ok(opened) => opened,
            Err(fjall::Error::Locked) => return Err(StateError::Locked),
            Err(error) => {
                distrust = Some(format!("the store did not open ({error})"));
                Checkpoint::remove(dir).map_err(StateError::Checkpoint)?;
                fs::remove_dir_all(dir.join(STORE)).map_err(StateError::store)?;
                open_db(dir).map_err(|error| match error {
                    fjall::Error::Locked => StateError::Locked,
                    error => StateError::store(error),
                })?
            }
        };
        // Read under the store's lock: no other run of the task writes it.
        let found = match Checkpoint::read(dir) {
            Ok(checkpoint) => CheckpointFound::Found(checkpoint),
            Err(ReadError::Missing) => CheckpointFound::Missing,
            Err(error) => CheckpointFound::Unreadable(error.to_string()),
        };
        let opened = judge_opened(existed, distrust, found, app, changelog, partition);
        let ledger = StoreLedger::new(app, changelog, partition, every, opened.checkpoint.clone());
        Ok(LocalStore {
            dir: dir.to_owned(),
            db,
            changes,
            opened,
            ledger,
        })
    }

    /// A reader of the store's slots for interactive queries, usable from
    /// another thread. The store holds committed state only, so neither
    /// does a reader see an open transaction's changes. Drop it before the
    /// store: it keeps the store's directory locked.
    pub fn reader(&self) -> StoreReader {
        StoreReader(self.changes.clone())
    }

    /// The task's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first changelog offset the store does not reflect.
    #[cfg(test)]
    pub fn next_offset(&self) -> u64 {
        self.ledger.next_offset()
    }

    /// Whether a checkpoint is due: enough records applied since the
    /// last, or the first records applied since a checkpoint that names
    /// no record (a store built from an empty changelog), which a start
    /// could not check the store against.
    pub fn checkpoint_due(&self) -> bool {
        self.ledger.checkpoint_due()
    }

    /// Applies the changelog records of one committed transaction (or one
    /// chunk of a restore), `(key, value)` in changelog order, the last at
    /// offset `last_offset`, as one atomic batch. Written to the operating
    /// system but not synced: an OS crash may lose it, never half of it,
    /// and the checkpoint does not claim it until [`LocalStore::checkpoint`].
    pub fn apply(
        &mut self,
        records: &[(Bytes, Option<Bytes>)],
        last_offset: u64,
    ) -> Result<(), StateError> {
        let Some((key, value)) = records.last() else {
            return Ok(());
        };
        // Handed to the operating system at once (not synced): a process
        // crash loses none of it.
        let mut batch = self.db.batch().durability(Some(fjall::PersistMode::Buffer));
        for (key, value) in records {
            match value {
                Some(value) => batch.insert(&self.changes, key.as_ref(), value.as_ref()),
                None => batch.remove(&self.changes, key.as_ref()),
            }
        }
        batch.commit().map_err(StateError::store)?;
        self.ledger
            .applied(records.len(), last_offset, key, value.as_deref());
        Ok(())
    }

    /// Makes what the store applied durable, then records it in the
    /// checkpoint (written whole or not at all).
    pub fn checkpoint(&mut self) -> Result<(), StateError> {
        let (db, dir) = (&self.db, &self.dir);
        self.ledger.write_checkpoint(|step| match step {
            CheckpointStep::SyncStore => db
                .persist(fjall::PersistMode::SyncAll)
                .map_err(StateError::store),
            CheckpointStep::Write(checkpoint) => {
                checkpoint.write(dir).map_err(StateError::Checkpoint)
            }
        })
    }

    /// Every stored slot, as a changelog record.
    fn entries(&self) -> impl Iterator<Item = Result<RecordData, StateError>> + '_ {
        self.changes.iter().map(|guard| {
            let (key, value) = guard.into_inner().map_err(StateError::store)?;
            Ok(RecordData {
                key: Some(Bytes::copy_from_slice(&key)),
                value: Some(Bytes::copy_from_slice(&value)),
                headers: Vec::new(),
                timestamp: 0,
            })
        })
    }

    fn is_empty(&self) -> Result<bool, StateError> {
        self.changes.is_empty().map_err(StateError::store)
    }

    /// Clears the store: first the checkpoint, so that a crash in between
    /// leaves a store no checkpoint vouches for.
    fn clear(&mut self) -> Result<(), StateError> {
        Checkpoint::remove(&self.dir).map_err(StateError::Checkpoint)?;
        self.ledger.cleared();
        self.changes.clear().map_err(StateError::store)?;
        Ok(())
    }
}

/// The memory a task's store may use for its block cache, and again for
/// its write buffer (fjall's defaults, sized for one database per
/// process, are 32 and 64 MiB).
const STORE_MEMORY: u64 = 8 << 20;

fn open_db(dir: &Path) -> Result<(fjall::Database, fjall::Keyspace), fjall::Error> {
    // One background worker per task's store: a store's flushes and
    // compactions are small, and an instance runs many tasks.
    let db = fjall::Database::builder(dir.join(STORE))
        .worker_threads(1)
        .cache_size(STORE_MEMORY)
        .open()?;
    let changes = db.keyspace(KEYSPACE, || {
        fjall::KeyspaceCreateOptions::default().max_memtable_size(STORE_MEMORY)
    })?;
    Ok((db, changes))
}

/// Restores a task's slots from its local store and the changelog after
/// the store's checkpoint, and brings the store up to the changelog's end.
///
/// `high_watermark` is the changelog partition's end; `fetch(from)` reads
/// its committed records from offset `from` to that end. A store that
/// cannot be trusted (see the module's docs) is cleared, `slots` reset,
/// and the whole changelog read instead; one warning says why.
pub fn restore<F, S: Slots>(
    store: &mut LocalStore,
    task: &TaskId,
    high_watermark: u64,
    mut fetch: impl FnMut(u64) -> Result<Vec<ConsumedRecord>, F>,
    slots: &mut S,
) -> Result<Restored, RestoreError<F, S::Error>> {
    let opened = std::mem::take(&mut store.opened);
    let start = restore_start(&opened, high_watermark, || store.is_empty())?;
    let mut distrust = None;
    let mut tail = Vec::new();
    let mut from = 0;
    match start {
        // A new store: built from the whole changelog, without a warning.
        RestoreStart::Whole { rebuild: None } => {
            tail = fetch(0).map_err(RestoreError::Fetch)?;
        }
        RestoreStart::Whole { rebuild } => distrust = rebuild,
        RestoreStart::Check(last) => {
            // Read from the last record the store applied, to check it is
            // this changelog's; applying it again changes nothing.
            let mut fetched = fetch(last.offset).map_err(RestoreError::Fetch)?;
            let first = fetched.first().map(|record| (record.offset, &record.data));
            match check_last_applied(last, first) {
                Ok(()) => {
                    fetched.remove(0);
                    tail = fetched;
                    from = last.offset + 1;
                }
                Err(why) => distrust = Some(why),
            }
        }
        RestoreStart::From(offset) => {
            from = offset;
            tail = fetch(from).map_err(RestoreError::Fetch)?;
        }
    }
    let mut from_store = 0;
    if distrust.is_none() {
        for record in store.entries() {
            let record = match record {
                Ok(record) => record,
                Err(error) => {
                    distrust = Some(format!("the store could not be read ({error})"));
                    break;
                }
            };
            if let Err(why) = slots.load_stored(&record) {
                distrust = Some(format!(
                    "the store holds a slot the stage cannot read: {why}"
                ));
                break;
            }
            from_store += 1;
        }
    }
    let rebuilt = distrust.is_some();
    if let Some(why) = &distrust {
        tracing::warn!(
            task = %task,
            dir = %store.dir.display(),
            why = %why,
            "local state store cleared: rebuilding it from the whole changelog"
        );
        store.clear()?;
        slots.reset().map_err(RestoreError::Slots)?;
        from_store = 0;
        from = 0;
        tail = fetch(0).map_err(RestoreError::Fetch)?;
    }
    for record in &tail {
        slots
            .load(record.offset, &record.data)
            .map_err(RestoreError::Slots)?;
    }
    for chunk in tail.chunks(RESTORE_BATCH) {
        let records: Vec<(Bytes, Option<Bytes>)> = chunk
            .iter()
            .filter_map(|record| Some((record.data.key.clone()?, record.data.value.clone())))
            .collect();
        let last = chunk.last().map_or(0, |record| record.offset);
        store.apply(&records, last)?;
    }
    if rebuilt || !tail.is_empty() || store.ledger.checkpoint().is_none() {
        store.checkpoint()?;
    }
    Ok(Restored {
        from_store,
        from_changelog: tail.len(),
        changelog_from: from,
        rebuilt: distrust,
    })
}

#[cfg(test)]
pub(crate) mod tests;
