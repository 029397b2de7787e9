//! I13: table–table joins (J8), from each task's committed deliveries
//! alone.
//!
//! The checker keeps its own copy of each join task's two tables: the
//! latest committed record of each key the task delivered from each side,
//! none after a tombstone; and decides by itself, with its own J8 rule,
//! whether a key has a result with its sides. It uses none of the join's
//! state and none of its code: only the value of a result it has decided
//! on (`TableJoinDecl::joined`, the user's joiner with the topics' codecs
//! and nothing else) comes from the stage.

use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::StagePlan;
use parsley::TableJoinDecl;
use parsley::TableJoinKind;
use parsley::TaskId;
use rustc_hash::FxHashMap;

use super::operated::describe;
use super::purity::{Answer, UserCalls};
use super::reconstruction::{Committed, Delivery};
use super::Checker;

/// What a delivery must write under its key.
enum Write {
    Nothing,
    Tombstone,
    /// The key's result (none: J8 says the sides have one, and the
    /// stage's joiner gave none, so no record the stage wrote can be it).
    Result(Option<Bytes>),
}

/// A key's two sides as the checker has them: each the value of the latest
/// record of its table the task delivered, `None` without one.
#[derive(Clone, Default, PartialEq)]
struct Sides {
    left: Option<Bytes>,
    right: Option<Bytes>,
}

impl<'a> Checker<'a> {
    /// I13 (J8) for every table–table join: each task's committed
    /// deliveries, in committed order, through the checker's own tables;
    /// each delivery must write the key's result if it has one after the
    /// record, a tombstone if it had one before and has none after, and
    /// nothing else. A task is reported once, at its first wrong delivery
    /// (later ones follow from it).
    pub(super) fn check_table_joins(&mut self, committed: &Committed<'a>) {
        self.check_each_operator(
            committed,
            FxHashMap::<Bytes, Sides>::default,
            Self::check_table_join_delivery,
        );
    }

    /// One committed delivery; false once it is reported.
    fn check_table_join_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &TableJoinDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        tables: &mut FxHashMap<Bytes, Sides>,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        if delivery.dead_lettered(plan) {
            return true;
        }
        let Some(key) = record.data.key.clone() else {
            // Refused (J9): I6 and I10 judge the delivery.
            return true;
        };
        let is_left = delivery.tp.topic == decl.left;
        let before = tables.get(&key).cloned().unwrap_or_default();
        let mut after = before.clone();
        match is_left {
            true => after.left = record.data.value.clone(),
            false => after.right = record.data.value.clone(),
        }
        // J8: the key's result after the record, and whether it had one.
        let changed = after != before || record.data.value.is_some();
        let mut calls = UserCalls::default();
        let had = has_result(decl.kind, before.left.is_some(), before.right.is_some());
        let has = has_result(decl.kind, after.left.is_some(), after.right.is_some());
        let expected = match (changed, has) {
            (false, _) => Write::Nothing,
            (true, false) if had => Write::Tombstone,
            (true, false) => Write::Nothing,
            (true, true) => {
                let joined = decl.joined(&key, after.left.as_deref(), after.right.as_deref());
                let sides = (key.clone(), after.left.clone(), after.right.clone());
                calls.note("joiner", answer_of(&joined), move |plan, _, _| {
                    let decl = plan.stage.hooks().operator::<TableJoinDecl>()?;
                    let (key, left, right) = &sides;
                    Some(answer_of(&decl.joined(
                        key,
                        left.as_deref(),
                        right.as_deref(),
                    )))
                });
                let Ok(joined) = joined else {
                    // The joiner or a codec refuses it: I6 and I10 judge that.
                    return true;
                };
                Write::Result(joined)
            }
        };
        match (after.left.is_none() && after.right.is_none(), changed) {
            (true, _) => {
                tables.remove(&key);
            }
            (false, true) => {
                tables.insert(key.clone(), after.clone());
            }
            (false, false) => {}
        }
        let output = decl.output.as_ref();
        let wrote = self.written_to(delivery, output);
        let same = match (&expected, &wrote[..]) {
            (Write::Nothing, []) => true,
            (Write::Tombstone, [written]) => {
                written.key.as_ref() == Some(&key) && written.value.is_none()
            }
            (Write::Result(Some(value)), [written]) => {
                written.key.as_ref() == Some(&key) && written.value.as_ref() == Some(value)
            }
            _ => false,
        };
        if same {
            return true;
        }
        let output = output.map_or("its output", |topic| topic.as_str());
        let side = if is_left { "left" } else { "right" };
        let mut message = format!(
            "task {task} committed the delivery of {}@{} (key {}, {side} value {}), when the key's sides were left {} and right {}: the join should write ",
            delivery.tp,
            delivery.offset,
            bytes_for_humans(&key),
            describe(&record.data.value),
            describe(&before.left),
            describe(&before.right),
        );
        match &expected {
            Write::Result(Some(value)) => {
                let _ = write!(
                    message,
                    "its result {} to {output}",
                    bytes_for_humans(value)
                );
            }
            Write::Result(None) => {
                let _ = write!(
                    message,
                    "its result to {output} (J8: the key has one with these sides; the stage's joiner gave none)"
                );
            }
            Write::Tombstone => {
                let _ = write!(
                    message,
                    "a tombstone to {output} (the record removes the key's result)"
                );
            }
            Write::Nothing => {
                let _ = write!(
                    message,
                    "nothing to {output} (the key had no result and has none)"
                );
            }
        }
        self.report_join_delivery(task, delivery, &record, &calls, message, &wrote)
    }
}

/// J8, as the checker reads it: whether a key with these sides has a
/// result (inner: both, left: a left side, outer: either).
fn has_result(kind: TableJoinKind, left: bool, right: bool) -> bool {
    match kind {
        TableJoinKind::Inner => left && right,
        TableJoinKind::Left => left,
        TableJoinKind::Outer => left || right,
    }
}

/// A joiner's answer as the S4 probe compares it.
fn answer_of(joined: &Result<Option<Bytes>, parsley::ReplayError>) -> Answer {
    Answer::of(joined, |joined| vec![joined.clone()])
}
