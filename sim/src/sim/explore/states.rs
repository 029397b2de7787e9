//! The states an exploration has seen: a digest of the world at the start
//! of a step, with the faults and steps it has left.
//!
//! The world hashes what it can see ([`World::digest`]); what a task's
//! logic holds (its state store, timers, windows) is the user's and cannot
//! be hashed, so each task's share is a digest of the events it took since
//! it started (each delivery with its record and time, fetch, commit,
//! abort and tick check). Two schedules that deliver the same records to
//! each task in another interleaving meet in one state; two that deliver
//! them to one task in another order do not, even when the logic would not
//! care.

use std::collections::hash_map::Entry;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use parsley::TaskId;
use rustc_hash::{FxHashMap, FxHasher};

use crate::sim::world::trace::{Entry as TraceEntry, Event};
use crate::sim::world::World;

/// Each running task's digest of the events it took since it started, by
/// instance and task, kept up to date from the trace.
#[derive(Default)]
pub(crate) struct TaskDigests {
    /// How much of the trace has been read.
    read: usize,
    digests: BTreeMap<(u32, TaskId), u64>,
}

impl TaskDigests {
    /// Reads the entries added to `trace` since the last call.
    pub(crate) fn update(&mut self, trace: &[TraceEntry]) {
        for entry in &trace[self.read.min(trace.len())..] {
            self.take(entry);
        }
        self.read = trace.len();
    }

    fn fold(&mut self, instance: u32, task: &TaskId, what: impl Hash) {
        let digest = self.digests.entry((instance, task.clone())).or_default();
        let mut hasher = FxHasher::default();
        digest.hash(&mut hasher);
        what.hash(&mut hasher);
        *digest = hasher.finish();
    }

    fn take(&mut self, entry: &TraceEntry) {
        let now = entry.now;
        match &entry.event {
            Event::TaskStarted { at } => {
                self.digests.insert((at.instance, (*at.task).clone()), 0);
            }
            // A synchronised task's empty fetches are traced for G9's
            // waits; like any empty fetch, they move nothing here.
            Event::Fetched {
                at,
                tp,
                from,
                next,
                records,
                ..
            } if *records > 0 || from != next => {
                self.fold(at.instance, &at.task, (1u8, tp, from, next, records))
            }
            Event::Delivered { at, tp, offset, .. } => {
                self.fold(at.instance, &at.task, (2u8, tp, offset, now))
            }
            // A tick check that emitted nothing is folded too: the checker
            // judges it (a tick that was due and did not come is lost).
            Event::TickChecked { at, emitted, .. } => {
                self.fold(at.instance, &at.task, (3u8, now, emitted.is_some()))
            }
            Event::Committed { at, .. } => self.fold(at.instance, &at.task, (4u8, now)),
            Event::Aborted { at, .. } => self.fold(at.instance, &at.task, 5u8),
            Event::TaskStopped { at, .. } => self.fold(at.instance, &at.task, 6u8),
            // A synchronised task asked what to deliver starts its waits
            // for caught-up sources then (G9): when matters.
            Event::Withheld { at } => self.fold(at.instance, &at.task, (7u8, now)),
            Event::Fenced { at } => {
                self.digests.remove(&(at.instance, (*at.task).clone()));
            }
            Event::Crashed { instance } => self.digests.retain(|(on, _), _| on != instance),
            _ => {}
        }
    }

    /// The digest of `task` on `instance` (0 for one that took nothing).
    pub(crate) fn get(&self, instance: u32, task: &TaskId) -> u64 {
        self.digests
            .get(&(instance, task.clone()))
            .copied()
            .unwrap_or(0)
    }
}

/// The states seen, each with the most steps it was seen with: a state met
/// again with no more steps and the same faults left has nothing new to
/// show. The state before the liveness phase counts, with no steps left.
#[derive(Default)]
pub(crate) struct Seen {
    states: FxHashMap<(u64, u32), u64>,
}

impl Seen {
    /// Whether `world` (with `tasks`' digests), with `faults_left` and
    /// `steps_left`, is worth exploring: a state not seen before, or seen
    /// with fewer steps left. Remembers it.
    pub(crate) fn is_new(
        &mut self,
        world: &World,
        tasks: &TaskDigests,
        faults_left: u32,
        steps_left: u64,
    ) -> bool {
        let digest = world.digest(&|instance, task| tasks.get(instance, task));
        match self.states.entry((digest, faults_left)) {
            Entry::Occupied(best) if *best.get() >= steps_left => false,
            Entry::Occupied(mut best) => {
                best.insert(steps_left);
                true
            }
            Entry::Vacant(state) => {
                state.insert(steps_left);
                true
            }
        }
    }

    /// How many distinct states (with their faults left) were seen.
    pub(crate) fn len(&self) -> u64 {
        self.states.len() as u64
    }
}
