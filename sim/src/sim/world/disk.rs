//! The local disk of each application instance, as the live runtime uses
//! it for a task's local state store (S6): per task, a store of changelog
//! key to latest value and its checkpoint, written as the runtime writes
//! them, through the core's ledger and restored through the core's
//! decision; and the crash faults a disk suffers.
//!
//! The store's writes reach the operating system when a transaction
//! commits (a process crash keeps them) and survive an OS crash only once
//! synced, which a checkpoint does first. A crash may lose what was not
//! synced, leave the checkpoint before the last or a torn one, leave one
//! of another changelog or ahead of the changelog, or wipe the task's
//! directory. A start restores from what the crash left, as the runtime
//! does, and what it loads into the task's slots is kept for the checker
//! (I19).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use parsley::{check_last_applied, judge_opened, restore_start};
use parsley::{CheckpointFound, CheckpointStep, RecordData, RestoreStart, StoreCheckpoint};
use parsley::{StoreLedger, TaskId, Tp};

/// A key's latest value, in key order.
pub(crate) type Store = BTreeMap<Bytes, Bytes>;

/// A task's checkpoint file as a crash may leave it.
#[derive(Clone, Debug)]
enum CheckpointFile {
    /// Whole: what the ledger wrote.
    Whole(StoreCheckpoint),
    /// Torn or edited: its checksum fails.
    Corrupt,
}

/// The state of a checkpoint's writes partway through: what a crash
/// between its two steps leaves on disk.
#[derive(Clone, Debug)]
struct Torn {
    synced: Option<Store>,
    checkpoint: Option<Option<CheckpointFile>>,
}

/// One task's directory on one instance's disk.
#[derive(Debug)]
struct TaskDisk {
    /// What the OS holds: every batch applied.
    store: Store,
    /// What survives an OS crash: the store as of its last sync.
    synced: Store,
    checkpoint: Option<CheckpointFile>,
    /// The checkpoint before the last one written.
    previous: Option<StoreCheckpoint>,
    /// The disk after the first step of the last checkpoint, while nothing
    /// was written since.
    torn: Option<Torn>,
    /// The running task's account of the store; `None` while no run of the
    /// task uses it.
    ledger: Option<StoreLedger>,
    /// The changelog partition the store reflects.
    changelog: Tp,
}

/// A crash fault of one task's directory, drawn by the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DiskFault {
    /// The OS crashed too: what was not synced is lost (and a checkpoint
    /// whose writes were under way is left after its first step).
    Unsynced,
    /// The checkpoint before the last is back (older than the store).
    OlderCheckpoint,
    /// The checkpoint names offsets beyond the changelog's end (newer than
    /// the store and the changelog: a directory from another life).
    AheadCheckpoint,
    /// The checkpoint's last record is not the changelog's (the changelog
    /// was made anew).
    ForeignRecord,
    /// The checkpoint is torn.
    CorruptCheckpoint,
    /// The task's directory is gone.
    Wiped,
}

impl DiskFault {
    /// Every fault, in the order the world draws them.
    pub(crate) const ALL: [DiskFault; 6] = [
        DiskFault::Unsynced,
        DiskFault::OlderCheckpoint,
        DiskFault::AheadCheckpoint,
        DiskFault::ForeignRecord,
        DiskFault::CorruptCheckpoint,
        DiskFault::Wiped,
    ];

    /// Its name in the trace.
    pub(crate) fn name(self) -> &'static str {
        match self {
            DiskFault::Unsynced => "unsynced writes lost",
            DiskFault::OlderCheckpoint => "an older checkpoint",
            DiskFault::AheadCheckpoint => "a checkpoint ahead of the changelog",
            DiskFault::ForeignRecord => "a checkpoint of another changelog record",
            DiskFault::CorruptCheckpoint => "a torn checkpoint",
            DiskFault::Wiped => "the task's directory wiped",
        }
    }
}

/// What a start loaded into a task's slots through its local store, for
/// I19: every load in order, and the changelog it restored.
#[derive(Clone, Debug)]
pub(crate) struct Restore {
    /// The step of the start.
    pub(crate) step: u64,
    /// The instance and task.
    pub(crate) instance: u32,
    /// The task.
    pub(crate) task: Arc<TaskId>,
    /// Its changelog partition.
    pub(crate) changelog: Tp,
    /// The changelog's last stable offset at the start: every record below
    /// it was decided then.
    pub(crate) upto: u64,
    /// Each slot load, in order: the changelog key and value (`None` a
    /// tombstone).
    pub(crate) loads: Vec<(Bytes, Option<Bytes>)>,
    /// The changelog offset the restore read from.
    pub(crate) from: u64,
    /// Why the store was cleared and rebuilt, if it was.
    pub(crate) rebuilt: Option<String>,
}

/// Every instance's local disk.
#[derive(Debug)]
pub(crate) struct Disks {
    app: String,
    every: usize,
    tasks: BTreeMap<(u32, Arc<TaskId>), TaskDisk>,
}

impl Disks {
    /// Disks on which a running task checkpoints every `every` records.
    pub(crate) fn new(app: &str, every: u32) -> Disks {
        Disks {
            app: app.to_owned(),
            every: every.max(1) as usize,
            tasks: BTreeMap::new(),
        }
    }

    /// The tasks with a directory on `instance`'s disk.
    pub(crate) fn tasks_on(&self, instance: u32) -> Vec<Arc<TaskId>> {
        self.tasks
            .keys()
            .filter(|(on, _)| *on == instance)
            .map(|(_, task)| Arc::clone(task))
            .collect()
    }

    /// The changelog partition of `task`'s store on `instance`.
    pub(crate) fn changelog_of(&self, instance: u32, task: &Arc<TaskId>) -> Option<&Tp> {
        self.tasks
            .get(&(instance, Arc::clone(task)))
            .map(|disk| &disk.changelog)
    }

    /// `task`'s store on `instance`: changelog key to latest value, as of
    /// the last transaction it applied; what a query reads (Q1).
    pub(crate) fn store_of(&self, instance: u32, task: &Arc<TaskId>) -> Option<&Store> {
        self.tasks
            .get(&(instance, Arc::clone(task)))
            .map(|disk| &disk.store)
    }

    /// The changelog keys held by the stores of stage `stage`'s tasks, on
    /// every instance.
    pub(crate) fn keys_of_stage<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a Bytes> {
        self.tasks
            .iter()
            .filter(move |((_, task), _)| &*task.stage == stage)
            .flat_map(|(_, disk)| disk.store.keys())
    }

    /// A run of `task` on `instance` restores its slots through its store:
    /// `records` are its changelog's committed records below `upto` (the
    /// last stable offset), `end` the changelog's high watermark, `load`
    /// puts one record into the task's slots.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restore<E>(
        &mut self,
        step: u64,
        instance: u32,
        task: &Arc<TaskId>,
        changelog: &Tp,
        records: &[(u64, &RecordData)],
        upto: u64,
        end: u64,
        mut load: impl FnMut(u64, &RecordData) -> Result<(), E>,
    ) -> Result<Restore, E> {
        let existed = self.tasks.contains_key(&(instance, Arc::clone(task)));
        let disk = self
            .tasks
            .entry((instance, Arc::clone(task)))
            .or_insert_with(|| TaskDisk {
                store: Store::new(),
                synced: Store::new(),
                checkpoint: None,
                previous: None,
                torn: None,
                ledger: None,
                changelog: changelog.clone(),
            });
        // A run still using the directory (a stale copy on this instance)
        // stops first, with a checkpoint.
        disk.stop();
        let found = match &disk.checkpoint {
            None => CheckpointFound::Missing,
            Some(CheckpointFile::Corrupt) => CheckpointFound::Unreadable(
                "the checkpoint file is corrupt: its checksum does not match its contents".into(),
            ),
            Some(CheckpointFile::Whole(checkpoint)) => CheckpointFound::Found(checkpoint.clone()),
        };
        let topic = changelog.topic.as_str();
        let opened = judge_opened(existed, None, found, &self.app, topic, changelog.partition);
        let start =
            restore_start::<()>(&opened, end, || Ok(disk.store.is_empty())).expect("infallible");
        // The committed records from `offset` on.
        let after = |offset: u64| {
            let at = records.partition_point(|(at, _)| *at < offset);
            &records[at..]
        };
        let (rebuild, tail) = match start {
            RestoreStart::Whole { rebuild } => (rebuild.or(Some(String::new())), records),
            RestoreStart::Check(last) => {
                let tail = after(last.offset);
                let first = tail.first().map(|(offset, record)| (*offset, *record));
                match check_last_applied(last, first) {
                    Ok(()) => (None, &tail[1..]),
                    Err(why) => (Some(why), records),
                }
            }
            RestoreStart::From(offset) => (None, after(offset)),
        };
        let mut loads = Vec::new();
        let rebuilt = match rebuild {
            Some(why) => {
                // Cleared: the checkpoint first, then the store.
                disk.checkpoint = None;
                disk.store.clear();
                disk.synced.clear();
                disk.torn = None;
                (!why.is_empty()).then_some(why)
            }
            None => {
                for (key, value) in &disk.store {
                    let record = RecordData {
                        key: Some(key.clone()),
                        value: Some(value.clone()),
                        headers: Vec::new(),
                        timestamp: 0,
                    };
                    load(0, &record)?;
                    loads.push((key.clone(), Some(value.clone())));
                }
                None
            }
        };
        let checkpointed = match (&disk.checkpoint, &rebuilt) {
            (Some(CheckpointFile::Whole(checkpoint)), None) => Some(checkpoint.clone()),
            _ => None,
        };
        let from = tail.first().map_or(end, |(offset, _)| *offset);
        disk.ledger = Some(StoreLedger::new(
            &self.app,
            topic,
            changelog.partition,
            self.every,
            checkpointed,
        ));
        for (offset, record) in tail {
            load(*offset, record)?;
            if let Some(key) = &record.key {
                loads.push((key.clone(), record.value.clone()));
            }
        }
        let applied: Vec<(u64, Bytes, Option<Bytes>)> = tail
            .iter()
            .filter_map(|(offset, record)| {
                Some((*offset, record.key.clone()?, record.value.clone()))
            })
            .collect();
        disk.apply(&applied);
        let new_store = disk
            .ledger
            .as_ref()
            .is_some_and(|l| l.checkpoint().is_none());
        if rebuilt.is_some() || !tail.is_empty() || new_store {
            disk.checkpoint_now();
        }
        Ok(Restore {
            step,
            instance,
            task: Arc::clone(task),
            changelog: changelog.clone(),
            upto,
            loads,
            from,
            rebuilt,
        })
    }

    /// A run of `task` on `instance` committed a transaction whose
    /// changelog records are `records` (offset, key, value), in changelog
    /// order: the store applies them and checkpoints when due.
    pub(crate) fn committed(
        &mut self,
        instance: u32,
        task: &Arc<TaskId>,
        records: &[(u64, Bytes, Option<Bytes>)],
    ) {
        if let Some(disk) = self.tasks.get_mut(&(instance, Arc::clone(task))) {
            disk.apply(records);
            if disk
                .ledger
                .as_ref()
                .is_some_and(StoreLedger::checkpoint_due)
            {
                disk.checkpoint_now();
            }
        }
    }

    /// A run of `task` on `instance` ended without a crash (fenced, or
    /// stopped on bad input): it checkpoints what its store applied.
    pub(crate) fn stopped(&mut self, instance: u32, task: &Arc<TaskId>) {
        if let Some(disk) = self.tasks.get_mut(&(instance, Arc::clone(task))) {
            disk.stop();
        }
    }

    /// `instance` crashed: its runs end without a checkpoint, and `fault`
    /// (if any) befalls `task`'s directory there.
    pub(crate) fn crashed(&mut self, instance: u32) {
        for ((on, _), disk) in self.tasks.iter_mut() {
            if *on == instance {
                disk.ledger = None;
            }
        }
    }

    /// `fault` befalls `task`'s directory on `instance`, whose changelog
    /// ends at `end`.
    pub(crate) fn fault(&mut self, instance: u32, task: &Arc<TaskId>, fault: DiskFault, end: u64) {
        let key = (instance, Arc::clone(task));
        let Some(disk) = self.tasks.get_mut(&key) else {
            return;
        };
        match fault {
            DiskFault::Unsynced => {
                if let Some(torn) = disk.torn.take() {
                    if let Some(synced) = torn.synced {
                        disk.synced = synced;
                    }
                    if let Some(checkpoint) = torn.checkpoint {
                        disk.checkpoint = checkpoint;
                    }
                }
                disk.store = disk.synced.clone();
            }
            DiskFault::OlderCheckpoint => {
                disk.checkpoint = disk.previous.clone().map(CheckpointFile::Whole);
            }
            DiskFault::AheadCheckpoint => {
                if let Some(CheckpointFile::Whole(checkpoint)) = &mut disk.checkpoint {
                    checkpoint.offset = end + 2;
                    if let Some(last) = &mut checkpoint.last {
                        last.offset = end + 1;
                    }
                }
            }
            DiskFault::ForeignRecord => {
                if let Some(CheckpointFile::Whole(checkpoint)) = &mut disk.checkpoint {
                    if let Some(last) = &mut checkpoint.last {
                        last.fingerprint = !last.fingerprint;
                    }
                }
            }
            DiskFault::CorruptCheckpoint => {
                if disk.checkpoint.is_some() {
                    disk.checkpoint = Some(CheckpointFile::Corrupt);
                }
            }
            DiskFault::Wiped => {
                self.tasks.remove(&key);
            }
        }
    }
}

impl Disks {
    /// A digest of every directory's state, for the explorer's world digest.
    pub(crate) fn digest(&self, hasher: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        let checkpoint = |checkpoint: Option<&StoreCheckpoint>, hasher: &mut _| {
            checkpoint
                .map(|c| (c.offset, c.last.map(|last| (last.offset, last.fingerprint))))
                .hash(hasher)
        };
        let file = |file: &Option<CheckpointFile>, hasher: &mut _| match file {
            None => 0u8.hash(hasher),
            Some(CheckpointFile::Corrupt) => 1u8.hash(hasher),
            Some(CheckpointFile::Whole(whole)) => {
                2u8.hash(hasher);
                checkpoint(Some(whole), hasher);
            }
        };
        for ((instance, task), disk) in &self.tasks {
            (instance, task).hash(hasher);
            disk.store.hash(hasher);
            disk.synced.hash(hasher);
            file(&disk.checkpoint, hasher);
            checkpoint(disk.previous.as_ref(), hasher);
            match &disk.torn {
                None => 0u8.hash(hasher),
                Some(torn) => {
                    1u8.hash(hasher);
                    torn.synced.hash(hasher);
                    match &torn.checkpoint {
                        None => 0u8.hash(hasher),
                        Some(before) => {
                            1u8.hash(hasher);
                            file(before, hasher);
                        }
                    }
                }
            }
            match &disk.ledger {
                None => 0u8.hash(hasher),
                Some(ledger) => {
                    1u8.hash(hasher);
                    ledger.next_offset().hash(hasher);
                    ledger.checkpoint_due().hash(hasher);
                    checkpoint(ledger.checkpoint(), hasher);
                }
            }
        }
    }
}

impl TaskDisk {
    fn apply(&mut self, records: &[(u64, Bytes, Option<Bytes>)]) {
        let Some((last_offset, key, value)) = records.last() else {
            return;
        };
        for (_, key, value) in records {
            match value {
                Some(value) => self.store.insert(key.clone(), value.clone()),
                None => self.store.remove(key),
            };
        }
        self.torn = None;
        if let Some(ledger) = &mut self.ledger {
            ledger.applied(records.len(), *last_offset, key, value.as_deref());
        }
    }

    /// Writes a checkpoint through the core's ledger, keeping what a crash
    /// after its first step would leave.
    fn checkpoint_now(&mut self) {
        let Some(mut ledger) = self.ledger.take() else {
            return;
        };
        let mut first = true;
        let mut torn = Torn {
            synced: None,
            checkpoint: None,
        };
        let _ = ledger.write_checkpoint(|step| -> Result<(), ()> {
            match step {
                CheckpointStep::SyncStore => {
                    let before = std::mem::replace(&mut self.synced, self.store.clone());
                    if !first {
                        torn.synced = Some(before);
                    }
                }
                CheckpointStep::Write(checkpoint) => {
                    let before = self
                        .checkpoint
                        .replace(CheckpointFile::Whole(checkpoint.clone()));
                    if let Some(CheckpointFile::Whole(old)) = &before {
                        self.previous = Some(old.clone());
                    }
                    if !first {
                        torn.checkpoint = Some(before);
                    }
                }
            }
            first = false;
            Ok(())
        });
        self.torn = Some(torn);
        self.ledger = Some(ledger);
    }

    /// The run using the directory ends gracefully: a checkpoint, if it
    /// applied anything since the last.
    fn stop(&mut self) {
        if self.ledger.as_ref().is_some_and(|ledger| {
            ledger.checkpoint().map(|c| c.offset) != Some(ledger.next_offset())
        }) {
            self.checkpoint_now();
        }
        self.ledger = None;
    }
}
