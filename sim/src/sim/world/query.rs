//! Interactive queries in the world (Q1): at drawn moments of the safety
//! phase, a drawn key of a drawn stateful stage is asked of a drawn live
//! instance, which answers through the core's rule from where the key's
//! task stands there and from its modelled local store; the answer goes in
//! the trace for the checker (I20).
//!
//! A query changes nothing in the world, so its draws are side words
//! ([`Choices::side_word`]): a run with queries takes the very steps the
//! same seed takes without them, only the query entries are added.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use parsley::{QueryRefusal, QueryStanding, SlotKey, StoreBeside, TaskId};

use super::choice::Choices;
use super::trace::{Event, TaskAt};
use super::World;

/// A key no input writes, so that a query of a slot that holds nothing
/// is asked too.
const UNSEEN_KEY: &[u8] = b"\"no such key\"";

/// The refusal's name in the trace.
fn refusal_name(refusal: &QueryRefusal<std::convert::Infallible>) -> &'static str {
    match refusal {
        QueryRefusal::NotOwner => "not the owner",
        QueryRefusal::NotStarted => "not started",
        QueryRefusal::Restoring { .. } => "restoring",
        QueryRefusal::Ended => "ended",
        QueryRefusal::NoStore => "no store",
        QueryRefusal::Store(never) => match *never {},
    }
}

impl World {
    /// The stateful stages a query may ask, in the application's order.
    pub(super) fn queryable_stages(app: &parsley::App) -> Vec<Arc<str>> {
        app.stages()
            .iter()
            .filter(|plan| parsley::queryable_stage(app, plan.name()).is_ok())
            .map(|plan| Arc::from(plan.name()))
            .collect()
    }

    /// Asks a query, at the settings' rate, drawing only side words.
    pub(super) fn maybe_query(&mut self, choices: &mut Choices) {
        let Some(queries) = self.settings.queries else {
            return;
        };
        if self.queryable.is_empty() || !choices.side_chance(queries.rate) {
            return;
        }
        let alive: Vec<u32> = (0..self.instances.len() as u32)
            .filter(|instance| self.instances[*instance as usize].alive)
            .collect();
        if alive.is_empty() {
            return;
        }
        let stage =
            Arc::clone(&self.queryable[choices.side_below(self.queryable.len() as u32) as usize]);
        let key = self.draw_key(choices, &stage);
        let instance = alive[choices.side_below(alive.len() as u32) as usize];
        let task = parsley::query_task(&self.app, &self.assembly, &stage, &key)
            .expect("a queryable stage routes every key");
        self.query(instance, &task, key);
    }

    /// A key of `stage`'s slots: one a store of its tasks holds or an open
    /// transaction of theirs changed, or one no input writes.
    fn draw_key(&self, choices: &mut Choices, stage: &str) -> Bytes {
        let mut keys: BTreeSet<Bytes> = BTreeSet::new();
        let mut add = |slot: SlotKey| {
            if let SlotKey::Key(key) = slot {
                keys.insert(key);
            }
        };
        if let Some(disks) = &self.disks {
            for changelog_key in disks.keys_of_stage(stage) {
                if let Ok(slot) = SlotKey::from_changelog_bytes(changelog_key) {
                    add(slot);
                }
            }
        }
        for (_, _, host) in self.active_hosts() {
            if &*host.task.id().stage == stage {
                for (slot, _) in host.task.open_changes() {
                    add(slot.clone());
                }
            }
        }
        keys.insert(Bytes::from_static(UNSEEN_KEY));
        let at = choices.side_below(keys.len() as u32) as usize;
        keys.into_iter().nth(at).expect("a key below the count")
    }

    /// `instance` answers a query of `key` of `task` through the core's
    /// rule, and the answer is traced.
    fn query(&mut self, instance: u32, task: &TaskId, key: Bytes) {
        let (id, _) = self.task_ids[task].clone();
        let host = self.host_index(instance as usize, task);
        let running = host
            .map(|host| &self.instances[instance as usize].hosts[host].host.task)
            .filter(|task| task.failure().is_none());
        let store = self
            .disks
            .as_ref()
            .and_then(|disks| disks.store_of(instance, &id));
        let beside = running
            .zip(store)
            .map(|(task, store)| StoreBeside { store, task });
        let standing = if self.owners.get(task) != Some(&instance) {
            QueryStanding::NotOwned
        } else if self.pending_starts.contains(task) {
            // A stale copy on the instance (an earlier assignment's) is
            // not the task's run here: that has yet to start.
            QueryStanding::NotStarted
        } else {
            match (&beside, running) {
                (Some(beside), _) => QueryStanding::Serving(beside),
                (None, Some(_)) => QueryStanding::NoStore,
                (None, None) => QueryStanding::Ended,
            }
        };
        let answer = parsley::answer_query(standing, &key);
        let changelog = self
            .app
            .stage(&task.stage)
            .and_then(|plan| plan.changelog.clone())
            .map(|topic| parsley::Tp::new(topic, task.partition));
        self.stats.queries += 1;
        self.stats.queries_answered += u64::from(answer.is_ok());
        let Some(changelog) = changelog else {
            return;
        };
        self.record(Event::Queried {
            at: TaskAt { task: id, instance },
            key,
            changelog,
            answer: answer.map_err(|refusal| refusal_name(&refusal)),
        });
    }
}
