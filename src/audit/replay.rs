//! One delivery replayed: the logic run again on a record, and what it
//! writes matched against the task's committed outputs, changelog and dead
//! letters.

use super::batches;
use super::index::{describe_record, same_content, DeadLetters, Lane};
use super::search::{blocker, Ctx, Failure, Node};
use super::Invariant;
use crate::partitioner::partition_for;
use crate::record::ConsumedRecord;
use crate::stage::{ReplayError, Replayed, SlotChange, SlotKey};
use crate::task::tick_of;
use crate::{DeadLetterKind, Emission, Stamp};

/// Delivers the head of `lane` from `node`: replays the logic and matches
/// what it writes against the task's committed outputs.
pub(super) fn deliver(
    ctx: &Ctx<'_, '_>,
    node: &Node,
    lane: usize,
    depth: usize,
) -> Result<(Node, Vec<(usize, usize)>), Failure> {
    let task = ctx.task;
    let id = &task.id;
    let plan = task.plan;
    let at = &task.lanes[lane];
    let record = &at.log.records[node.pos[lane]];
    let stamp = at.log.stamp(node.pos[lane]);
    let bad_stamp = at.log.stamps[node.pos[lane]].as_ref().err();
    let delivered = format!("{}@{}", at.tp, record.offset);
    let mut next = node.clone();
    next.pos[lane] += 1;
    let slot = if at.tick {
        SlotKey::Tick
    } else {
        SlotKey::for_key(record.data.key.as_ref())
    };
    let state = node.slots.get(&slot);
    // K2, W2: a timer service's tick and a windowed aggregation's record or
    // tick read every slot; their changes to others are in `other_slots`.
    let every_slot = || -> Vec<(SlotKey, &[u8])> {
        node.slots
            .iter()
            .map(|(slot, bytes)| (slot.clone(), &bytes[..]))
            .collect()
    };
    let replay = || -> Result<Result<Replayed, ReplayError>, Failure> {
        if at.tick {
            match tick_of(record) {
                Some(tick) if plan.stage.hooks().tick_reads_every_slot() => {
                    Ok(plan.stage.hooks().replay_tick_over_slots(&every_slot(), tick))
                }
                Some(tick) => Ok(plan.stage.hooks().replay_tick(state.map(|bytes| &bytes[..]), tick)),
                None => Err(Failure {
                    invariant: Invariant::I4,
                    message: format!(
                        "task {id} delivered {delivered} in its committed history, which is not a tick record"
                    ),
                }),
            }
        } else if plan.stage.hooks().record_reads_every_slot() {
            Ok(plan.stage.hooks().replay_record_over_slots(
                &at.tp.topic,
                &every_slot(),
                &at.tp,
                record,
            ))
        } else {
            Ok(plan.stage.hooks().replay_record(
                &at.tp.topic,
                state.map(|bytes| &bytes[..]),
                &at.tp,
                record,
            ))
        }
    };
    let mut replayed = None;
    if let Some(dead) = ctx.dead {
        if let Some(entry) = dead.entry(lane, record.offset) {
            return dead_lettered(ctx, dead, entry, node, next, lane, depth, replay);
        }
        // Not dead-lettered, in a stage that dead-letters what it refuses.
        let refusal = match bad_stamp {
            Some(error) => Some(format!("its stamp header does not decode ({error})")),
            None => {
                let outcome = replay()?;
                let refusal = outcome
                    .as_ref()
                    .err()
                    .map(|error| format!("its logic refuses it ({error})"));
                replayed = Some(outcome);
                refusal
            }
        };
        if let Some(refusal) = refusal {
            let dlq = dead
                .log
                .map_or_else(String::new, |log| format!(" on {}", log.tp));
            return Err(Failure {
                invariant: Invariant::I10,
                message: format!(
                    "task {id} delivered {delivered} in its committed history (after {depth} deliveries), but {refusal}, and no committed dead letter{dlq} names it (record lost)"
                ),
            });
        }
    }
    next.history.merge(stamp);
    next.history.claim(&at.tp, record.offset);
    let replayed = match replayed {
        Some(outcome) => outcome,
        None => replay()?,
    }
    .map_err(|error| Failure {
        invariant: Invariant::I6,
        message: format!(
            "task {id} delivered {delivered} in its committed history (after {depth} deliveries), but its logic fails there: {error}"
        ),
    })?;
    let mut took = Vec::new();
    for emission in &replayed.emissions {
        let Ok((key, _)) = emission.encoded() else {
            return Err(Failure {
                invariant: Invariant::I7,
                message: format!("task {id}: delivering {delivered} emits {emission:?}, which does not encode, yet the delivery is committed"),
            });
        };
        let topic = emission.topic();
        let target = ctx
            .outs
            .iter()
            .position(|out| {
                out.log.tp.topic == *topic
                    && out.log.tp.partition
                        == partition_for(
                            key.map(|key| &key[..]),
                            ctx.assembly.partitions_of(topic.as_str()).unwrap_or(1),
                            id.partition,
                        )
            })
            .ok_or_else(|| Failure {
                invariant: Invariant::I7,
                message: format!("task {id}: delivering {delivered} emits {emission:?}, to a partition that was not read"),
            })?;
        let out = &ctx.outs[target];
        let mut entry = next.out[target];
        // The first record with the emission's bytes whose stamp falls short:
        // if nothing else matches, that is the emission, badly stamped.
        let mut short: Option<usize> = None;
        loop {
            let Some(&(record_index, sole)) = out.entries.get(entry) else {
                return Err(match short {
                    Some(record_index) => {
                        badly_stamped(ctx, target, record_index, stamp, at, record, &next.history)
                    }
                    None => lost(ctx, target, &delivered, emission),
                });
            };
            let candidate = &out.log.records[record_index];
            if ctx.taken.contains(&(out.log.tp.clone(), candidate.offset)) {
                entry += 1;
                continue;
            }
            let content = same_content(candidate, emission);
            if content && out.log.stamp(record_index).dominates(&next.history) {
                took.push((target, entry));
                next.out[target] = entry + 1;
                break;
            }
            if content && short.is_none() {
                short = Some(record_index);
            }
            if sole {
                return Err(match short {
                    Some(record_index) => {
                        badly_stamped(ctx, target, record_index, stamp, at, record, &next.history)
                    }
                    None => mismatch(ctx, target, entry, &delivered, emission),
                });
            }
            entry += 1;
        }
    }
    // The delivery's own slot first, then the others (a timer service's
    // tick). Each joins the changes its transaction's commit writes, the
    // next changelog batch (S5): that batch must name the slot.
    let changes = std::iter::once((slot, replayed.slot)).chain(replayed.other_slots);
    for (slot, change) in changes {
        if change == SlotChange::Unchanged {
            continue;
        }
        let changelog = ctx.changelog.ok_or_else(|| Failure {
            invariant: Invariant::I6,
            message: format!("task {id}: delivering {delivered} changes slot {slot:?}, but the stage has no changelog"),
        })?;
        let value = match change {
            SlotChange::Set(bytes) => Some(bytes),
            _ => None,
        };
        if !ctx.batches.names(next.changelog, &slot) {
            let change = batches::describe_delivered_change(&slot, value.as_ref());
            let batch = ctx.batches.batch(changelog, next.changelog);
            let written = match (batch.is_empty(), next.pending.is_empty()) {
                (true, _) => batches::describe(changelog, batch),
                (false, true) => format!(
                    "its transaction's changelog records, {}, do not name that slot",
                    batches::describe(changelog, batch)
                ),
                // The likelier story: the earlier changes were that batch,
                // written wrong.
                (false, false) => format!(
                    "its transaction's changelog records, {}, do not name that slot, nor are they the changes before it ({})",
                    batches::describe(changelog, batch),
                    batches::describe_pending(&next.pending)
                ),
            };
            return Err(Failure {
                invariant: Invariant::I6,
                message: format!(
                    "task {id}: delivering {delivered} {change}, but {written} (state change lost)"
                ),
            });
        }
        match &value {
            Some(bytes) => {
                next.slots.insert(slot.clone(), bytes.clone());
            }
            None => {
                next.slots.remove(&slot);
            }
        }
        match next
            .pending
            .iter()
            .position(|(pending, _)| *pending == slot)
        {
            Some(index) => {
                next.pending[index].1 = value;
                next.pending_by[index].clone_from(&delivered);
            }
            None => {
                next.pending.push((slot, value));
                next.pending_by.push(delivered.clone());
            }
        }
    }
    Ok((next, took))
}

/// A delivery that the task's dead letter `entry` stands in for (X5): it
/// wrote that dead letter, as the next of its partition of the dead-letter
/// topic, with a stamp that dominates the history after it (G5), and
/// nothing else; the fold goes on without it. Unless the operator skipped
/// the record, the logic must refuse it (or its stamp not decode). The
/// history claims the record, and merges its stamp unless it was skipped
/// while the gate held it (docs/RULES.md#skip).
#[allow(clippy::too_many_arguments)]
pub(super) fn dead_lettered(
    ctx: &Ctx<'_, '_>,
    dead: &DeadLetters<'_>,
    entry: usize,
    node: &Node,
    mut next: Node,
    lane: usize,
    depth: usize,
    replay: impl Fn() -> Result<Result<Replayed, ReplayError>, Failure>,
) -> Result<(Node, Vec<(usize, usize)>), Failure> {
    let task = ctx.task;
    let id = &task.id;
    let at = &task.lanes[lane];
    let index = node.pos[lane];
    let record = &at.log.records[index];
    let delivered = format!("{}@{}", at.tp, record.offset);
    let (log, letter) = dead.record(entry);
    let kind = dead.entries[entry].1;
    let bad_stamp = at.log.stamps[index].is_err();
    if kind != DeadLetterKind::Skipped && !bad_stamp {
        if let Ok(replayed) = replay()? {
            let effects = replayed.emissions.len()
                + usize::from(!matches!(replayed.slot, SlotChange::Unchanged))
                + replayed.other_slots.len();
            return Err(Failure {
                invariant: Invariant::I10,
                message: format!(
                    "task {id}: {}@{} dead-letters {delivered} ({kind}), but its logic accepts that record (after {depth} deliveries, with {effects} effect(s)) and it is not skipped",
                    log.tp, letter.offset
                ),
            });
        }
    }
    if node.dead != entry {
        let (_, expected) = dead.record(node.dead);
        return Err(Failure {
            invariant: Invariant::I10,
            message: format!(
                "task {id}: delivering {delivered} (after {depth} deliveries) writes its dead letter {}@{}, but the task's next dead letter is {}@{} (a task writes its dead letters in delivery order)",
                log.tp, letter.offset, log.tp, expected.offset
            ),
        });
    }
    next.dead += 1;
    let held = kind == DeadLetterKind::Skipped && blocker(task, &node.pos, lane).is_some();
    if !held {
        next.history.merge(at.log.stamp(index));
    }
    next.history.claim(&at.tp, record.offset);
    let letter_stamp = log.stamp(dead.entries[entry].0);
    if !letter_stamp.dominates(&next.history) {
        return Err(Failure {
            invariant: Invariant::I5,
            message: format!(
                "task {id}: {}@{}, the dead letter of {delivered}, has stamp {letter_stamp}, which does not dominate the task's history after that delivery, {}, in the reconstructed order (G5)",
                log.tp, letter.offset, next.history
            ),
        });
    }
    Ok((next, Vec::new()))
}

/// I5: the record that carries an emission's bytes has a stamp that does not
/// dominate the history after the delivery.
pub(super) fn badly_stamped(
    ctx: &Ctx<'_, '_>,
    target: usize,
    record_index: usize,
    delivered_stamp: &Stamp,
    at: &Lane<'_>,
    delivered: &ConsumedRecord,
    history: &Stamp,
) -> Failure {
    let out = &ctx.outs[target];
    let candidate = &out.log.records[record_index];
    let candidate_stamp = out.log.stamp(record_index);
    let mut inherited = delivered_stamp.clone();
    inherited.claim(&at.tp, delivered.offset);
    let what = if candidate_stamp.dominates(&inherited) {
        format!("does not dominate the task's history after that delivery, {history}, in the reconstructed order")
    } else {
        format!("does not claim the delivered record and its causes, {inherited}")
    };
    Failure {
        invariant: Invariant::I5,
        message: format!(
            "task {}: {}@{} {} was emitted while delivering {}@{}, but its stamp {candidate_stamp} {what} (G5)",
            ctx.task.id,
            out.log.tp,
            candidate.offset,
            describe_record(candidate),
            at.tp,
            delivered.offset
        ),
    }
}

/// An emission with no committed record left on its partition.
pub(super) fn lost(
    ctx: &Ctx<'_, '_>,
    target: usize,
    delivered: &str,
    emission: &Emission,
) -> Failure {
    let out = &ctx.outs[target];
    Failure {
        invariant: Invariant::I7,
        message: format!(
            "task {}: delivering {delivered} emits {emission:?} to {}, but no committed record of the task there carries it (lost)",
            ctx.task.id, out.log.tp
        ),
    }
}

/// An emission whose next committed record is another one: either the
/// records before a later match are extra (or duplicated), or the emission is
/// lost.
pub(super) fn mismatch(
    ctx: &Ctx<'_, '_>,
    target: usize,
    entry: usize,
    delivered: &str,
    emission: &Emission,
) -> Failure {
    let out = &ctx.outs[target];
    let record = &out.log.records[out.entries[entry].0];
    let later = out.entries[entry + 1..]
        .iter()
        .map(|&(index, _)| &out.log.records[index])
        .find(|later| same_content(later, emission));
    match later {
        Some(later) => {
            let repeats = out.copy_before(entry, record, |_| false);
            let what = match repeats {
                Some(earlier) => format!("duplicated: it repeats {}@{}", out.log.tp, earlier.offset),
                None => "extra".to_string(),
            };
            Failure {
                invariant: Invariant::I7,
                message: format!(
                    "task {}: {}@{} {} is committed, but no committed delivery emits it ({what}); delivering {delivered} emits {emission:?}, found further on at {}@{}",
                    ctx.task.id,
                    out.log.tp,
                    record.offset,
                    describe_record(record),
                    out.log.tp,
                    later.offset
                ),
            }
        }
        None => Failure {
            invariant: Invariant::I7,
            message: format!(
                "task {}: delivering {delivered} emits {emission:?} to {}, but the task's next committed record there is {}@{} {} and none later carries it (lost)",
                ctx.task.id,
                out.log.tp,
                out.log.tp,
                record.offset,
                describe_record(record)
            ),
        },
    }
}
