//! Determinism (I9) and pure logic (S4): a run's fingerprint covers its
//! trace and every record it wrote, values included, so that two runs of one
//! seed that differ only in what the logic computed are told apart; and the
//! first difference between two such runs, told as the stage and the record
//! where they parted.

use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

use bytes::Bytes;
use parsley::Tp;
use rustc_hash::FxHasher;

use crate::model::{Cluster, Entry as LogEntry};
use crate::sim::checker::Finding;
use crate::sim::checker::{Invariant, Violation};
use crate::sim::report::outcome::RunOutcome;
use crate::sim::world::trace::{Entry, Event};

/// A hash of the trace and of every log the run left: keys, values,
/// headers, timestamps and markers. Two runs of one tape must have the same
/// fingerprint (I9).
pub(crate) fn fingerprint(trace: &[Entry], cluster: &Cluster) -> u64 {
    let mut hasher = FxHasher::default();
    trace.hash(&mut hasher);
    for (topic, partitions) in cluster.topics() {
        for partition in 0..partitions {
            let tp = Tp::new(topic.clone(), partition);
            let Ok(log) = cluster.log(&tp) else { continue };
            for entry in log.entries() {
                match entry {
                    LogEntry::Data {
                        record,
                        producer,
                        transactional,
                    } => {
                        0u8.hash(&mut hasher);
                        record.key.hash(&mut hasher);
                        record.value.hash(&mut hasher);
                        record.timestamp.hash(&mut hasher);
                        for header in &record.headers {
                            header.name.hash(&mut hasher);
                            header.value.hash(&mut hasher);
                        }
                        producer.hash(&mut hasher);
                        transactional.hash(&mut hasher);
                    }
                    LogEntry::Control { kind, producer } => {
                        1u8.hash(&mut hasher);
                        kind.hash(&mut hasher);
                        producer.hash(&mut hasher);
                    }
                }
            }
        }
    }
    hasher.finish()
}

/// Where two runs of the same choices first differ, as an S4 violation (of
/// I9, determinism) that names the event, the stage and the record; `None`
/// when their fingerprints agree. `what` names the run (`seed 7`).
pub(crate) fn divergence(what: &str, first: &RunOutcome, second: &RunOutcome) -> Option<Violation> {
    let mut violation = told_divergence(what, first, second)?;
    violation.finding = Some(Finding::Impure);
    Some(violation)
}

/// [`divergence`]'s violation, its finding not yet named.
fn told_divergence(what: &str, first: &RunOutcome, second: &RunOutcome) -> Option<Violation> {
    let lead = format!(
        "{}: {what} ran twice on the same choices and the runs differ, so the \
         application's logic (or state its closures capture, shared by every run) is not a \
         pure function of its input (docs/RULES.md#s4)",
        Finding::Impure.prefix()
    );
    if first.trace_hash == second.trace_hash {
        // Same runs; a check that calls the logic again may still differ.
        let told = |outcome: &RunOutcome| {
            outcome
                .violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        let (a, b) = (told(first), told(second));
        if a == b {
            return None;
        }
        let (differs, step) = match a.iter().zip(&b).position(|(x, y)| x != y) {
            Some(index) => (
                format!("the first found {}; the second {}", a[index], b[index]),
                first.violations[index].step,
            ),
            None if a.len() > b.len() => (
                format!("only the first found {}", a[b.len()]),
                first.violations[b.len()].step,
            ),
            None => (
                format!("only the second found {}", b[a.len()]),
                second.violations[a.len()].step,
            ),
        };
        let mut violation = Violation::new(
            Invariant::I9,
            step,
            format!(
                "{lead}: the runs agree, but the checks that call the logic again on their \
                 committed deliveries differ: {differs}"
            ),
        );
        let source = first.violations.first().or(second.violations.first());
        if let Some(source) = source {
            violation.task = source.task.clone();
            violation.instance = source.instance;
            violation.record = source.record.clone();
        }
        return Some(violation);
    }
    let at = first
        .trace
        .iter()
        .zip(&second.trace)
        .position(|(a, b)| a != b)
        .or_else(|| {
            (first.trace.len() != second.trace.len())
                .then_some(first.trace.len().min(second.trace.len()))
        });
    if let Some(index) = at {
        let a = first.trace.get(index);
        let b = second.trace.get(index);
        let step = a.or(b).map_or(0, |entry| entry.step);
        let tell = |entry: Option<&Entry>| {
            entry.map_or_else(
                || "(the run had ended)".to_string(),
                |e| e.event.to_string(),
            )
        };
        let mut violation = Violation::new(
            Invariant::I9,
            step,
            format!(
                "{lead}: first difference at step {step}: the first run: {}; the second: {}",
                tell(a),
                tell(b)
            ),
        );
        if let Some(event) = a.or(b).map(|entry| &entry.event) {
            if let Some(at) = event.task_at() {
                violation.task = Some(at.task.clone());
                violation.instance = Some(at.instance);
            }
            if let Event::Delivered { tp, offset, .. } = event {
                violation.record = Some((tp.clone(), *offset));
            }
        }
        return Some(violation);
    }
    // The traces agree: a record's contents differ.
    let (tp, offset, a, b) = first_different_record(&first.cluster, &second.cluster)?;
    let writer = first.trace.iter().find_map(|entry| match &entry.event {
        Event::Delivered {
            at,
            tp: from,
            offset: from_offset,
            sent,
            ..
        } if sent.iter().any(|(t, o)| *t == tp && *o == offset) => {
            Some((entry.step, at.clone(), from.clone(), *from_offset))
        }
        _ => None,
    });
    let mut message = format!("{lead}: the runs wrote {tp}@{offset} differently");
    let mut violation = Violation::new(Invariant::I9, 0, String::new());
    if let Some((step, at, from, from_offset)) = writer {
        let _ = write!(
            message,
            " (stage {} wrote it at step {step}, delivering {from}@{from_offset} on {at})",
            at.task.stage
        );
        violation.step = step;
        violation.task = Some(at.task.clone());
        violation.instance = Some(at.instance);
        violation.record = Some((from, from_offset));
    }
    let _ = write!(message, ": the first run wrote {a}; the second {b}");
    violation.message = message;
    Some(violation)
}

/// The first record (by topic, partition, offset) the two clusters hold
/// differently, with both versions told.
fn first_different_record(a: &Cluster, b: &Cluster) -> Option<(Tp, u64, String, String)> {
    for (topic, partitions) in a.topics() {
        for partition in 0..partitions {
            let tp = Tp::new(topic.clone(), partition);
            let left = a.log(&tp).map(|log| log.entries()).unwrap_or_default();
            let right = b.log(&tp).map(|log| log.entries()).unwrap_or_default();
            for offset in 0..left.len().max(right.len()) {
                let (x, y) = (left.get(offset), right.get(offset));
                if x != y {
                    return Some((tp, offset as u64, tell_entry(x), tell_entry(y)));
                }
            }
        }
    }
    None
}

fn tell_entry(entry: Option<&LogEntry<'_>>) -> String {
    match entry {
        None => "nothing".to_string(),
        Some(LogEntry::Control { kind, .. }) => format!("a {kind:?} marker"),
        Some(LogEntry::Data { record, .. }) => format!(
            "key {} value {}",
            tell_bytes(record.key.as_ref()),
            tell_bytes(record.value.as_ref())
        ),
    }
}

/// Bytes as a reader can take them: text, a big-endian `i64` (the `I64`
/// codec), or hex.
fn tell_bytes(bytes: Option<&Bytes>) -> String {
    let Some(bytes) = bytes else {
        return "null".to_string();
    };
    if let Ok(text) = std::str::from_utf8(bytes) {
        if text.chars().all(|c| !c.is_control()) {
            let short: String = text.chars().take(60).collect();
            return format!("{short:?}");
        }
    }
    if let Ok(word) = <[u8; 8]>::try_from(&bytes[..]) {
        return i64::from_be_bytes(word).to_string();
    }
    let hex: String = bytes
        .iter()
        .take(30)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("0x{hex}")
}
