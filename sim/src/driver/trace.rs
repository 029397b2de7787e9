//! What the test driver saw happen, and a readable rendering of it for
//! snapshot tests: ticks with their timestamps, stamps and emissions.

use std::fmt::Write;

use parsley::task::TaskId;
use parsley::{Claim, Stamp, Tp};

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
