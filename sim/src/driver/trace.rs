//! What the test driver saw happen, and a readable rendering of it for
//! snapshot tests: ticks with their timestamps, stamps and emissions.

use std::fmt::Write;
use std::ops::Range;

use parsley::task::TaskId;
use parsley::{Claim, Stamp, Tp};

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
    /// A task's transaction committed.
    Committed {
        /// The task.
        task: TaskId,
        /// The wall clock then, milliseconds since the epoch.
        at: i64,
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

/// The trace as the driver records it. A delivery's sent records go to one
/// list shared by all deliveries, so recording a delivery allocates nothing
/// of its own; [`Trace::events`] builds the [`TraceEvent`]s a test reads.
#[derive(Default)]
pub(crate) struct Trace {
    recorded: Vec<Recorded>,
    sent: Vec<Sent>,
    /// How much of `sent` recorded deliveries own; the rest is what a
    /// delivery being recorded sent so far.
    sent_recorded: usize,
}

enum Recorded {
    Event(TraceEvent),
    /// [`TraceEvent::Delivered`], its sent records at `sent` in the list.
    Delivered {
        task: TaskId,
        at: i64,
        tp: Tp,
        offset: u64,
        tick: Option<i64>,
        sent: Range<usize>,
    },
}

impl Trace {
    /// Records an event other than a delivery.
    pub fn push(&mut self, event: TraceEvent) {
        self.recorded.push(Recorded::Event(event));
    }

    /// Where a delivery about to be recorded puts what it sent: the host
    /// appends to this list, then [`Trace::delivered`] records the delivery.
    pub fn sent_list(&mut self) -> &mut Vec<Sent> {
        // What a failed delivery sent before it failed is not traced.
        self.sent.truncate(self.sent_recorded);
        &mut self.sent
    }

    /// Records a delivery, with what was appended to [`Trace::sent_list`]
    /// since it was last asked for.
    pub fn delivered(&mut self, task: TaskId, at: i64, tp: Tp, offset: u64, tick: Option<i64>) {
        let sent = self.sent_recorded..self.sent.len();
        self.sent_recorded = self.sent.len();
        self.recorded.push(Recorded::Delivered {
            task,
            at,
            tp,
            offset,
            tick,
            sent,
        });
    }

    /// Every event, in order.
    pub fn events(&self) -> Vec<TraceEvent> {
        self.recorded
            .iter()
            .map(|recorded| match recorded {
                Recorded::Event(event) => event.clone(),
                Recorded::Delivered {
                    task,
                    at,
                    tp,
                    offset,
                    tick,
                    sent,
                } => TraceEvent::Delivered {
                    task: task.clone(),
                    at: *at,
                    tp: tp.clone(),
                    offset: *offset,
                    tick: *tick,
                    sent: self.sent[sent.clone()]
                        .iter()
                        .map(|sent| (sent.tp.clone(), sent.offset))
                        .collect(),
                },
            })
            .collect()
    }

    /// The tps the deliveries and ticks wrote to, repeats included.
    pub fn written_tps(&self) -> impl Iterator<Item = &Tp> {
        let ticks = self.recorded.iter().filter_map(|recorded| match recorded {
            Recorded::Event(TraceEvent::TickEmitted { tp, .. }) => Some(tp),
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
/// Changelog writes are left out. Times are relative to `origin`.
pub fn render_ticks(trace: &[TraceEvent], origin: i64, cluster: &Cluster) -> String {
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
                    .filter(|(sent_tp, _)| !sent_tp.topic.as_str().ends_with("-state-changelog"))
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
                        render_bytes(data.key.as_deref()),
                        render_bytes(data.value.as_deref()),
                    );
                }
            }
            _ => {}
        }
    }
    out
}
