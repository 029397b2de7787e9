//! I13 for stream–stream joins (J5–J7), from each task's committed
//! deliveries alone.
//!
//! The checker keeps its own model of every join task: the frontier, and
//! the records held with their side, timestamp and whether they joined,
//! closed by its own window arithmetic, and decides by itself which pairs
//! and which unmatched records have a result (J5, J7). It uses none of the
//! join's state and none of its pairing: only the output record of a pair
//! or of an unmatched record (`StreamJoinDecl::joined`, the user's joiner
//! with the topics' codecs and nothing else) comes from the stage.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::ConsumedRecord;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::Tp;
use parsley::{StreamJoinDecl, StreamJoinKind};

use super::operated::describe;
use super::purity::{Answer, UserCalls};
use super::reconstruction::{Committed, Delivery};
use super::Checker;

/// A join's window in milliseconds, as the checker computes with it.
struct Window {
    before: i64,
    after: i64,
    grace: i64,
    kind: StreamJoinKind,
}

impl Window {
    fn of(decl: &StreamJoinDecl) -> Window {
        let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Window {
            before: millis(decl.before),
            after: millis(decl.after),
            grace: millis(decl.grace),
            kind: decl.kind,
        }
    }

    /// J6: the point the frontier must pass for the record's window to
    /// close.
    fn close_point(&self, left: bool, timestamp: i64) -> i64 {
        let ahead = if left { self.after } else { self.before };
        timestamp.saturating_add(ahead).saturating_add(self.grace)
    }

    /// J5: a left record at `left` and a right one at `right` join.
    fn in_window(&self, left: i64, right: i64) -> bool {
        left.saturating_sub(self.before) <= right && right <= left.saturating_add(self.after)
    }

    /// J7: the sides written unmatched.
    fn writes_unmatched(&self, left: bool) -> bool {
        match self.kind {
            StreamJoinKind::Inner => false,
            StreamJoinKind::Left => left,
            StreamJoinKind::Outer => true,
        }
    }
}

/// A record the model holds.
struct Held {
    left: bool,
    timestamp: i64,
    matched: bool,
    tp: Tp,
    record: ConsumedRecord,
}

/// One task's join, as the checker has it.
struct Model {
    frontier: i64,
    /// By key bytes, in arrival order.
    held: BTreeMap<Bytes, Vec<Held>>,
}

/// An output record the model expects: what it is, and its bytes (no
/// value: J5 or J7 says the sides have a result, and the stage's joiner
/// gave none, so no record the stage wrote can be it).
struct Expected {
    label: String,
    key: Option<Bytes>,
    value: Option<Bytes>,
}

impl<'a> Checker<'a> {
    /// I13 (J5–J7) for every stream–stream join: each task's committed
    /// deliveries, in committed order, through the checker's own model;
    /// each delivery's writes on the output must be what the model says,
    /// in order. A task is reported once, at its first wrong delivery.
    pub(super) fn check_stream_joins(&mut self, committed: &Committed<'a>) {
        let model = || Model {
            frontier: i64::MIN,
            held: BTreeMap::new(),
        };
        self.check_each_operator(committed, model, Self::check_stream_join_delivery);
    }

    /// One committed delivery; false once it is reported.
    fn check_stream_join_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &StreamJoinDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        model: &mut Model,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        let window = Window::of(decl);
        let left = delivery.tp.topic == decl.left;
        if !left && delivery.tp.topic != decl.right {
            return true;
        }
        if delivery.dead_lettered(plan) {
            return true;
        }
        let timestamp = record.data.timestamp;
        let (Some(key), Some(_)) = (record.data.key.clone(), &record.data.value) else {
            // Refused (J5): I6 and I10 judge the delivery.
            return true;
        };
        if timestamp < 0 {
            return true;
        }
        let frontier = model.frontier.max(timestamp);
        let mut expected = Vec::new();
        let mut calls = UserCalls::default();
        // J6, J7: what the frontier closes, unmatched ones written.
        let mut closed: Vec<(i64, bool, Bytes, usize, &Held)> = Vec::new();
        for (held_key, held) in &model.held {
            for (arrival, one) in held.iter().enumerate() {
                if window.close_point(one.left, one.timestamp) < frontier
                    && !one.matched
                    && window.writes_unmatched(one.left)
                {
                    closed.push((one.timestamp, one.left, held_key.clone(), arrival, one));
                }
            }
        }
        closed.sort_by(|a, b| (a.0, a.1, &a.2, a.3).cmp(&(b.0, b.1, &b.2, b.3)));
        for (_, _, _, _, one) in &closed {
            let label = format!(
                "the unmatched result of {}@{} (timestamp {}, its window closed at {})",
                one.tp,
                one.record.offset,
                one.timestamp,
                window.close_point(one.left, one.timestamp)
            );
            match self.expect(plan, &one.tp, &one.record, None, label, &mut calls) {
                Some(output) => expected.push(output),
                None => return true,
            }
        }
        // J5: the pairs with the other side's held records in window.
        let still_open = |one: &Held| window.close_point(one.left, one.timestamp) >= frontier;
        let mut pairs: Vec<(i64, usize)> = model
            .held
            .get(&key)
            .map(|held| {
                held.iter()
                    .enumerate()
                    .filter(|(_, one)| {
                        one.left != left
                            && still_open(one)
                            && match left {
                                true => window.in_window(timestamp, one.timestamp),
                                false => window.in_window(one.timestamp, timestamp),
                            }
                    })
                    .map(|(arrival, one)| (one.timestamp, arrival))
                    .collect()
            })
            .unwrap_or_default();
        pairs.sort();
        for (_, arrival) in &pairs {
            let one = &model.held[&key][*arrival];
            let label = format!(
                "the pair with {}@{} (timestamp {})",
                one.tp, one.record.offset, one.timestamp
            );
            let other = one
                .record
                .data
                .value
                .clone()
                .expect("held records have values");
            match self.expect(plan, delivery.tp, &record, Some(&other), label, &mut calls) {
                Some(output) => expected.push(output),
                None => return true,
            }
        }
        let own_open = window.close_point(left, timestamp) >= frontier;
        if !own_open && pairs.is_empty() && window.writes_unmatched(left) {
            let label = format!(
                "its own unmatched result (its window closed at {}, before it came)",
                window.close_point(left, timestamp)
            );
            match self.expect(plan, delivery.tp, &record, None, label, &mut calls) {
                Some(output) => expected.push(output),
                None => return true,
            }
        }
        let wrote = self.written_to(delivery, decl.output.as_ref());
        let same = expected.len() == wrote.len()
            && expected.iter().zip(&wrote).all(|(want, got)| {
                want.key == got.key && want.value.is_some() && want.value == got.value
            });
        if !same {
            let output = decl
                .output
                .as_ref()
                .map_or("its output", |topic| topic.as_str());
            let mut message = format!(
                "task {task} committed the delivery of {}@{} (key {}, timestamp {timestamp}, frontier then {frontier}): the join should write {} record(s) to {output}",
                delivery.tp,
                delivery.offset,
                bytes_for_humans(&key),
                expected.len()
            );
            for want in &expected {
                let _ = write!(
                    message,
                    "; {}: key {} value {}",
                    want.label,
                    describe(&want.key),
                    want.value.as_ref().map_or(
                        "none: the stage's joiner gave no result for sides that have one"
                            .to_string(),
                        |value| bytes_for_humans(value)
                    )
                );
            }
            return self.report_join_delivery(task, delivery, &record, &calls, message, &wrote);
        }
        // The model moves on as J5–J7 say.
        model.frontier = frontier;
        if let Some(held) = model.held.get_mut(&key) {
            for (_, arrival) in &pairs {
                held[*arrival].matched = true;
            }
        }
        if own_open {
            model.held.entry(key).or_default().push(Held {
                left,
                timestamp,
                matched: !pairs.is_empty(),
                tp: delivery.tp.clone(),
                record,
            });
        }
        model.held.retain(|_, held| {
            held.retain(|one| window.close_point(one.left, one.timestamp) >= frontier);
            !held.is_empty()
        });
        true
    }

    /// The stage's output for `record` of `tp` joined with `other` (`None`:
    /// its unmatched result), which the model has decided has one (J5,
    /// J7): `None` when the joiner or a codec refuses it (I6 and I10 judge
    /// that). A joiner that gives no result for it is expected all the same,
    /// with no value.
    fn expect(
        &self,
        plan: &StagePlan,
        tp: &Tp,
        record: &ConsumedRecord,
        other: Option<&[u8]>,
        label: String,
        calls: &mut UserCalls<'_>,
    ) -> Option<Expected> {
        let joined = plan
            .stage
            .hooks()
            .operator::<parsley::StreamJoinDecl>()?
            .joined(tp, record, other);
        let key = record.data.key.clone();
        let (tp, record, other) = (
            tp.clone(),
            record.clone(),
            other.map(Bytes::copy_from_slice),
        );
        calls.note("joiner", answer_of(&joined), move |plan, _, _| {
            let decl = plan.stage.hooks().operator::<parsley::StreamJoinDecl>()?;
            Some(answer_of(&decl.joined(&tp, &record, other.as_deref())))
        });
        Some(match joined.ok()? {
            Some((key, value)) => Expected {
                label,
                key,
                value: Some(value),
            },
            None => Expected {
                label,
                key,
                value: None,
            },
        })
    }
}

/// A joiner's answer as the S4 probe compares it.
#[allow(clippy::type_complexity)]
fn answer_of(joined: &Result<Option<(Option<Bytes>, Bytes)>, parsley::ReplayError>) -> Answer {
    Answer::of(joined, |joined| match joined {
        Some((key, value)) => vec![key.clone(), Some(value.clone())],
        None => Vec::new(),
    })
}
