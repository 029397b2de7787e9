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
                    let (x, y) = tell_entries(x, y);
                    return Some((tp, offset as u64, x, y));
                }
            }
        }
    }
    None
}

/// Two versions of one log entry, told so that where they differ shows:
/// a key or value that differs is shown around its first differing byte,
/// in both versions.
fn tell_entries(a: Option<&LogEntry<'_>>, b: Option<&LogEntry<'_>>) -> (String, String) {
    let (Some(LogEntry::Data { record: x, .. }), Some(LogEntry::Data { record: y, .. })) = (a, b)
    else {
        return (tell_entry(a), tell_entry(b));
    };
    let (x_key, y_key) = tell_pair(x.key.as_ref(), y.key.as_ref());
    let (x_value, y_value) = tell_pair(x.value.as_ref(), y.value.as_ref());
    let (mut left, mut right) = (
        format!("key {x_key} value {x_value}"),
        format!("key {y_key} value {y_value}"),
    );
    if x.key == y.key && x.value == y.value {
        // Same key and value: the difference is elsewhere.
        let what = if x.timestamp != y.timestamp {
            format!("timestamp {} and {}", x.timestamp, y.timestamp)
        } else {
            "headers".to_string()
        };
        left.push_str(&format!(" (the same key and value, another {what})"));
        right.push_str(" (see the first)");
    }
    (left, right)
}

/// Bytes shown on each side of the first byte two versions differ at.
const BEFORE_DIFFERENCE: usize = 24;
const AFTER_DIFFERENCE: usize = 40;

/// Two versions of a key or value: as [`tell_bytes`] when they are equal
/// or short; otherwise each shown around the first byte where they differ
/// (`…` marks what is left out), with the byte's index.
fn tell_pair(a: Option<&Bytes>, b: Option<&Bytes>) -> (String, String) {
    let (Some(x), Some(y)) = (a, b) else {
        return (tell_bytes(a), tell_bytes(b));
    };
    if x == y {
        return (tell_bytes(a), tell_bytes(b));
    }
    let at = x
        .iter()
        .zip(y.iter())
        .position(|(p, q)| p != q)
        .unwrap_or_else(|| x.len().min(y.len()));
    let whole = |bytes: &Bytes| bytes.len() <= BEFORE_DIFFERENCE + AFTER_DIFFERENCE;
    if whole(x) && whole(y) {
        return (tell_bytes(a), tell_bytes(b));
    }
    let around = |bytes: &Bytes| -> String {
        let (start, end) = (
            at.saturating_sub(BEFORE_DIFFERENCE),
            (at + AFTER_DIFFERENCE).min(bytes.len()),
        );
        let (before, after) = (
            if start > 0 { "…" } else { "" },
            if end < bytes.len() { "…" } else { "" },
        );
        match std::str::from_utf8(bytes) {
            Ok(text) if text.chars().all(|c| !c.is_control()) => {
                let (mut start, mut end) = (start, end);
                while !text.is_char_boundary(start) {
                    start -= 1;
                }
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                format!("{before}{:?}{after}", &text[start..end])
            }
            _ => {
                let hex: String = bytes[start..end]
                    .iter()
                    .map(|byte| format!("{byte:02x}"))
                    .collect();
                format!("0x{before}{hex}{after}")
            }
        }
    };
    let note = |bytes: &Bytes| format!(" ({} bytes; they differ from byte {at})", bytes.len());
    (
        format!("{}{}", around(x), note(x)),
        format!("{}{}", around(y), note(y)),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two long values that differ near their end: both are shown around
    /// the first differing byte, not cut before it.
    #[test]
    fn both_values_are_shown_around_their_first_difference() {
        let prefix = format!("{{\"lines\":[{}],", "1,".repeat(40));
        let a = Bytes::from(format!("{prefix}\"total\":41}}"));
        let b = Bytes::from(format!("{prefix}\"total\":42}}"));
        let (x, y) = tell_pair(Some(&a), Some(&b));
        let at = prefix.len() + "\"total\":4".len();
        assert!(x.contains("total\\\":41}\""), "{x}");
        assert!(y.contains("total\\\":42}\""), "{y}");
        assert!(x.starts_with('…') && y.starts_with('…'), "{x} / {y}");
        assert!(x.ends_with(&format!("they differ from byte {at})")), "{x}");
        // The old cut (the first 60 characters) showed the same text twice.
        assert_ne!(x.split(" (").next(), y.split(" (").next());
    }

    /// Binary values are shown in hex around the difference; equal and
    /// short ones whole.
    #[test]
    fn binary_values_in_hex_around_the_difference_and_short_ones_whole() {
        let mut a = vec![0u8; 100];
        let mut b = a.clone();
        a[90] = 0xab;
        b[90] = 0xcd;
        let (x, y) = tell_pair(Some(&Bytes::from(a)), Some(&Bytes::from(b)));
        assert!(x.starts_with("0x…") && x.contains("ab"), "{x}");
        assert!(y.starts_with("0x…") && y.contains("cd"), "{y}");
        assert!(x.contains("differ from byte 90"), "{x}");
        let short = Bytes::from_static(b"total 3");
        let other = Bytes::from_static(b"total 4");
        assert_eq!(
            tell_pair(Some(&short), Some(&other)),
            ("\"total 3\"".to_string(), "\"total 4\"".to_string())
        );
        assert_eq!(
            tell_pair(None, Some(&short)),
            ("null".to_string(), "\"total 3\"".to_string())
        );
    }
}
