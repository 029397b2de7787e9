//! The outputs' lookahead: a search node whose history already exceeds the
//! stamp of an output the task must still emit is a dead end.
//!
//! A task's history only grows, and an emission matches a committed record
//! only if that record's stamp dominates the history after the delivery
//! (G5). So when the next committed record the task must account for on one
//! of its output partitions (the first one no other task took, that only
//! this task writes, within the cut) has a stamp that does not dominate the
//! history already, no later delivery can emit it, whatever the order. The
//! search stops there at once instead of trying every interleaving of the
//! deliveries that could still follow: without this, a duplicated or extra
//! output deep in a long log made the search try the orders of everything
//! before it, and a busy task's audit ran out of steps.

use super::index::describe_record;
use super::search::{Ctx, Failure, Node};
use super::Invariant;

/// The failure of `node`, reached by delivering `lane`'s head after
/// `depth` deliveries, if one of its outputs can no longer be emitted.
pub(super) fn unreachable_output(
    ctx: &Ctx<'_, '_>,
    node: &Node,
    lane: usize,
    depth: usize,
) -> Option<Failure> {
    for (target, out) in ctx.outs.iter().enumerate() {
        let Some(entry) = (node.out[target]..out.entries.len()).find(|&entry| {
            let (record_index, sole) = out.entries[entry];
            sole && !ctx
                .taken
                .contains(&(out.log.tp.clone(), out.log.records[record_index].offset))
        }) else {
            continue;
        };
        let record_index = out.entries[entry].0;
        // A stamp that does not decode is reported where it is matched.
        let Ok(stamp) = &out.log.stamps[record_index] else {
            continue;
        };
        if stamp.dominates(&node.history) {
            continue;
        }
        let record = &out.log.records[record_index];
        // Records beyond the cut may be left over: none is required.
        if ctx.beyond.contains(&(out.log.tp.clone(), record.offset)) {
            continue;
        }
        let at = &ctx.task.lanes[lane];
        let delivered = at.log.records[node.pos[lane] - 1].offset;
        // An earlier record of the task's own with the same bytes: the
        // entries before the cursor, less those another task took.
        let repeats = out.copy_before(node.out[target], record, |earlier| {
            ctx.taken.contains(&(out.log.tp.clone(), earlier.offset))
        });
        // I7 either way, as a record left over at the end is: the record is
        // no emission of this order of deliveries (its stamp may also be
        // wrong, I5, which only its emission could tell).
        let what = match repeats {
            Some(earlier) => format!(
                "no committed delivery emits it (duplicated: it repeats {}@{})",
                out.log.tp, earlier.offset
            ),
            None => "no committed delivery emits it (extra), or its stamp misses causes its emission had".to_string(),
        };
        return Some(Failure {
            invariant: Invariant::I7,
            message: format!(
                "task {}: {}@{} {} is the task's next committed record on its partition, but its stamp {stamp} does not dominate the task's history after delivering {}@{delivered} (after {depth} deliveries), {}, so no later delivery can have emitted it (G5): {what}",
                ctx.task.id,
                out.log.tp,
                record.offset,
                describe_record(record),
                at.tp,
                node.history
            ),
        });
    }
    None
}
