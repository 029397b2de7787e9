//! The reconstruction: per task, a depth-first search for an interleaving of
//! its committed prefixes that reproduces its committed outputs, state and
//! dead letters (see the module docs).

use std::collections::{BTreeMap, HashSet};

use super::batches::{self, Batches};
use super::checks::Auditor;
use super::index::{describe_record, Beyond, DeadLetters, Lane, Log, Out, TaskPlan};
use super::lookahead::unreachable_output;
use super::replay::deliver;
use super::Invariant;
use crate::assembly::Assembly;
use crate::stage::SlotKey;
use crate::{Claim, Stamp, Tp};
use bytes::Bytes;

/// The search's state after some deliveries.
#[derive(Clone)]
pub(super) struct Node {
    pub(super) pos: Vec<usize>,
    pub(super) out: Vec<usize>,
    pub(super) changelog: usize,
    /// Dead letters matched: the next entry of the task's [`DeadLetters`].
    pub(super) dead: usize,
    /// The fold's slots: the changelog up to `changelog`, then `pending`.
    pub(super) slots: BTreeMap<SlotKey, Bytes>,
    /// The slot changes since the last matched changelog batch, one per
    /// slot (its latest value; `None`: deleted), in the order of first
    /// change: what the transaction's commit writes (S5).
    pub(super) pending: Vec<(SlotKey, Option<Bytes>)>,
    /// Per pending change, the delivery that made it (`tp@offset`), for
    /// the reports.
    pub(super) pending_by: Vec<String>,
    pub(super) history: Stamp,
}

/// What determines a node's future: lane positions, output and changelog
/// cursors, and the changes pending (the slots follow from the changelog
/// cursor and them).
type NodeKey = (Vec<usize>, Vec<(SlotKey, Option<Bytes>)>);

impl Node {
    pub(super) fn key(&self) -> NodeKey {
        let mut key = self.pos.clone();
        key.extend(&self.out);
        key.push(self.changelog);
        key.push(self.dead);
        (key, self.pending.clone())
    }
}

/// The choice that ends a transaction: the pending changes are the next
/// changelog batch (S5). Not a lane.
pub(super) const COMMIT: usize = usize::MAX;

pub(super) struct Frame {
    pub(super) node: Node,
    pub(super) choices: Vec<usize>,
    pub(super) next: usize,
    /// The lane delivered to reach this node ([`COMMIT`] for a commit),
    /// and the outputs it matched.
    pub(super) via: Option<(usize, Vec<(usize, usize)>)>,
    /// The deliveries made to reach this node.
    pub(super) depth: usize,
}

pub(super) struct Failure {
    pub(super) invariant: Invariant,
    pub(super) message: String,
}

pub(super) enum Search {
    Found {
        /// Lanes in delivery order.
        path: Vec<usize>,
        /// Matched outputs: (out, entry).
        matched: Vec<(usize, usize)>,
        changelog: usize,
        dead: usize,
    },
    Failed {
        best: Option<(usize, Failure)>,
    },
    Exhausted,
}

/// Everything one task's search looks at.
pub(super) struct Ctx<'a, 'b> {
    pub(super) task: &'b TaskPlan<'a>,
    pub(super) outs: Vec<Out<'a>>,
    pub(super) changelog: Option<&'a Log<'a>>,
    /// The changelog's batches, one per committed transaction.
    pub(super) batches: Batches,
    /// The task's dead letters, when its stage has the opt-in (X5).
    pub(super) dead: Option<&'b DeadLetters<'a>>,
    /// Outputs matched by tasks searched before.
    pub(super) taken: &'b HashSet<(Tp, u64)>,
    /// Records beyond the cut: left over at the end, they are no violation.
    pub(super) beyond: &'b Beyond,
    pub(super) gate: bool,
    /// Whether nodes whose history exceeds an output still to be emitted
    /// are cut off at once (`super::lookahead`).
    pub(super) lookahead: bool,
    pub(super) assembly: &'b Assembly,
}

impl<'a> Auditor<'a> {
    pub(super) fn reconstruct(
        &mut self,
        tasks: &[TaskPlan<'a>],
        dead: &[Option<DeadLetters<'a>>],
        beyond: &Beyond,
    ) {
        let index = self.index;
        let candidates = self.attribute(tasks);
        self.summary.outputs = candidates.len();
        let mut taken: HashSet<(Tp, u64)> = HashSet::new();
        // Outputs of tasks that could not be reconstructed: not reported again.
        let mut excused: HashSet<usize> = HashSet::new();
        for (task_index, task) in tasks.iter().enumerate() {
            let id = &task.id;
            if let Some(reason) = &task.unreadable {
                self.summary
                    .notes
                    .push(format!("task {id} was not reconstructed: {reason}"));
                excused.insert(task_index);
                continue;
            }
            let mut outs: Vec<Out<'a>> = Vec::new();
            for ((tp, record), writers) in &candidates {
                if !writers.contains(&task_index) {
                    continue;
                }
                let log = &index[tp];
                let sole = writers.len() == 1;
                match outs.iter_mut().find(|out| out.log.tp == *tp) {
                    Some(out) => out.entries.push((*record, sole)),
                    None => outs.push(Out {
                        log,
                        entries: vec![(*record, sole)],
                    }),
                }
            }
            // Every sink partition the task may emit to has an out, even
            // with no records: an emission there is then lost.
            for sink in task.plan.stage.sinks() {
                for partition in 0..self.assembly.partitions_of(sink.name.as_str()).unwrap_or(0) {
                    let tp = Tp::new(sink.name.clone(), partition);
                    if let Some(log) = index.get(&tp) {
                        if !outs.iter().any(|out| out.log.tp == tp) {
                            outs.push(Out {
                                log,
                                entries: Vec::new(),
                            });
                        }
                    }
                }
            }
            let changelog = task
                .plan
                .changelog
                .as_ref()
                .and_then(|topic| index.get(&Tp::new(topic.clone(), id.partition)));
            if task.plan.changelog.is_some() && changelog.is_none() {
                self.summary.notes.push(format!(
                    "task {id} was not reconstructed: its changelog partition was not read"
                ));
                excused.insert(task_index);
                continue;
            }
            let dead = dead[task_index].as_ref();
            if dead.is_some_and(|dead| dead.log.is_none()) {
                self.summary.notes.push(format!(
                    "task {id} was not reconstructed: its dead-letter partition was not read"
                ));
                excused.insert(task_index);
                continue;
            }
            self.summary.changelog_records += changelog.map_or(0, |log| log.records.len());
            let mut ctx = Ctx {
                task,
                outs,
                changelog,
                batches: Batches::of(changelog),
                dead,
                taken: &taken,
                beyond,
                gate: true,
                lookahead: true,
                assembly: self.assembly,
            };
            let gated = self.search(&ctx);
            let found = match gated {
                Search::Found {
                    path,
                    matched,
                    changelog,
                    dead,
                } => {
                    debug_assert_eq!(
                        path.len(),
                        task.lanes.iter().map(|lane| lane.len).sum::<usize>()
                    );
                    self.summary.tasks_reconstructed += 1;
                    Some((matched, changelog, dead))
                }
                Search::Exhausted => {
                    self.summary.notes.push(format!(
                        "task {id}: inconclusive, the search for an interleaving of its committed deliveries ran out of {} steps",
                        self.options.search_steps
                    ));
                    excused.insert(task_index);
                    None
                }
                Search::Failed { best } => {
                    ctx.gate = false;
                    match self.search(&ctx) {
                        Search::Found {
                            path,
                            matched,
                            changelog,
                            dead,
                        } => {
                            let (step, message) = self.gate_breach(task, ctx.dead, &path);
                            self.violation(Invariant::I1, step, message);
                            Some((matched, changelog, dead))
                        }
                        _ => {
                            let (depth, failure) = self.explain(&mut ctx, best).unwrap_or((
                                0,
                                Failure {
                                    invariant: Invariant::I1,
                                    message: format!(
                                        "task {id}: no interleaving of its committed deliveries reproduces its committed outputs"
                                    ),
                                },
                            ));
                            self.violation(failure.invariant, depth as u64, failure.message);
                            excused.insert(task_index);
                            None
                        }
                    }
                }
            };
            if let Some((matched, changelog_matched, dead)) = found {
                // What of a moving task's changelog its committed deliveries
                // do not write was written after the cut.
                if let Some(log) = changelog.filter(|_| task.moved) {
                    let after = log.records.len().saturating_sub(changelog_matched);
                    self.summary.cut.beyond += after;
                    if let Some(cut) = self.summary.cut.tps.get_mut(&log.tp) {
                        cut.beyond += after;
                    }
                }
                let changelog = changelog_matched;
                self.summary.outputs_matched += matched.len();
                self.summary.changelog_matched += changelog;
                self.summary.dead_letters_matched += dead;
                let matched: Vec<(Tp, u64)> = matched
                    .into_iter()
                    .map(|(out, entry)| {
                        let out = &ctx.outs[out];
                        let record = &out.log.records[out.entries[entry].0];
                        (out.log.tp.clone(), record.offset)
                    })
                    .collect();
                drop(ctx);
                taken.extend(matched);
            }
        }
        // Outputs no task's committed deliveries account for.
        for ((tp, record_index), writers) in &candidates {
            let log = &index[tp];
            let record = &log.records[*record_index];
            if taken.contains(&(tp.clone(), record.offset))
                || beyond.contains(&(tp.clone(), record.offset))
            {
                continue;
            }
            if writers.is_empty() {
                self.violation(
                    Invariant::I7,
                    0,
                    format!(
                        "{tp}@{} {} is committed, but no task of a stage that writes to {} emits to that partition (stamp {})",
                        record.offset,
                        describe_record(record),
                        tp.topic,
                        log.stamp(*record_index)
                    ),
                );
                continue;
            }
            if writers.iter().any(|writer| excused.contains(writer)) {
                continue;
            }
            let names: Vec<String> = writers
                .iter()
                .map(|writer| tasks[*writer].id.to_string())
                .collect();
            self.violation(
                Invariant::I7,
                0,
                format!(
                    "{tp}@{} {} is committed, but no committed delivery of {} emits it",
                    record.offset,
                    describe_record(record),
                    names.join(", ")
                ),
            );
        }
        // Beyond the cut: what no committed delivery of the cut matched.
        for (tp, offset) in beyond {
            if taken.contains(&(tp.clone(), *offset)) {
                continue;
            }
            self.summary.cut.beyond += 1;
            if let Some(cut) = self.summary.cut.tps.get_mut(tp) {
                cut.beyond += 1;
            }
        }
    }

    /// The deepest failure of the search without the outputs' lookahead,
    /// where it finishes within its steps, else `cut_short`: the verdict
    /// is the lookahead's, the words the full search's, whose deepest
    /// failure follows the committed order furthest (a lost emission, say,
    /// rather than the first later output a wrong order can no longer
    /// reach).
    fn explain(
        &mut self,
        ctx: &mut Ctx<'a, '_>,
        cut_short: Option<(usize, Failure)>,
    ) -> Option<(usize, Failure)> {
        let (gate, lookahead) = (ctx.gate, ctx.lookahead);
        ctx.gate = true;
        ctx.lookahead = false;
        let full = self.search(ctx);
        (ctx.gate, ctx.lookahead) = (gate, lookahead);
        debug_assert!(
            !matches!(full, Search::Found { .. }),
            "task {}: the outputs' lookahead cut off a reconstruction",
            ctx.task.id
        );
        match full {
            Search::Failed { best } => best.or(cut_short),
            _ => cut_short,
        }
    }

    /// The first delivery of `path` that the gate would have held.
    pub(super) fn gate_breach(
        &self,
        task: &TaskPlan<'a>,
        dead: Option<&DeadLetters<'a>>,
        path: &[usize],
    ) -> (u64, String) {
        let mut pos = vec![0; task.lanes.len()];
        for (step, &lane) in path.iter().enumerate() {
            let offset = task.lanes[lane].log.records[pos[lane]].offset;
            if dead.is_some_and(|dead| dead.skips(lane, offset)) {
                pos[lane] += 1;
                continue;
            }
            if let Some((claim, position)) = blocker(task, &pos, lane) {
                let record = &task.lanes[lane].log.records[pos[lane]];
                let never = if claim.offset >= task_threshold_end(task, &claim.tp) {
                    ", and its committed history never delivers it"
                } else {
                    ""
                };
                return (
                    step as u64,
                    format!(
                        "task {}: no interleaving of its committed deliveries that respects the gate (G2) reproduces its committed outputs and state; they are reproduced only by delivering {}@{} (stamp {}) before its claim {claim} was delivered (position of {} was {position}){never}",
                        task.id,
                        task.lanes[lane].tp,
                        record.offset,
                        task.lanes[lane].log.stamp(pos[lane]),
                        claim.tp
                    ),
                );
            }
            pos[lane] += 1;
        }
        (
            0,
            format!(
                "task {}: its committed outputs are reproduced only by an interleaving the gate allows too, yet none was found",
                task.id
            ),
        )
    }

    /// Depth-first search for an interleaving of `ctx.task`'s prefixes that
    /// reproduces its outputs (see the module docs).
    pub(super) fn search(&mut self, ctx: &Ctx<'a, '_>) -> Search {
        let task = ctx.task;
        let root = Node {
            pos: vec![0; task.lanes.len()],
            out: vec![0; ctx.outs.len()],
            changelog: 0,
            dead: 0,
            slots: BTreeMap::new(),
            pending: Vec::new(),
            pending_by: Vec::new(),
            history: Stamp::empty(),
        };
        let choices = ready_lanes(ctx, &root);
        let mut stack = vec![Frame {
            node: root,
            choices,
            next: 0,
            via: None,
            depth: 0,
        }];
        let mut failed: HashSet<NodeKey> = HashSet::new();
        let mut best: Option<(usize, Failure)> = None;
        let mut steps = 0u64;
        loop {
            let Some(frame) = stack.last_mut() else {
                unreachable!("the root is popped only by returning");
            };
            let depth = frame.depth;
            if frame.choices.is_empty() && frame.next == 0 {
                frame.next = 1;
                let done = frame
                    .node
                    .pos
                    .iter()
                    .zip(&task.lanes)
                    .all(|(pos, lane)| *pos == lane.len);
                let end = if done {
                    end_failure(ctx, &frame.node)
                } else {
                    Some(stuck_failure(ctx, &frame.node))
                };
                match end {
                    None => {
                        self.summary.search_steps += steps;
                        let mut path = Vec::new();
                        let mut matched = Vec::new();
                        for frame in &stack {
                            if let Some((lane, took)) = &frame.via {
                                if *lane != COMMIT {
                                    path.push(*lane);
                                }
                                matched.extend(took.iter().copied());
                            }
                        }
                        let changelog = stack.last().map_or(0, |frame| frame.node.changelog);
                        let dead = stack.last().map_or(0, |frame| frame.node.dead);
                        return Search::Found {
                            path,
                            matched,
                            changelog,
                            dead,
                        };
                    }
                    Some(failure) => keep_deepest(&mut best, depth, failure),
                }
            }
            if frame.next >= frame.choices.len() {
                failed.insert(frame.node.key());
                stack.pop();
                if stack.is_empty() {
                    self.summary.search_steps += steps;
                    return Search::Failed { best };
                }
                continue;
            }
            let lane = frame.choices[frame.next];
            frame.next += 1;
            steps += 1;
            if steps > self.options.search_steps {
                self.summary.search_steps += steps;
                return Search::Exhausted;
            }
            let next = match lane {
                COMMIT => Ok((commit(ctx, &frame.node), Vec::new())),
                lane => deliver(ctx, &frame.node, lane, depth),
            };
            match next {
                Ok((node, took)) => {
                    if failed.contains(&node.key()) {
                        continue;
                    }
                    if ctx.lookahead && lane != COMMIT {
                        if let Some(failure) = unreachable_output(ctx, &node, lane, depth + 1) {
                            keep_deepest(&mut best, depth + 1, failure);
                            failed.insert(node.key());
                            continue;
                        }
                    }
                    let choices = ready_lanes(ctx, &node);
                    stack.push(Frame {
                        node,
                        choices,
                        next: 0,
                        via: Some((lane, took)),
                        depth: depth + usize::from(lane != COMMIT),
                    });
                }
                Err(failure) => keep_deepest(&mut best, depth, failure),
            }
        }
    }
}

pub(super) fn keep_deepest(best: &mut Option<(usize, Failure)>, depth: usize, failure: Failure) {
    if best.as_ref().is_none_or(|(deepest, _)| depth > *deepest) {
        *best = Some((depth, failure));
    }
}

/// The committed offset of `tp` if the task consumes it, else infinity.
pub(super) fn task_threshold_end(task: &TaskPlan<'_>, tp: &Tp) -> u64 {
    task.lanes
        .iter()
        .find(|lane| lane.tp == *tp)
        .map_or(u64::MAX, |lane| lane.committed)
}

/// The lane's position as far as the prefix tells: the next undelivered
/// record, or the committed offset once the prefix is delivered.
pub(super) fn threshold(lane: &Lane<'_>, pos: usize) -> u64 {
    if pos < lane.len {
        lane.log.records[pos].offset
    } else {
        lane.committed
    }
}

/// The first claim of `lane`'s head on a lane of the task that is not yet
/// resolved (G2), with that lane's position.
pub(super) fn blocker(task: &TaskPlan<'_>, pos: &[usize], lane: usize) -> Option<(Claim, u64)> {
    let stamp = task.lanes[lane].log.stamp(pos[lane]);
    for claim in stamp.claims() {
        if let Some(claimed) = task.lanes.iter().position(|known| known.tp == claim.tp) {
            let position = threshold(&task.lanes[claimed], pos[claimed]);
            if claim.offset >= position {
                return Some((claim.clone(), position));
            }
        }
    }
    None
}

/// The node after a commit: its pending changes are the next changelog
/// batch, matched.
fn commit(ctx: &Ctx<'_, '_>, node: &Node) -> Node {
    let changelog = ctx.changelog.expect("only a changelog's batch commits");
    let mut next = node.clone();
    next.changelog += ctx.batches.batch(changelog, node.changelog).len();
    next.pending.clear();
    next.pending_by.clear();
    next
}

/// Whether the node's pending changes are exactly the next changelog batch:
/// its transaction may commit here (or go on, should later deliveries
/// leave the batch as it is).
fn may_commit(ctx: &Ctx<'_, '_>, node: &Node) -> bool {
    !node.pending.is_empty()
        && ctx.changelog.is_some_and(|log| {
            batches::matches(ctx.batches.batch(log, node.changelog), &node.pending)
        })
}

/// What may come next, most likely first: a commit, when the pending
/// changes make the next changelog batch ([`COMMIT`]), then the lanes whose
/// head may go next, oldest record timestamp first.
pub(super) fn ready_lanes(ctx: &Ctx<'_, '_>, node: &Node) -> Vec<usize> {
    let commits = may_commit(ctx, node);
    let task = ctx.task;
    let mut ready: Vec<usize> = (0..task.lanes.len())
        .filter(|&lane| node.pos[lane] < task.lanes[lane].len)
        .filter(|&lane| {
            !ctx.gate
                || blocker(task, &node.pos, lane).is_none()
                || ctx.dead.is_some_and(|dead| {
                    dead.skips(lane, task.lanes[lane].log.records[node.pos[lane]].offset)
                })
        })
        .collect();
    ready.sort_by_key(|&lane| {
        let record = &task.lanes[lane].log.records[node.pos[lane]];
        (record.data.timestamp, task.lanes[lane].tp.clone())
    });
    if commits {
        ready.insert(0, COMMIT);
    }
    ready
}

/// Why the search cannot go on from a node with undelivered heads.
pub(super) fn stuck_failure(ctx: &Ctx<'_, '_>, node: &Node) -> Failure {
    let task = ctx.task;
    let held: Vec<String> = (0..task.lanes.len())
        .filter(|&lane| node.pos[lane] < task.lanes[lane].len)
        .filter_map(|lane| {
            let (claim, position) = blocker(task, &node.pos, lane)?;
            let never = if claim.offset >= task_threshold_end(task, &claim.tp) {
                ", which its committed history never delivers"
            } else {
                ""
            };
            Some(format!(
                "{}@{} claims {claim} (position of {} is {position}{never})",
                task.lanes[lane].tp, task.lanes[lane].log.records[node.pos[lane]].offset, claim.tp
            ))
        })
        .collect();
    Failure {
        invariant: Invariant::I1,
        message: format!(
            "task {}: its committed history delivers records the gate holds (G2): {}",
            task.id,
            held.join("; ")
        ),
    }
}

/// Why a node that delivered every prefix is not a reconstruction: outputs
/// or changelog records left over.
pub(super) fn end_failure(ctx: &Ctx<'_, '_>, node: &Node) -> Option<Failure> {
    let task = ctx.task;
    for (index, out) in ctx.outs.iter().enumerate() {
        for &(record_index, sole) in &out.entries[node.out[index]..] {
            let record = &out.log.records[record_index];
            let at = (out.log.tp.clone(), record.offset);
            if !sole || ctx.taken.contains(&at) || ctx.beyond.contains(&at) {
                continue;
            }
            let repeats = out.copy_before(node.out[index], record, |_| false);
            let what = match repeats {
                Some(earlier) => format!(
                    "duplicated: it repeats {}@{}, which a committed delivery emitted",
                    out.log.tp, earlier.offset
                ),
                None => "extra".to_string(),
            };
            return Some(Failure {
                invariant: Invariant::I7,
                message: format!(
                    "task {}: {}@{} {} is committed, but no committed delivery emits it ({what})",
                    task.id,
                    out.log.tp,
                    record.offset,
                    describe_record(record)
                ),
            });
        }
    }
    if let Some(dead) = ctx.dead {
        if node.dead < dead.entries.len() {
            let (log, record) = dead.record(node.dead);
            return Some(Failure {
                invariant: Invariant::I10,
                message: format!(
                    "task {}: {}@{} is a committed dead letter, but no committed delivery wrote it",
                    task.id, log.tp, record.offset
                ),
            });
        }
    }
    // Every transaction of the committed history wrote its changes (S5).
    if let (Some(changelog), Some((slot, value))) = (ctx.changelog, node.pending.first()) {
        let batch = ctx.batches.batch(changelog, node.changelog);
        let change = batches::describe_delivered_change(slot, value.as_ref());
        let others = match node.pending.len() - 1 {
            0 => String::new(),
            more => format!(" (and its transaction changes {more} more slot(s))"),
        };
        return Some(Failure {
            invariant: Invariant::I6,
            message: format!(
                "task {}: delivering {} {change}{others}, but the changelog's next records, {}, are not its transaction's changes, one per slot with its value at the commit (state change lost)",
                task.id,
                node.pending_by[0],
                batches::describe(changelog, batch)
            ),
        });
    }
    // A moving task's changelog goes on beyond the cut; it carries no
    // stamps to tell, so what follows the last change of the cut is not
    // judged.
    if let Some(changelog) = ctx.changelog.filter(|_| !task.moved) {
        if let Some(record) = changelog.records.get(node.changelog) {
            return Some(Failure {
                invariant: Invariant::I6,
                message: format!(
                    "task {}: {}@{} {} is committed, but no committed delivery writes it",
                    task.id,
                    changelog.tp,
                    record.offset,
                    describe_record(record)
                ),
            });
        }
    }
    None
}
