//! I12: windows (W1–W4), from each task's committed deliveries alone.
//!
//! The checker keeps its own model of every task of a windowed aggregation:
//! which windows each record belongs to, where the close frontier stands,
//! which windows are open and which records each holds. It uses none of
//! the aggregation's state or window arithmetic; only the output record of
//! a window (the aggregation's fold over the records the model placed in it,
//! encoded with the output topic's codecs, `Stage::window_emission`) comes
//! from the stage, since the fold and the codecs are the user's.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use parsley::app::StagePlan;
use parsley::record::ConsumedRecord;
use parsley::task::TaskId;
use parsley::text::bytes_for_humans;
use parsley::window::{Close, Emit, WindowDecl};
use parsley::{App, Tp};

use super::reconstruction::{committed_of, Committed, Delivery};
use super::{Checker, Invariant};

/// A window's bounds and grace, in milliseconds, as the checker computes
/// them.
struct Shape {
    size: i64,
    advance: i64,
    grace: i64,
}

impl Shape {
    fn of(decl: &WindowDecl) -> Shape {
        let millis =
            |duration: std::time::Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Shape {
            size: millis(decl.size),
            advance: millis(decl.advance).max(1),
            grace: millis(decl.grace),
        }
    }

    /// W1: the starts of the windows holding `timestamp`, earliest first:
    /// the latest start at or before it, and each advance before that
    /// while the window still reaches it, none before the epoch.
    fn starts(&self, timestamp: i64) -> Vec<i64> {
        let mut starts = Vec::new();
        let mut start = timestamp - timestamp.rem_euclid(self.advance);
        while start >= 0 && start + self.size > timestamp {
            starts.push(start);
            start -= self.advance;
        }
        starts.reverse();
        starts
    }

    /// W2: whether a window ending at `end` is closed at `frontier`.
    fn closed(&self, end: i64, frontier: i64) -> bool {
        end.saturating_add(self.grace) <= frontier
    }
}

/// One open window of the model: its end and the records it holds, in
/// delivery order.
struct Window {
    end: i64,
    records: Vec<(Tp, ConsumedRecord)>,
}

/// One task's windows, as the checker has them.
struct Model {
    frontier: i64,
    /// By (key bytes, start).
    open: BTreeMap<(Bytes, i64), Window>,
}

/// An output record the model expects: what it is, and its bytes.
struct Expected {
    label: String,
    key: Bytes,
    value: Bytes,
}

impl<'a> Checker<'a> {
    /// I12 (W1–W4) for every windowed aggregation: each task's committed
    /// deliveries, in committed order, through the checker's own model;
    /// each delivery's writes on the output and late topics must be what
    /// the model says, in order. A task is reported once, at its first
    /// wrong delivery (later ones follow from it).
    pub(super) fn check_windows(&mut self, committed: &Committed<'a>) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            let Some(decl) = plan.stage.window() else {
                continue;
            };
            let shape = Shape::of(decl);
            for task in self.input.assembly.task_ids() {
                if &*task.stage != plan.name() {
                    continue;
                }
                let mut model = Model {
                    frontier: i64::MIN,
                    open: BTreeMap::new(),
                };
                for delivery in committed_of(committed, &task) {
                    if !self.check_window_delivery(plan, decl, &shape, &task, delivery, &mut model)
                    {
                        break;
                    }
                }
            }
        }
    }

    /// One committed delivery; false once it is reported.
    fn check_window_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &WindowDecl,
        shape: &Shape,
        task: &TaskId,
        delivery: &Delivery<'a>,
        model: &mut Model,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        if delivery.dead_lettered(plan) {
            return true;
        }
        let mut expected = Vec::new();
        let mut late_for = Vec::new();
        let is_tick = plan.tick_topic.as_ref() == Some(&delivery.tp.topic);
        let what;
        if is_tick {
            let Some(tick) = parsley::task::tick_of(&record) else {
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
            let starts = match timestamp < 0 {
                true => Vec::new(),
                false => shape.starts(timestamp),
            };
            let Some(first) = starts.first() else {
                return true;
            };
            // A record the aggregation refuses (a codec, a failing fold)
            // changes nothing; I6 and I10 judge its delivery.
            let probe = [(delivery.tp, &record)];
            if plan
                .stage
                .window_emission(&key, (*first, first + shape.size), &probe)
                .is_err()
            {
                return true;
            }
            if decl.close == Close::StreamTime {
                model.frontier = model.frontier.max(timestamp);
            }
            for start in starts {
                let end = start + shape.size;
                if shape.closed(end, model.frontier) {
                    late_for.push((start, end));
                    continue;
                }
                let window = model.open.entry((key.clone(), start)).or_insert(Window {
                    end,
                    records: Vec::new(),
                });
                window.records.push((delivery.tp.clone(), record.clone()));
                if decl.emit == Emit::OnUpdate {
                    match self.window_output(
                        plan,
                        &key,
                        start,
                        end,
                        &model.open[&(key.clone(), start)],
                    ) {
                        Some(output) => expected.push(output),
                        None => return true,
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
        // W2: every window the frontier reaches closes, in (end, start, key)
        // order.
        let mut closing: Vec<(i64, i64, Bytes)> = model
            .open
            .iter()
            .filter(|(_, window)| shape.closed(window.end, model.frontier))
            .map(|((key, start), window)| (window.end, *start, key.clone()))
            .collect();
        closing.sort();
        for (end, start, key) in closing {
            let window = model
                .open
                .remove(&(key.clone(), start))
                .expect("listed as open");
            if decl.emit == Emit::OnClose {
                match self.window_output(plan, &key, start, end, &window) {
                    Some(output) => expected.push(output),
                    None => return true,
                }
            }
        }
        let mut wrote = Vec::new();
        let mut wrote_late = Vec::new();
        for (tp, offset) in delivery.sent {
            let into_output = decl.output.as_ref() == Some(&tp.topic);
            let into_late = decl.late.as_ref() == Some(&tp.topic);
            if !(into_output || into_late) {
                continue;
            }
            let id = self.tps.id(tp);
            let Some(data) = self.tps.data(id, *offset) else {
                continue;
            };
            let written = (
                data.key.clone(),
                data.value.clone(),
                format!("{tp}@{offset}"),
            );
            match into_output {
                true => wrote.push(written),
                false => wrote_late.push(written),
            }
        }
        let frontier = match model.frontier {
            i64::MIN => "none yet".to_string(),
            frontier => frontier.to_string(),
        };
        let mut problem = None;
        let same = expected.len() == wrote.len()
            && expected
                .iter()
                .zip(&wrote)
                .all(|(expected, (key, value, _))| {
                    key.as_ref() == Some(&expected.key) && value.as_ref() == Some(&expected.value)
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
                    "; {} = {}",
                    expected.label,
                    bytes_for_humans(&expected.value)
                );
            }
            let _ = write!(message, " — it wrote {}", wrote.len());
            for (key, value, at) in &wrote {
                let _ = write!(
                    message,
                    "; {at}: key {} value {}",
                    describe(key),
                    describe(value)
                );
            }
            problem = Some(message);
        }
        let late_expected = usize::from(!late_for.is_empty() && decl.late.is_some());
        let late_right = wrote_late.len() == late_expected
            && wrote_late
                .iter()
                .all(|(key, value, _)| *key == record.data.key && *value == record.data.value);
        if problem.is_none() && !late_right {
            let late = decl
                .late
                .as_ref()
                .map_or("the late topic", |topic| topic.as_str());
            let because = match late_for.first() {
                Some((start, end)) => format!(
                    "it is late for window [{start}, {end}) (its end plus grace {} is at or before the frontier), so it should be written once, as it came, to {late}",
                    end + shape.grace
                ),
                None => format!("it is late for none of its windows, so nothing should be written to {late}"),
            };
            let wrote: Vec<&str> = wrote_late.iter().map(|(_, _, at)| at.as_str()).collect();
            problem = Some(format!(
                "task {task} committed the delivery of {what}, after which the close frontier is {frontier}: {because}; it wrote {} record(s) there ({})",
                wrote.len(),
                wrote.join(", ")
            ));
        }
        match problem {
            Some(message) => {
                self.violation(Invariant::I12, delivery.step, message)
                    .on(delivery.at)
                    .about(delivery.tp, delivery.offset);
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
        key: &Bytes,
        start: i64,
        end: i64,
        window: &Window,
    ) -> Option<Expected> {
        let records: Vec<(&Tp, &ConsumedRecord)> = window
            .records
            .iter()
            .map(|(tp, record)| (tp, record))
            .collect();
        let (key_bytes, value) = plan
            .stage
            .window_emission(key, (start, end), &records)
            .ok()?;
        let label = format!(
            "window [{start}, {end}) of key {} holding {} record(s)",
            bytes_for_humans(key),
            records.len()
        );
        Some(Expected {
            label,
            key: key_bytes,
            value,
        })
    }
}

fn describe(bytes: &Option<Bytes>) -> String {
    bytes
        .as_ref()
        .map_or("null".to_string(), |bytes| bytes_for_humans(bytes))
}
