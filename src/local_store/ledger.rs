//! A running task's account of its local store: what it applied, when a
//! checkpoint is due, and the order of a checkpoint's writes (S6).

use crate::mutation::{self, Mutation};

use super::checkpoint::{record_fingerprint, LastApplied, StoreCheckpoint};

/// One write of a checkpoint, in the order a driver must make them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointStep<'a> {
    /// Make everything the store applied durable (an fsync of the store).
    SyncStore,
    /// Replace the checkpoint with this one, whole or not at all.
    Write(&'a StoreCheckpoint),
}

/// What a task's local store reflects of its changelog partition, and
/// when it checkpoints: every `every` records applied, and at the first
/// records after a checkpoint that names none (one a start could not
/// check the store against).
#[derive(Clone, Debug)]
pub struct StoreLedger {
    app: String,
    changelog: String,
    partition: u32,
    every: usize,
    /// The checkpoint last written or read, if any.
    checkpoint: Option<StoreCheckpoint>,
    next_offset: u64,
    last: Option<LastApplied>,
    since_checkpoint: usize,
}

impl StoreLedger {
    /// The ledger of a store for changelog partition
    /// `changelog`/`partition` of application `app`, whose trusted
    /// checkpoint is `checkpoint`.
    pub fn new(
        app: &str,
        changelog: &str,
        partition: u32,
        every: usize,
        checkpoint: Option<StoreCheckpoint>,
    ) -> StoreLedger {
        StoreLedger {
            app: app.to_owned(),
            changelog: changelog.to_owned(),
            partition,
            every: every.max(1),
            next_offset: checkpoint.as_ref().map_or(0, |c| c.offset),
            last: checkpoint.as_ref().and_then(|c| c.last),
            checkpoint,
            since_checkpoint: 0,
        }
    }

    /// The checkpoint last written or read.
    pub fn checkpoint(&self) -> Option<&StoreCheckpoint> {
        self.checkpoint.as_ref()
    }

    /// The first changelog offset the store does not reflect.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// The store applied `count` changelog records as one batch, the last
    /// at `last_offset` with key `key` and value `value`.
    pub fn applied(&mut self, count: usize, last_offset: u64, key: &[u8], value: Option<&[u8]>) {
        if count == 0 {
            return;
        }
        self.last = Some(LastApplied {
            offset: last_offset,
            fingerprint: record_fingerprint(key, value),
        });
        self.next_offset = last_offset + 1;
        self.since_checkpoint += count;
    }

    /// Whether a checkpoint is due.
    pub fn checkpoint_due(&self) -> bool {
        self.since_checkpoint >= self.every
            || (self.since_checkpoint > 0
                && self
                    .checkpoint
                    .as_ref()
                    .is_some_and(|checkpoint| checkpoint.last.is_none()))
    }

    /// Checkpoints what the store applied, through `step`: first the store
    /// is made durable, then the checkpoint replaced. The other order
    /// would let a crash between the two leave a checkpoint vouching for
    /// writes the store lost.
    pub fn write_checkpoint<E>(
        &mut self,
        mut step: impl FnMut(CheckpointStep<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let checkpoint = StoreCheckpoint {
            app: self.app.clone(),
            changelog: self.changelog.clone(),
            partition: self.partition,
            offset: self.next_offset,
            last: self.last,
        };
        if mutation::active(Mutation::CheckpointBeforeFlush) {
            step(CheckpointStep::Write(&checkpoint))?;
            step(CheckpointStep::SyncStore)?;
        } else {
            step(CheckpointStep::SyncStore)?;
            step(CheckpointStep::Write(&checkpoint))?;
        }
        self.checkpoint = Some(checkpoint);
        self.since_checkpoint = 0;
        Ok(())
    }

    /// The store and its checkpoint were cleared.
    pub fn cleared(&mut self) {
        self.checkpoint = None;
        self.next_offset = 0;
        self.last = None;
        self.since_checkpoint = 0;
    }
}
