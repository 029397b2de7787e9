//! What the test driver saw happen, and a readable rendering of it for
//! snapshot tests: ticks with their timestamps, stamps and emissions.

use std::fmt::Write;

use parsley::TaskId;
use parsley::{App, Claim, RecordPart, Stamp, TopicRef, Tp, I64};

use crate::driver::keys::{declares_key, declares_value};

use crate::host::Sent;
use crate::model::Cluster;

/// What the test driver saw happen, for assertions and snapshots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A task emitted a tick into its open transaction.
    TickEmitted {
        /// The task.
        task: TaskId,
        /// The wall clock then, milliseconds since the epoch.
        at: i64,
        /// The tp of the record.
        tp: Tp,
        /// Its offset.
        offset: u64,
        /// The tick's stamp.
        stamp: Stamp,
    },
    /// A record at the head of its tp was first seen held on a claim.
    Held {
        /// The task.
        task: TaskId,
        /// The wall clock then, milliseconds since the epoch.
        at: i64,
        /// The tp of the record.
        tp: Tp,
        /// Its offset.
        offset: u64,
        /// The claim it waits on.
        claim: Claim,
        /// Whether the held record is a tick.
        tick: bool,
    },
    /// A record was delivered; what the delivery sent.
    Delivered {
        /// The task.
        task: TaskId,
        /// The wall clock then, milliseconds since the epoch.
        at: i64,
        /// The tp of the record.
        tp: Tp,
        /// Its offset.
        offset: u64,
        /// The tick's timestamp, when the record was a tick.
        tick: Option<i64>,
        /// Where each sent record landed; the records are in the log.
        sent: Vec<(Tp, u64)>,
    },
    /// A task's transaction committed; what its commit sent.
    Committed {
        /// The task.
        task: TaskId,
        /// The wall clock then, milliseconds since the epoch.
        at: i64,
        /// Where each changelog record the commit sent landed: one per slot
        /// the transaction changed (S5).
        sent: Vec<(Tp, u64)>,
    },
    /// A task's transaction aborted.
    Aborted {
        /// The task.
        task: TaskId,
        /// The wall clock then, milliseconds since the epoch.
        at: i64,
        /// Why the transaction aborted.
        reason: String,
    },
}

/// The trace as the driver records it, compact: the driver records two
/// events per piped record and keeps them all, so deliveries and commits
/// name their task and tp by number, and a delivery's sent records go to
/// one list shared by all deliveries (where the host appends them).
/// [`Trace::events`] builds the [`TraceEvent`]s a test reads.
#[derive(Default)]
pub(crate) struct Trace {
    recorded: Vec<Recorded>,
    /// Where each delivery's sent records landed, deliveries one after the
    /// other.
    sent: Vec<Sent>,
    /// How much of `sent` recorded deliveries own; the rest is what a
    /// delivery being recorded sent so far.
    sent_recorded: usize,
    /// The tasks and the delivered tps the events name, each once.
    tasks: Names<TaskId>,
    tps: Names<Tp>,
}

enum Recorded {
    /// [`TraceEvent::Delivered`], its sent records up to `sent_end` in the
    /// list (from where the delivery before it ended).
    Delivered {
        task: u32,
        tp: u32,
        sent_end: u32,
        offset: u64,
        at: i64,
        tick: Option<i64>,
    },
    /// [`TraceEvent::Committed`], its sent records up to `sent_end`.
    Committed { task: u32, at: i64, sent_end: u32 },
    /// Any other event: ticks, holds and aborts are rare.
    Other(Box<TraceEvent>),
}

/// Names numbered in the order first seen; the last one looked up is tried
/// first, as consecutive events mostly name the same one.
struct Names<T> {
    names: Vec<T>,
    last: usize,
}

impl<T> Default for Names<T> {
    fn default() -> Self {
        Names {
            names: Vec::new(),
            last: 0,
        }
    }
}

/// Equality that tries the pointers first: the names a driver hands in
/// share their allocations.
trait Same {
    fn same(&self, other: &Self) -> bool;
}

impl Same for Tp {
    fn same(&self, other: &Tp) -> bool {
        Tp::same(self, other)
    }
}

impl Same for TaskId {
    fn same(&self, other: &TaskId) -> bool {
        self.partition == other.partition
            && (std::sync::Arc::ptr_eq(&self.stage, &other.stage) || self.stage == other.stage)
    }
}

impl<T: Clone + Same> Names<T> {
    fn number(&mut self, name: &T) -> u32 {
        if !self
            .names
            .get(self.last)
            .is_some_and(|last| last.same(name))
        {
            self.last = match self.names.iter().position(|known| known.same(name)) {
                Some(at) => at,
                None => {
                    self.names.push(name.clone());
                    self.names.len() - 1
                }
            };
        }
        u32::try_from(self.last).expect("fewer than 2^32 names")
    }

    fn name(&self, number: u32) -> &T {
        &self.names[number as usize]
    }
}

impl Trace {
    /// Records an event other than a delivery or a commit.
    pub fn push(&mut self, event: TraceEvent) {
        self.recorded.push(Recorded::Other(Box::new(event)));
    }

    /// Where a delivery about to be recorded puts what it sent: the host
    /// appends to this list, then [`Trace::delivered`] records the delivery.
    pub fn sent_list(&mut self) -> &mut Vec<Sent> {
        // What a failed delivery sent before it failed is not traced.
        self.sent.truncate(self.sent_recorded);
        &mut self.sent
    }

    /// Records a commit, with what was appended to [`Trace::sent_list`]
    /// since it was last asked for (its changelog records).
    pub fn committed(&mut self, task: &TaskId, at: i64) {
        self.sent_recorded = self.sent.len();
        self.recorded.push(Recorded::Committed {
            task: self.tasks.number(task),
            at,
            sent_end: u32::try_from(self.sent.len()).expect("fewer than 2^32 sent records"),
        });
    }

    /// Records a delivery, with what was appended to [`Trace::sent_list`]
    /// since it was last asked for.
    pub fn delivered(&mut self, task: &TaskId, at: i64, tp: &Tp, offset: u64, tick: Option<i64>) {
        self.sent_recorded = self.sent.len();
        self.recorded.push(Recorded::Delivered {
            task: self.tasks.number(task),
            tp: self.tps.number(tp),
            sent_end: u32::try_from(self.sent.len()).expect("fewer than 2^32 sent records"),
            offset,
            at,
            tick,
        });
    }

    /// Every event, in order.
    pub fn events(&self) -> Vec<TraceEvent> {
        let mut sent_start = 0;
        self.recorded
            .iter()
            .map(|recorded| match recorded {
                Recorded::Other(event) => (**event).clone(),
                Recorded::Committed { task, at, sent_end } => {
                    let sent = &self.sent[sent_start..*sent_end as usize];
                    sent_start = *sent_end as usize;
                    TraceEvent::Committed {
                        task: self.tasks.name(*task).clone(),
                        at: *at,
                        sent: sent
                            .iter()
                            .map(|sent| (sent.tp.clone(), sent.offset))
                            .collect(),
                    }
                }
                Recorded::Delivered {
                    task,
                    tp,
                    sent_end,
                    offset,
                    at,
                    tick,
                } => {
                    let sent = &self.sent[sent_start..*sent_end as usize];
                    sent_start = *sent_end as usize;
                    TraceEvent::Delivered {
                        task: self.tasks.name(*task).clone(),
                        at: *at,
                        tp: self.tps.name(*tp).clone(),
                        offset: *offset,
                        tick: *tick,
                        sent: sent
                            .iter()
                            .map(|sent| (sent.tp.clone(), sent.offset))
                            .collect(),
                    }
                }
            })
            .collect()
    }

    /// The tps the deliveries and ticks wrote to, repeats included.
    pub fn written_tps(&self) -> impl Iterator<Item = &Tp> {
        let ticks = self.recorded.iter().filter_map(|recorded| match recorded {
            Recorded::Other(event) => match &**event {
                TraceEvent::TickEmitted { tp, .. } => Some(tp),
                _ => None,
            },
            _ => None,
        });
        self.sent[..self.sent_recorded]
            .iter()
            .map(|sent| &sent.tp)
            .chain(ticks)
    }
}

fn render_bytes(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".to_string(),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) if !text.chars().any(char::is_control) => text.to_string(),
            _ => bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        },
    }
}

fn clock(at: i64, origin: i64) -> String {
    let delta = at - origin;
    if delta % 1000 == 0 {
        format!("+{}s", delta / 1000)
    } else {
        format!("+{delta}ms")
    }
}

/// Renders the tick-related events: each tick's emission (time, record,
/// stamp), any hold, and its delivery with what the delivery emitted (read
/// back from `cluster`'s logs).
/// Writes to `app`'s changelogs are left out. Times are relative to `origin`. Keys and
/// values print as text when they are printable UTF-8, as hex otherwise;
/// [`crate::TestDriver::tick_report`] also prints `I64` ones as numbers.
pub fn render_ticks(trace: &[TraceEvent], origin: i64, cluster: &Cluster, app: &App) -> String {
    render_ticks_with(trace, origin, cluster, app, |_, _, bytes| {
        render_bytes(bytes)
    })
}

/// [`render_ticks`], with the keys and values of topics `app` declares with
/// the `I64` codec printed as numbers.
pub(crate) fn render_ticks_decoded(
    trace: &[TraceEvent],
    origin: i64,
    cluster: &Cluster,
    app: &App,
) -> String {
    render_ticks_with(trace, origin, cluster, app, |topic, part, bytes| {
        let codecs = app
            .declaration(topic)
            .and_then(TopicRef::codecs)
            .unwrap_or_default();
        let long = match part {
            RecordPart::Key => declares_key::<i64, I64>(&codecs),
            RecordPart::Value => declares_value::<i64, I64>(&codecs),
        };
        match bytes.map(<[u8; 8]>::try_from) {
            Some(Ok(long_bytes)) if long => i64::from_be_bytes(long_bytes).to_string(),
            _ => render_bytes(bytes),
        }
    })
}

/// [`render_ticks`], printing each key and value with `render(topic, part,
/// bytes)`.
fn render_ticks_with(
    trace: &[TraceEvent],
    origin: i64,
    cluster: &Cluster,
    app: &App,
    render: impl Fn(&str, RecordPart, Option<&[u8]>) -> String,
) -> String {
    let mut out = String::new();
    for event in trace {
        match event {
            TraceEvent::TickEmitted {
                task,
                at,
                tp,
                offset,
                stamp,
            } => {
                let _ = writeln!(
                    out,
                    "{:>6}  {task}  emit    tick {tp}@{offset}  stamp {stamp}",
                    clock(*at, origin)
                );
            }
            TraceEvent::Held {
                task,
                at,
                tp,
                offset,
                claim,
                tick: true,
            } => {
                let _ = writeln!(
                    out,
                    "{:>6}  {task}  hold    tick {tp}@{offset}  waiting on {claim}",
                    clock(*at, origin)
                );
            }
            TraceEvent::Delivered {
                task,
                at,
                tp,
                offset,
                tick: Some(timestamp),
                sent,
            } => {
                let _ = writeln!(
                    out,
                    "{:>6}  {task}  deliver tick {tp}@{offset}  Tick {{ timestamp: {timestamp} }}",
                    clock(*at, origin)
                );
                for (sent_tp, sent_offset) in sent
                    .iter()
                    .filter(|(sent_tp, _)| app.changelog_owner(sent_tp.topic.as_str()).is_none())
                {
                    let Some(data) = cluster
                        .log(sent_tp)
                        .ok()
                        .and_then(|log| log.record(*sent_offset))
                    else {
                        continue;
                    };
                    let stamp = data
                        .header(parsley::header::STAMP_HEADER)
                        .and_then(|bytes| parsley::header::decode(bytes).ok())
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "{:>6}  {task}    -> {}@{}  key {}  value {}  stamp {stamp}",
                        "",
                        sent_tp,
                        sent_offset,
                        render(sent_tp.topic.as_str(), RecordPart::Key, data.key.as_deref()),
                        render(
                            sent_tp.topic.as_str(),
                            RecordPart::Value,
                            data.value.as_deref()
                        ),
                    );
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(stage: &str, partition: u32) -> TaskId {
        TaskId {
            stage: stage.into(),
            partition,
        }
    }

    fn sent(topic: &str, partition: u32, offset: u64) -> Sent {
        Sent {
            tp: Tp::new(topic, partition),
            offset,
        }
    }

    /// The compact trace gives every event back as it was recorded, each
    /// delivery with its own sent records, and leaves out what a delivery
    /// that failed had sent.
    #[test]
    fn events_come_back_as_recorded() {
        let (a, b) = (task("a", 0), task("b", 1));
        let (orders, payments) = (Tp::new("orders", 0), Tp::new("payments", 1));
        let mut trace = Trace::default();
        trace
            .sent_list()
            .extend([sent("out", 0, 4), sent("a-state-changelog", 0, 7)]);
        trace.delivered(&a, 10, &orders, 3, None);
        trace.sent_list().push(sent("a-state-changelog", 0, 8));
        trace.committed(&a, 10);
        // A delivery that fails after sending one record is not traced.
        trace.sent_list().push(sent("out", 1, 9));
        trace.push(TraceEvent::Aborted {
            task: b.clone(),
            at: 11,
            reason: "logic failed".to_string(),
        });
        trace.sent_list();
        trace.delivered(&b, 12, &payments, 5, Some(60_000));
        trace.sent_list().push(sent("out", 0, 5));
        trace.delivered(&a, 13, &orders, 4, None);

        let events = trace.events();
        assert_eq!(
            events,
            [
                TraceEvent::Delivered {
                    task: a.clone(),
                    at: 10,
                    tp: orders.clone(),
                    offset: 3,
                    tick: None,
                    sent: vec![(Tp::new("out", 0), 4), (Tp::new("a-state-changelog", 0), 7)],
                },
                TraceEvent::Committed {
                    task: a.clone(),
                    at: 10,
                    sent: vec![(Tp::new("a-state-changelog", 0), 8)],
                },
                TraceEvent::Aborted {
                    task: b.clone(),
                    at: 11,
                    reason: "logic failed".to_string(),
                },
                TraceEvent::Delivered {
                    task: b,
                    at: 12,
                    tp: payments,
                    offset: 5,
                    tick: Some(60_000),
                    sent: vec![],
                },
                TraceEvent::Delivered {
                    task: a,
                    at: 13,
                    tp: orders,
                    offset: 4,
                    tick: None,
                    sent: vec![(Tp::new("out", 0), 5)],
                },
            ]
        );
        let written: Vec<String> = trace.written_tps().map(Tp::to_string).collect();
        assert_eq!(
            written,
            [
                "out-0",
                "a-state-changelog-0",
                "a-state-changelog-0",
                "out-0"
            ]
        );
    }
}
