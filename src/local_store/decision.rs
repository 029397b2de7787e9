//! What a start does with the local store it finds (S6): trust its
//! checkpoint and restore the changelog after it, or clear the store and
//! rebuild it from the whole changelog, with the reason a log line gives.
//! Nothing here yields wrong state from a store it cannot vouch for.

use crate::RecordData;

use super::checkpoint::{record_fingerprint, LastApplied, StoreCheckpoint};

/// What reading a task's checkpoint found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointFound {
    /// No checkpoint: never written, or removed.
    Missing,
    /// A checkpoint that could not be read or is corrupt, and why.
    Unreadable(String),
    /// A checkpoint read whole.
    Found(StoreCheckpoint),
}

/// The store a start opened: the checkpoint it may trust, or why it may
/// trust none of the store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// The checkpoint, when it is this task's and its store exists.
    pub checkpoint: Option<StoreCheckpoint>,
    /// Why the store cannot be trusted, if it cannot.
    pub distrust: Option<String>,
}

/// Judges what a start found: whether the store's directory held a store
/// before (`existed`), why it would not open if it would not (the driver
/// then made it anew), and the checkpoint read, for changelog partition
/// `changelog`/`partition` of application `app`.
pub fn judge_opened(
    existed: bool,
    did_not_open: Option<String>,
    found: CheckpointFound,
    app: &str,
    changelog: &str,
    partition: u32,
) -> Opened {
    let mut distrust = did_not_open;
    let checkpoint = match found {
        CheckpointFound::Found(_) if !existed => {
            distrust.get_or_insert_with(|| "the store is missing".to_owned());
            None
        }
        CheckpointFound::Found(checkpoint)
            if checkpoint.app == app
                && checkpoint.changelog == changelog
                && checkpoint.partition == partition =>
        {
            Some(checkpoint)
        }
        CheckpointFound::Found(other) => {
            distrust.get_or_insert_with(|| {
                format!(
                    "the checkpoint is of application `{}`, changelog {}-{}",
                    other.app, other.changelog, other.partition
                )
            });
            None
        }
        // A new store needs none: it is built from the whole changelog.
        CheckpointFound::Missing if !existed => None,
        CheckpointFound::Missing => {
            distrust.get_or_insert_with(|| "there is no checkpoint".to_owned());
            None
        }
        CheckpointFound::Unreadable(why) => {
            distrust.get_or_insert(why);
            None
        }
    };
    Opened {
        checkpoint,
        distrust,
    }
}

/// Where a start's restore begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreStart {
    /// The whole changelog into an empty store: cleared first when the
    /// store cannot be trusted (`Some(why)`, logged), or new (`None`).
    Whole {
        /// Why the store is cleared and rebuilt.
        rebuild: Option<String>,
    },
    /// Read the changelog from the last record the store applied, check it
    /// is that record ([`check_last_applied`]), and restore what follows it.
    Check(LastApplied),
    /// The checkpoint names no record and the store is empty: restore the
    /// changelog from this offset.
    From(u64),
}

/// Where the restore of a store opened as `opened` begins, the changelog
/// partition ending at `changelog_end` (its high watermark);
/// `store_is_empty` is asked only when the checkpoint names no record.
pub fn restore_start<E>(
    opened: &Opened,
    changelog_end: u64,
    store_is_empty: impl FnOnce() -> Result<bool, E>,
) -> Result<RestoreStart, E> {
    if let Some(why) = &opened.distrust {
        return Ok(RestoreStart::Whole {
            rebuild: Some(why.clone()),
        });
    }
    let Some(checkpoint) = &opened.checkpoint else {
        return Ok(RestoreStart::Whole { rebuild: None });
    };
    if checkpoint.offset > changelog_end {
        return Ok(RestoreStart::Whole {
            rebuild: Some(format!(
                "the checkpoint (offset {}) is ahead of the changelog, which ends at {changelog_end}",
                checkpoint.offset
            )),
        });
    }
    if let Some(last) = checkpoint.last {
        return Ok(RestoreStart::Check(last));
    }
    if store_is_empty()? {
        Ok(RestoreStart::From(checkpoint.offset))
    } else {
        Ok(RestoreStart::Whole {
            rebuild: Some(
                "the store holds slots but its checkpoint names no changelog record to check them against"
                    .into(),
            ),
        })
    }
}

/// Checks the first committed changelog record at or after `last.offset`
/// (`first`: its offset and the record; `None` when there is none) is the
/// record the store last applied: `Err` says why the store must be
/// rebuilt instead.
pub fn check_last_applied(
    last: LastApplied,
    first: Option<(u64, &RecordData)>,
) -> Result<(), String> {
    match first {
        Some((offset, record))
            if offset == last.offset
                && record.key.as_ref().is_some_and(|key| {
                    record_fingerprint(key, record.value.as_deref()) == last.fingerprint
                }) =>
        {
            Ok(())
        }
        Some((offset, ..)) if offset == last.offset => Err(format!(
            "the changelog's record at offset {offset} is not the one the store last applied (the topic was recreated?)"
        )),
        _ => Err(format!(
            "the changelog no longer holds offset {}, the last record the store applied, to check the store against",
            last.offset
        )),
    }
}
