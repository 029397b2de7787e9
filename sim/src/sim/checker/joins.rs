//! I13: stream–table joins (J1–J3), from each task's committed deliveries
//! alone.
//!
//! The checker keeps its own copy of every join task's table: the latest
//! committed table record of each key the task delivered, none after a
//! tombstone, and how far into its table partition the task has delivered.
//! It uses none of the join's state or delivery code: it decides itself
//! whether a stream record has a result (an inner join writes nothing
//! without a row); only the result of the user's joiner on the record and
//! the row, encoded with the output's codecs (`JoinDecl::joined`), comes
//! from the stage. A delivery that disagrees has that call made again
//! (S4, [`super::purity`]).

use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::JoinDecl;
use parsley::JoinKind;
use parsley::ReplayError;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::Tp;
use rustc_hash::FxHashMap;

use super::operated::describe;
use super::purity::{Answer, UserCalls};
use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// A key's row as the checker has it: the table record that set it (its
/// value) or deleted it (`None`), and where that record was.
struct Row {
    value: Option<Bytes>,
    at: (Tp, u64),
}

/// One task's table.
#[derive(Default)]
struct Table {
    rows: FxHashMap<Bytes, Row>,
    /// The offset after the last table record the task delivered.
    delivered_to: u64,
}

impl Table {
    /// The row of `key` as the delivery of a stream record reads it, told.
    fn describe(&self, key: &Bytes) -> String {
        match self.rows.get(key) {
            Some(Row {
                value: Some(value),
                at: (tp, offset),
            }) => format!("its row was {tp}@{offset} = {}", bytes_for_humans(value)),
            Some(Row {
                value: None,
                at: (tp, offset),
            }) => format!("it had no row (deleted by the tombstone {tp}@{offset})"),
            None => "it had no row (no table record of the key delivered)".to_string(),
        }
    }
}

impl<'a> Checker<'a> {
    /// I13 (J1–J3) for every stream–table join: each task's committed
    /// deliveries, in committed order, through the checker's own table;
    /// each stream record's delivery must write the join with its key's
    /// row, and nothing else, and the row must include every table record
    /// the stream record claims. A task is reported once, at its first
    /// wrong delivery (later ones follow from it).
    pub(super) fn check_joins(&mut self, committed: &Committed<'a>) {
        self.check_each_operator(committed, Table::default, Self::check_join_delivery);
    }

    /// One committed delivery; false once it is reported.
    fn check_join_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &JoinDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        table: &mut Table,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        let is_table = delivery.tp.topic == decl.table;
        if is_table {
            table.delivered_to = table.delivered_to.max(delivery.offset + 1);
        }
        if delivery.dead_lettered(plan) {
            return true;
        }
        let Some(key) = record.data.key.clone() else {
            // Refused (J1, J2): I6 and I10 judge the delivery.
            return true;
        };
        if is_table {
            // J1: the latest table record of the key is its row.
            table.rows.insert(
                key,
                Row {
                    value: record.data.value.clone(),
                    at: (delivery.tp.clone(), delivery.offset),
                },
            );
            return true;
        }
        let what = format!(
            "{}@{} (key {})",
            delivery.tp,
            delivery.offset,
            bytes_for_humans(&key)
        );
        // J3: the row includes every table record the stamp claims on the
        // task's table partition.
        let table_tp = Tp::new(decl.table.clone(), task.partition);
        let claimed = self
            .tps
            .stamp(delivery.id, delivery.offset)
            .and_then(|stamp| stamp.offset(&table_tp));
        if let Some(claimed) = claimed.filter(|claimed| *claimed >= table.delivered_to) {
            let delivered = match table.delivered_to {
                0 => format!("nothing of {table_tp} yet"),
                to => format!("{table_tp} only up to {table_tp}@{}", to - 1),
            };
            let message = format!(
                "task {task} joined {what}, whose stamp claims the table update {table_tp}@{claimed}, when it had delivered {delivered}: the join read a table older than its record's causes (J3); {}",
                table.describe(&key)
            );
            self.violation(Invariant::I13, delivery.step, message)
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
            return false;
        }
        // J2: the join of the record with its key's row, or nothing.
        let row = table
            .rows
            .get(&key)
            .and_then(|row| row.value.as_ref())
            .map(|value| &value[..]);
        let mut calls = UserCalls::default();
        let expected = match (decl.kind, row) {
            (JoinKind::Inner, None) => None,
            (_, row) => {
                let joined = decl.joined(delivery.tp, &record, row);
                let row = row.map(Bytes::copy_from_slice);
                calls.note("joiner", answer_of(&joined), move |plan, tp, record| {
                    let decl = plan.stage.hooks().operator::<JoinDecl>()?;
                    Some(answer_of(&decl.joined(tp, record, row.as_deref())))
                });
                let Ok(joined) = joined else {
                    // The joiner or a codec refuses it: I6 and I10 judge that.
                    return true;
                };
                joined
            }
        };
        let output = decl.output.as_ref();
        let wrote = self.written_to(delivery, output);
        let same = match (&expected, &wrote[..]) {
            (None, []) => true,
            (Some((key, value)), [written]) => {
                written.key == *key && written.value.as_ref() == Some(value)
            }
            _ => false,
        };
        if same {
            return true;
        }
        let output = output.map_or("its output", |topic| topic.as_str());
        let mut message = format!(
            "task {task} committed the delivery of {what}, when {}: the join should write ",
            table.describe(&key)
        );
        match &expected {
            Some((key, value)) => {
                let _ = write!(
                    message,
                    "1 record to {output} (key {}, value {})",
                    describe(key),
                    bytes_for_humans(value)
                );
            }
            None => {
                let _ = write!(message, "nothing to {output} (an inner join without a row)");
            }
        }
        self.report_join_delivery(task, delivery, &record, &calls, message, &wrote)
    }
}

/// A joiner's answer as the S4 probe compares it.
#[allow(clippy::type_complexity)]
fn answer_of(joined: &Result<Option<(Option<Bytes>, Bytes)>, ReplayError>) -> Answer {
    Answer::of(joined, |joined| match joined {
        Some((key, value)) => vec![key.clone(), Some(value.clone())],
        None => Vec::new(),
    })
}
