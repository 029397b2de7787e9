//! I20: every answer to an interactive query (Q1) is the slot's committed
//! state as of the task's last commit before the query.
//!
//! The reference is the checker's own: walking the trace in order, the
//! last changelog offset each changelog partition's committed
//! transactions wrote so far; at a query, the partition's committed
//! records up to that offset, read back from the log at the end of the
//! run, folded for the queried slot (the latest value wins, a tombstone
//! deletes). The slot's changelog key is the checker's own reading of the
//! changelog's key form (a tag byte 1, then the record key's bytes: S5,
//! T7). It shares nothing with the answer it judges: not the core's query
//! rule, not the world's store model, only the answer the world traced.

use std::collections::BTreeMap;

use bytes::Bytes;
use parsley::Tp;

use super::{Checker, Invariant};
use crate::sim::world::trace::Event;

/// The tag byte of a keyed slot's changelog key (T7).
const KEYED_SLOT_TAG: u8 = 1;

impl Checker<'_> {
    /// I20 for every query the world traced.
    pub(super) fn check_queries(&mut self) {
        let trace = self.input.trace;
        let queried: Vec<&Tp> = trace
            .iter()
            .filter_map(|entry| match &entry.event {
                Event::Queried { changelog, .. } => Some(changelog),
                _ => None,
            })
            .collect();
        if queried.is_empty() {
            return;
        }
        // The last changelog offset a committed transaction wrote, per
        // queried changelog partition, as of the trace's current entry.
        let mut committed_to: BTreeMap<&Tp, u64> =
            queried.iter().map(|tp| (*tp, u64::MAX)).collect();
        for entry in trace {
            match &entry.event {
                Event::Committed { sent, .. } => {
                    for (tp, offset) in sent {
                        if let Some(to) = committed_to.get_mut(tp) {
                            *to = if *to == u64::MAX {
                                *offset
                            } else {
                                (*to).max(*offset)
                            };
                        }
                    }
                }
                Event::Queried {
                    at,
                    key,
                    changelog,
                    answer: Ok(answered),
                } => {
                    let upto = committed_to.get(changelog).copied().unwrap_or(u64::MAX);
                    let expected = self.committed_slot(changelog, key, upto);
                    if answered.as_ref() == expected.as_ref() {
                        continue;
                    }
                    let shown = |value: Option<&Bytes>| {
                        value.map_or("no state".to_owned(), |v| parsley::bytes_for_humans(v))
                    };
                    let through = match upto {
                        u64::MAX => "before any commit".to_owned(),
                        upto => format!("through offset {upto}"),
                    };
                    let violation = self.violation(
                        Invariant::I20,
                        entry.step,
                        format!(
                            "instance {} answered a query of key {} of task {} with {} where the committed slot holds {} (changelog {changelog} {through})",
                            at.instance,
                            parsley::bytes_for_humans(key),
                            at.task,
                            shown(answered.as_ref()),
                            shown(expected.as_ref()),
                        ),
                    );
                    violation.task = Some(at.task.clone());
                    violation.instance = Some(at.instance);
                }
                _ => {}
            }
        }
    }

    /// The slot of `key` in the committed records of `changelog` up to
    /// offset `upto` (`u64::MAX`: none committed yet).
    fn committed_slot(&self, changelog: &Tp, key: &[u8], upto: u64) -> Option<Bytes> {
        if upto == u64::MAX {
            return None;
        }
        let log = self.input.cluster.log(changelog).ok()?;
        let mut slot = None;
        for (offset, record) in log.read_committed() {
            if offset > upto {
                break;
            }
            let Some(changelog_key) = &record.key else {
                continue;
            };
            if changelog_key.first() == Some(&KEYED_SLOT_TAG) && &changelog_key[1..] == key {
                slot = record.value.clone();
            }
        }
        slot
    }
}
