//! What the world offers an explorer (the bounded exhaustive mode,
//! `sim::explore`): the actions it can take now, as the words of the action
//! draw that mean them, and a digest of its state.
//!
//! Nothing here runs unless the run's [`Choices`](super::choice::Choices)
//! are guided: seeded and taped runs draw as they always did.

use std::hash::{Hash, Hasher};

use parsley::TaskId;

use super::TaskHost;
use super::{Action, World};

impl World {
    /// One word per action that can do something now, with whether it is a
    /// fault: the first word of the action draw's range that means it
    /// ([`World::draw_action`]), so that the word replays as the same
    /// action from a tape. An action that would find nothing to act on (a
    /// delivery with nothing buffered, a fetch with nothing new, a commit
    /// nobody wants, an abort with no open transaction) is not offered: it
    /// would only spend a step.
    pub(super) fn action_words(
        &self,
        actions: &[(Action, u32)],
        fault_ppm: &[(Action, u32)],
        action_range: u32,
    ) -> Vec<(u32, bool)> {
        let now = self.now;
        let mut words = Vec::new();
        let weight_total: u64 = actions.iter().map(|(_, weight)| u64::from(*weight)).sum();
        let mut start = 0u64;
        for &(action, weight) in actions {
            // The smallest word whose scaled position reaches `start`.
            let word = (start * u64::from(action_range)).div_ceil(weight_total.max(1)) as u32;
            start += u64::from(weight);
            if weight == 0 || !self.can_act(action, now) {
                continue;
            }
            words.push((word, false));
        }
        let mut at = action_range;
        for &(action, ppm) in fault_ppm {
            if ppm > 0 && self.can_act(action, now) {
                words.push((at, true));
            }
            at += ppm;
        }
        words
    }

    /// Whether `action` would do something now.
    fn can_act(&self, action: Action, now: i64) -> bool {
        let mut hosts = self.active_hosts().map(|(_, _, host)| host);
        match action {
            Action::Deliver => hosts.any(|host| host.task.buffered() > 0),
            Action::Fetch => hosts.any(|host| {
                (0..host.positions().len()).any(|lane| host.has_news(&self.cluster, lane))
            }),
            Action::Commit => hosts.any(|host| host.task.wants_commit(now)),
            Action::Tick => hosts.any(|host| Self::tick_within_reach(host, now)),
            Action::FaultAbort | Action::FaultCommitFailure => {
                hosts.any(|host| host.task.has_open_work())
            }
            Action::FaultCrash => self.instances.iter().any(|instance| instance.alive),
            Action::Produce
            | Action::AdvanceClock
            | Action::Recover
            | Action::FaultMove
            | Action::FaultHanging
            | Action::FaultLogicError => true,
        }
    }

    /// Whether `host`'s tick check at `now` could emit: from the
    /// millisecond before its next tick is due. An explorer offers the
    /// tick action only while some task's check could: earlier, a check
    /// emits nothing from a core that keeps T3, and would only multiply
    /// the states by the times it could happen at; the millisecond before
    /// is kept so that a tick emitted early is still caught (I4). Which
    /// task checks is drawn as in any run (every task with ticks), so that
    /// the explored run's tape replays as it ran.
    fn tick_within_reach(host: &TaskHost, now: i64) -> bool {
        host.task.tick_tp().is_some()
            && host
                .task
                .next_tick_at()
                .is_some_and(|due| now >= due.saturating_sub(1))
    }

    /// A digest of the world's state: the cluster ([`crate::model::Cluster::digest`]), the
    /// clock, the inputs still to produce, the instances and who owns
    /// which task, late markers, each instance's modelled local disk (S6),
    /// and each running task's observable state
    /// (positions, heads, history, ticks, transaction; for a synchronised
    /// task, the log ends its fetches told it), with `host`'s
    /// digest of what the task's logic holds (an explorer keeps it from the
    /// events each task took since it started). Counters and the trace are
    /// left out: they record how the state was reached, not what it is;
    /// and so is the moment after a boundary landing, which changes only
    /// how often each action is drawn, not which can be.
    pub(crate) fn digest(&self, host: &dyn Fn(u32, &TaskId) -> u64) -> u64 {
        let mut hasher = rustc_hash::FxHasher::default();
        self.cluster.digest(&mut hasher);
        self.now.hash(&mut hasher);
        self.inputs_left.hash(&mut hasher);
        self.poison_left.hash(&mut hasher);
        self.input_transactions.hash(&mut hasher);
        let mut latest: Vec<_> = self.latest.iter().collect();
        latest.sort_unstable();
        latest.hash(&mut hasher);
        self.owners.hash(&mut hasher);
        self.pending_starts.hash(&mut hasher);
        self.newest.hash(&mut hasher);
        self.unwritten_markers.hash(&mut hasher);
        for (number, instance) in self.instances.iter().enumerate() {
            instance.alive.hash(&mut hasher);
            for hosted in &instance.hosts {
                let task = &hosted.host.task;
                hosted.index.hash(&mut hasher);
                hosted.host.producer().hash(&mut hasher);
                hosted.host.in_transaction().hash(&mut hasher);
                hosted.host.transaction_number().hash(&mut hasher);
                hosted.host.positions().hash(&mut hasher);
                if task.is_synchronised() {
                    // The log ends told a synchronised task decide its
                    // waits (G9): a lane never fetched is waited for.
                    for lane in 0..hosted.host.positions().len() {
                        hosted.host.log_end(lane).hash(&mut hasher);
                    }
                }
                for (tp, offset, status) in task.heads() {
                    (tp, offset, format!("{status:?}")).hash(&mut hasher);
                }
                task.buffered().hash(&mut hasher);
                task.history().hash(&mut hasher);
                task.committed_history().hash(&mut hasher);
                task.last_tick_at().hash(&mut hasher);
                task.has_open_work().hash(&mut hasher);
                task.failure().map(ToString::to_string).hash(&mut hasher);
                host(number as u32, &hosted.at.task).hash(&mut hasher);
            }
        }
        if let Some(disks) = &self.disks {
            disks.digest(&mut hasher);
        }
        hasher.finish()
    }
}
