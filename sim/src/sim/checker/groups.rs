//! I15: a consumer group per stage (X6). Which group committed positions on
//! which tps is read from the cluster's committed group offsets (what
//! `__consumer_offsets` holds), not from the tasks' own bookkeeping: every
//! group holding a position must be the group of a stage that consumes that
//! tp, so no stage resumes from a position another stage committed.

use std::collections::BTreeSet;

use parsley::Tp;

use crate::sim::world::trace::Event;

use super::{Checker, Invariant};

impl Checker<'_> {
    /// I15: each group's committed positions belong to one stage, the one
    /// whose group it is, on tps that stage consumes.
    pub(super) fn check_groups(&mut self) {
        let app = self.input.app;
        let consumers_of = |tp: &Tp| -> Vec<&str> {
            app.stages()
                .iter()
                .filter(|plan| plan.consumed_topics().contains(&tp.topic))
                .map(|plan| plan.name())
                .collect()
        };
        for (group, tps) in self.input.cluster.group_positions() {
            let owner = app.stages().iter().find(|plan| plan.group == group);
            let mut strangers: BTreeSet<&str> = BTreeSet::new();
            let mut foreign: Vec<&Tp> = Vec::new();
            for tp in &tps {
                let consumers = consumers_of(tp);
                let owned = owner.is_some_and(|plan| consumers.contains(&plan.name()));
                if !owned {
                    foreign.push(tp);
                    strangers.extend(consumers);
                }
            }
            if foreign.is_empty() {
                continue;
            }
            let listed = |tps: &[&Tp]| {
                tps.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let stages = strangers
                .iter()
                .map(|stage| format!("`{stage}`"))
                .collect::<Vec<_>>()
                .join(" and ");
            let whose = match owner {
                Some(plan) => format!("stage `{}`'s group", plan.name()),
                None => "no stage's group".to_string(),
            };
            // Dated at the first commit of a stage that committed there.
            let first_commit = self
                .input
                .trace
                .iter()
                .find_map(|entry| match &entry.event {
                    Event::Committed { at, .. } if strangers.contains(&*at.task.stage) => {
                        Some((entry.step, at.clone()))
                    }
                    _ => None,
                });
            let consumed_by = match strangers.len() {
                0 => "no stage".to_string(),
                1 => format!("stage {stages}"),
                _ => format!("stages {stages}, which share it"),
            };
            let message = format!(
                "group `{group}` is {whose}, but it holds committed positions on {} \
                 consumed by {consumed_by}: each stage commits under a group of its own, \
                 `{}-<stage>`, and none reads another's position",
                listed(&foreign),
                app.id()
            );
            let step = first_commit.as_ref().map_or(0, |(step, _)| *step);
            let violation = self.violation(Invariant::I15, step, message);
            if let Some((_, at)) = &first_commit {
                violation.on(at);
            }
        }
    }
}
