//! I19: every restore through a local store (S6) loaded into the task's
//! slots exactly the state its committed changelog implies.
//!
//! The reference is the checker's own: the changelog partition's committed
//! records below where the restore read to, read back from the log at the
//! end of the run (every record below that offset was decided when the
//! task started: the task's new producer had ended its open transaction),
//! folded key by key, the latest value winning and a tombstone deleting.
//! It shares nothing with the restore it judges (the core's decision, the
//! world's disk model): only the slot loads the world recorded, folded the
//! same way, are compared with it.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{Checker, Invariant};
use crate::sim::world::disk::Restore;

impl Checker<'_> {
    /// I19 for every restore of the run.
    pub(super) fn check_restores(&mut self, restores: &[Restore]) {
        for restore in restores {
            let Ok(log) = self.input.cluster.log(&restore.changelog) else {
                continue;
            };
            let mut expected: BTreeMap<&[u8], &Bytes> = BTreeMap::new();
            for (offset, record) in log.read_committed() {
                if offset >= restore.upto {
                    break;
                }
                let Some(key) = &record.key else { continue };
                match &record.value {
                    Some(value) => expected.insert(key, value),
                    None => expected.remove(key.as_ref()),
                };
            }
            let mut loaded: BTreeMap<&[u8], &Bytes> = BTreeMap::new();
            for (key, value) in &restore.loads {
                match value {
                    Some(value) => loaded.insert(key, value),
                    None => loaded.remove(key.as_ref()),
                };
            }
            if loaded == expected {
                continue;
            }
            let differs = expected
                .iter()
                .find(|(key, value)| loaded.get(*key) != Some(value))
                .map(|(key, value)| {
                    format!(
                        "the committed slot {} was restored as {} where the changelog's latest is {}",
                        parsley::bytes_for_humans(key),
                        loaded
                            .get(key)
                            .map_or("nothing".to_owned(), |v| parsley::bytes_for_humans(v)),
                        parsley::bytes_for_humans(value)
                    )
                })
                .or_else(|| {
                    loaded
                        .iter()
                        .find(|(key, _)| !expected.contains_key(*key))
                        .map(|(key, value)| {
                            format!(
                                "the committed slot {} was restored as {} where the changelog has deleted it or never wrote it",
                                parsley::bytes_for_humans(key),
                                parsley::bytes_for_humans(value)
                            )
                        })
                })
                .unwrap_or_default();
            let how = match &restore.rebuilt {
                Some(why) => format!("rebuilt from the whole changelog ({why})"),
                None => format!(
                    "restored from its local store and the changelog from offset {}",
                    restore.from
                ),
            };
            let violation = self.violation(
                Invariant::I19,
                restore.step,
                format!(
                    "task {} on instance {} {how}: {differs} (changelog {} below offset {})",
                    restore.task, restore.instance, restore.changelog, restore.upto
                ),
            );
            violation.task = Some(restore.task.clone());
            violation.instance = Some(restore.instance);
        }
    }
}
