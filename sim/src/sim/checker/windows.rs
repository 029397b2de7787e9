//! I12: windows (W1–W5), from each task's committed deliveries alone:
//! what each delivery writes, and at which timestamp (W4).
//!
//! The checker keeps its own model of every task of a windowed aggregation:
//! which windows each record belongs to, where the close frontier stands,
//! which windows are open, which records each holds and its aggregate. It
//! uses none of the aggregation's state, window arithmetic or session
//! merging: it folds each record into its windows' aggregates itself and,
//! for a record that bridges sessions, merges the joined sessions'
//! aggregates in start order into the initial value before folding the
//! record in (W5). Only the user's logic comes from the stage, encoded with
//! its codecs: the initial value, fold and merge, and a window's output
//! record (`WindowDecl::initial`, `fold`, `merge`, `output`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::ConsumedRecord;
use parsley::ReplayError;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::Tp;
use parsley::{Close, Emit, WindowDecl, WindowShape};

use super::operated::describe;
use super::purity::{Answer, UserCalls};
use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// An aggregation's windows, in milliseconds, as the checker computes
/// them.
enum Shape {
    /// W1: windows `[start, start + size)` starting every `advance`.
    Time { size: i64, advance: i64, grace: i64 },
    /// W5: sessions `[start, end]` of one key's records at most `gap`
    /// apart.
    Session { gap: i64, grace: i64 },
}

impl Shape {
    fn of(decl: &WindowDecl) -> Shape {
        let millis =
            |duration: std::time::Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        let grace = millis(decl.grace);
        match decl.shape {
            WindowShape::Time { size, advance } => Shape::Time {
                size: millis(size),
                advance: millis(advance).max(1),
                grace,
            },
            WindowShape::Session { gap } => Shape::Session {
                gap: millis(gap),
                grace,
            },
        }
    }

    /// W1: the starts of the time windows holding `timestamp`, earliest
    /// first: the latest start at or before it, and each advance before
    /// that while the window still reaches it, none before the epoch.
    fn starts(size: i64, advance: i64, timestamp: i64) -> Vec<i64> {
        let mut starts = Vec::new();
        let mut start = timestamp - timestamp.rem_euclid(advance);
        while start >= 0 && start + size > timestamp {
            starts.push(start);
            start -= advance;
        }
        starts.reverse();
        starts
    }

    /// W2: whether a window ending at `end` is closed at `frontier`: a
    /// time window once the frontier reaches its end plus grace; a session
    /// once it passes its end plus gap plus grace (a record at `end + gap`
    /// still joins it).
    fn closed(&self, end: i64, frontier: i64) -> bool {
        match *self {
            Shape::Time { grace, .. } => end.saturating_add(grace) <= frontier,
            Shape::Session { gap, grace } => {
                end.saturating_add(gap).saturating_add(grace) < frontier
            }
        }
    }

    /// Where a window ending at `end` closes, for messages.
    fn close_point(&self, end: i64) -> String {
        match *self {
            Shape::Time { grace, .. } => format!(
                "its end plus grace {} is at or before the frontier",
                end + grace
            ),
            Shape::Session { gap, grace } => format!(
                "its end plus gap plus grace {} is before the frontier",
                end + gap + grace
            ),
        }
    }

    /// A window's bounds as messages write them.
    fn bounds(&self, start: i64, end: i64) -> String {
        match self {
            Shape::Time { .. } => format!("window [{start}, {end})"),
            Shape::Session { .. } => format!("session [{start}, {end}]"),
        }
    }
}

/// One open window of the model: its end, the records it holds (each with
/// its place in the task's delivery order) and their aggregate, encoded.
struct Window {
    end: i64,
    records: Vec<(u64, Tp, ConsumedRecord)>,
    aggregate: Bytes,
}

/// One task's windows, as the checker has them.
struct Model {
    frontier: i64,
    /// By (key bytes, start).
    open: BTreeMap<(Bytes, i64), Window>,
    /// The deliveries the model has placed, for the order of a merged
    /// session's records.
    delivered: u64,
}

/// An output record the model expects: what it is, its bytes, and its
/// timestamp (W4: the highest of the window's records).
struct Expected {
    label: String,
    key: Bytes,
    value: Bytes,
    timestamp: i64,
}

impl<'a> Checker<'a> {
    /// I12 (W1–W4) for every windowed aggregation: each task's committed
    /// deliveries, in committed order, through the checker's own model;
    /// each delivery's writes on the output and late topics must be what
    /// the model says, in order. A task is reported once, at its first
    /// wrong delivery (later ones follow from it).
    pub(super) fn check_windows(&mut self, committed: &Committed<'a>) {
        let model = || Model {
            frontier: i64::MIN,
            open: BTreeMap::new(),
            delivered: 0,
        };
        self.check_each_operator(committed, model, Self::check_window_delivery);
    }

    /// One committed delivery; false once it is reported.
    fn check_window_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &WindowDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        model: &mut Model,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        let shape = &Shape::of(decl);
        if delivery.dead_lettered(plan) {
            return true;
        }
        let mut expected = Vec::new();
        let mut late_for = Vec::new();
        let mut calls = UserCalls::default();
        let is_tick = plan.tick_topic.as_ref() == Some(&delivery.tp.topic);
        let what;
        if is_tick {
            let Some(tick) = parsley::tick_of(&record) else {
                return true;
            };
            if matches!(decl.close, Close::WallClock { .. }) {
                model.frontier = model.frontier.max(tick.timestamp);
            }
            what = format!(
                "tick {}@{} (time {})",
                delivery.tp, delivery.offset, tick.timestamp
            );
        } else {
            let timestamp = record.data.timestamp;
            let Some(key) = record.data.key.clone() else {
                return true;
            };
            if timestamp < 0 {
                return true;
            }
            // A record the aggregation refuses (a codec, a failing fold)
            // changes nothing; I6 and I10 judge its delivery.
            let initial = decl.initial();
            calls.note(
                "initial aggregate",
                Answer::bytes(&initial),
                |plan, _, _| Some(Answer::bytes(&window_of(plan)?.initial())),
            );
            let Ok(initial) = initial else {
                return true;
            };
            if fold_noted(&mut calls, decl, &initial, delivery.tp, &record).is_err() {
                return true;
            }
            if decl.close == Close::StreamTime {
                model.frontier = model.frontier.max(timestamp);
            }
            model.delivered += 1;
            let placed = (model.delivered, delivery.tp.clone(), record.clone());
            match *shape {
                Shape::Time { size, advance, .. } => {
                    for start in Shape::starts(size, advance, timestamp) {
                        let end = start + size;
                        if shape.closed(end, model.frontier) {
                            late_for.push((start, end));
                            continue;
                        }
                        let window = model.open.entry((key.clone(), start)).or_insert(Window {
                            end,
                            records: Vec::new(),
                            aggregate: initial.clone(),
                        });
                        // W1: the record folded into each window it belongs to.
                        let Ok(folded) =
                            fold_noted(&mut calls, decl, &window.aggregate, delivery.tp, &record)
                        else {
                            return true;
                        };
                        window.aggregate = folded;
                        window.records.push(placed.clone());
                        if decl.emit == Emit::OnUpdate {
                            match self.window_output(
                                plan,
                                shape,
                                &key,
                                start,
                                &model.open[&(key.clone(), start)],
                                &mut calls,
                            ) {
                                Some(output) => expected.push(output),
                                None => return true,
                            }
                        }
                    }
                }
                Shape::Session { gap, .. } => {
                    // W5: the key's open sessions within the gap of the
                    // record, on either side, merge with it.
                    let joined: Vec<i64> = model
                        .open
                        .range((key.clone(), i64::MIN)..=(key.clone(), i64::MAX))
                        .filter(|((_, start), window)| {
                            window.end >= timestamp - gap && *start <= timestamp + gap
                        })
                        .map(|((_, start), _)| *start)
                        .collect();
                    let mut session = Window {
                        end: timestamp,
                        records: vec![placed],
                        aggregate: initial,
                    };
                    // W5: the initial value merged with each joined
                    // session's aggregate in start order, then the record
                    // folded in.
                    let mut start = timestamp;
                    for joined_start in &joined {
                        let window = &model.open[&(key.clone(), *joined_start)];
                        start = start.min(*joined_start);
                        session.end = session.end.max(window.end);
                        let merged = decl.merge(&session.aggregate, &window.aggregate);
                        let (into, earlier) = (session.aggregate.clone(), window.aggregate.clone());
                        calls.note("merge", Answer::bytes(&merged), move |plan, _, _| {
                            Some(Answer::bytes(&window_of(plan)?.merge(&into, &earlier)))
                        });
                        let Ok(merged) = merged else {
                            return true;
                        };
                        session.aggregate = merged;
                    }
                    let Ok(folded) =
                        fold_noted(&mut calls, decl, &session.aggregate, delivery.tp, &record)
                    else {
                        return true;
                    };
                    session.aggregate = folded;
                    if shape.closed(session.end, model.frontier) {
                        late_for.push((start, session.end));
                    } else {
                        for joined_start in joined {
                            let window = model
                                .open
                                .remove(&(key.clone(), joined_start))
                                .expect("listed as open");
                            session.records.extend(window.records);
                        }
                        session.records.sort_by_key(|(order, _, _)| *order);
                        model.open.insert((key.clone(), start), session);
                    }
                }
            }
            what = format!(
                "{}@{} (key {}, timestamp {timestamp})",
                delivery.tp,
                delivery.offset,
                bytes_for_humans(&key)
            );
        }
        // W2: every window the frontier reaches closes, in (end, key bytes,
        // start) order.
        let mut closing: Vec<(i64, Bytes, i64)> = model
            .open
            .iter()
            .filter(|(_, window)| shape.closed(window.end, model.frontier))
            .map(|((key, start), window)| (window.end, key.clone(), *start))
            .collect();
        closing.sort();
        for (_, key, start) in closing {
            let window = model
                .open
                .remove(&(key.clone(), start))
                .expect("listed as open");
            if decl.emit == Emit::OnClose {
                match self.window_output(plan, shape, &key, start, &window, &mut calls) {
                    Some(output) => expected.push(output),
                    None => return true,
                }
            }
        }
        let wrote = self.written_to(delivery, decl.output.as_ref());
        let wrote_late = self.written_to(delivery, decl.late.as_ref());
        let frontier = match model.frontier {
            i64::MIN => "none yet".to_string(),
            frontier => frontier.to_string(),
        };
        let mut problem = None;
        let same = expected.len() == wrote.len()
            && expected.iter().zip(&wrote).all(|(expected, written)| {
                written.key.as_ref() == Some(&expected.key)
                    && written.value.as_ref() == Some(&expected.value)
                    && written.timestamp == expected.timestamp
            });
        if !same {
            let mut message = format!(
                "task {task} committed the delivery of {what}, after which the close frontier is {frontier}: it should write {} record(s) to {}",
                expected.len(),
                decl.output.as_ref().map_or("its output", |topic| topic.as_str()),
            );
            for expected in &expected {
                let _ = write!(
                    message,
                    "; {} = {} at {}",
                    expected.label,
                    bytes_for_humans(&expected.value),
                    expected.timestamp
                );
            }
            let _ = write!(message, " — it wrote {}", wrote.len());
            for written in &wrote {
                let _ = write!(
                    message,
                    "; {}: key {} value {} at {}",
                    written.at,
                    describe(&written.key),
                    describe(&written.value),
                    written.timestamp
                );
            }
            problem = Some(message);
        }
        let late_expected = usize::from(!late_for.is_empty() && decl.late.is_some());
        let late_right = wrote_late.len() == late_expected
            && wrote_late.iter().all(|written| {
                written.key == record.data.key && written.value == record.data.value
            });
        if problem.is_none() && !late_right {
            let late = decl
                .late
                .as_ref()
                .map_or("the late topic", |topic| topic.as_str());
            let because = match late_for.first() {
                Some((start, end)) => format!(
                    "it is late for {} ({}), so it should be written once, as it came, to {late}",
                    shape.bounds(*start, *end),
                    shape.close_point(*end)
                ),
                None => format!(
                    "it is late for none of its windows, so nothing should be written to {late}"
                ),
            };
            let wrote: Vec<&str> = wrote_late
                .iter()
                .map(|written| written.at.as_str())
                .collect();
            problem = Some(format!(
                "task {task} committed the delivery of {what}, after which the close frontier is {frontier}: {because}; it wrote {} record(s) there ({})",
                wrote.len(),
                wrote.join(", ")
            ));
        }
        match problem {
            Some(message) => {
                let found = self.violations.len();
                self.violation(Invariant::I12, delivery.step, message)
                    .on(delivery.at)
                    .about(delivery.tp, delivery.offset);
                self.name_impure_operator_logic(task, delivery, &record, &calls, found);
                false
            }
            None => true,
        }
    }

    /// The output record of a window as the model has it, or `None` when
    /// the aggregation refuses one of its records in this company (I6
    /// judges that delivery).
    fn window_output(
        &self,
        plan: &StagePlan,
        shape: &Shape,
        key: &Bytes,
        start: i64,
        window: &Window,
        calls: &mut UserCalls<'_>,
    ) -> Option<Expected> {
        let output = window_of(plan)?.output(key, (start, window.end), &window.aggregate);
        let (of, end, aggregate) = (key.clone(), window.end, window.aggregate.clone());
        calls.note(
            "window output",
            answer_of_output(&output),
            move |plan, _, _| {
                Some(answer_of_output(&window_of(plan)?.output(
                    &of,
                    (start, end),
                    &aggregate,
                )))
            },
        );
        let (key_bytes, value) = output.ok()?;
        let label = format!(
            "{} of key {} holding {} record(s)",
            shape.bounds(start, window.end),
            bytes_for_humans(key),
            window.records.len()
        );
        // W4: the highest timestamp among the window's records.
        let timestamp = window
            .records
            .iter()
            .map(|(_, _, record)| record.data.timestamp)
            .max()
            .expect("an open window holds a record");
        Some(Expected {
            label,
            key: key_bytes,
            value,
            timestamp,
        })
    }
}

/// The windowed aggregation of `plan`, if it is one.
fn window_of(plan: &StagePlan) -> Option<&WindowDecl> {
    plan.stage.hooks().operator::<WindowDecl>()
}

/// The user's fold of `record` into `aggregate`, noted for the S4 probe.
fn fold_noted(
    calls: &mut UserCalls<'_>,
    decl: &WindowDecl,
    aggregate: &Bytes,
    tp: &Tp,
    record: &ConsumedRecord,
) -> Result<Bytes, ReplayError> {
    let folded = decl.fold(aggregate, tp, record);
    let aggregate = aggregate.clone();
    calls.note("fold", Answer::bytes(&folded), move |plan, tp, record| {
        Some(Answer::bytes(
            &window_of(plan)?.fold(&aggregate, tp, record),
        ))
    });
    folded
}

/// A window's output record as the S4 probe compares it.
fn answer_of_output(output: &Result<(Bytes, Bytes), ReplayError>) -> Answer {
    Answer::of(output, |(key, value)| {
        vec![Some(key.clone()), Some(value.clone())]
    })
}
