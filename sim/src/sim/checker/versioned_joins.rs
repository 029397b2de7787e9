//! I13: versioned joins (J16, J17, J19), from each task's committed
//! deliveries alone.
//!
//! The checker keeps its own histories: for every key, the list of
//! (timestamp, value) of the committed table records the task delivered,
//! and the observed stream time, with an update below the horizon dropped.
//! With a grace period it keeps its own buffer too: the stream records
//! held, sorted as they arrive, and the highest timestamp held; each
//! delivery of a stream record must write the joins of the records it
//! releases, in order, with their own timestamps. It shares nothing with
//! the join's lookup or buffer; only the output record of a stream record
//! joined with a value (`VersionedJoinDecl::joined`) comes from the stage,
//! since the joiner and the codecs are the user's.

use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::ConsumedRecord;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::VersionedJoinDecl;
use rustc_hash::FxHashMap;

use super::operated::{describe, tell_written};
use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// One task's versioned table, as the checker keeps it: every version
/// ever put, in no order, and the highest timestamp put; and, with a grace
/// period, the stream records held (by timestamp, then key bytes, then
/// arrival) and the highest timestamp held.
#[derive(Default)]
struct Histories {
    versions: FxHashMap<Bytes, Vec<(i64, Option<Bytes>)>>,
    observed: Option<i64>,
    held: Vec<(i64, Bytes, ConsumedRecord)>,
    held_time: Option<i64>,
}

/// A duration in whole milliseconds, as the declaration's must be (J18).
fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Histories {
    /// Below this, an update is dropped and a lookup sees the latest
    /// version only.
    fn horizon(&self, retention: i64) -> Option<i64> {
        self.observed
            .map(|observed| observed.saturating_sub(retention))
    }

    fn put(&mut self, retention: i64, key: Bytes, timestamp: i64, value: Option<Bytes>) {
        if self
            .horizon(retention)
            .is_some_and(|horizon| timestamp < horizon)
        {
            return;
        }
        self.observed = Some(self.observed.map_or(timestamp, |seen| seen.max(timestamp)));
        let versions = self.versions.entry(key).or_default();
        versions.retain(|(at, _)| *at != timestamp);
        versions.push((timestamp, value));
    }

    /// The version the record at `as_of` must see: its timestamp and
    /// value, `None` when there is none.
    fn lookup(&self, retention: i64, key: &Bytes, as_of: i64) -> Option<&(i64, Option<Bytes>)> {
        let versions = self.versions.get(key)?;
        let below_horizon = self
            .horizon(retention)
            .is_some_and(|horizon| as_of < horizon);
        let candidates = versions
            .iter()
            .filter(|(at, _)| below_horizon || *at <= as_of);
        let latest = candidates.max_by_key(|(at, _)| *at)?;
        (latest.0 <= as_of).then_some(latest)
    }

    /// J19: the stream records the arrival of `record` (key `key`, at
    /// `timestamp`) must join now under `grace`, in order.
    fn arrive(
        &mut self,
        grace: i64,
        key: Bytes,
        timestamp: i64,
        record: ConsumedRecord,
    ) -> Vec<(i64, Bytes, ConsumedRecord)> {
        if self
            .held_time
            .is_some_and(|time| time.saturating_sub(grace) > timestamp)
        {
            return vec![(timestamp, key, record)];
        }
        let at = self
            .held
            .iter()
            .take_while(|(held, held_key, _)| (*held, held_key) <= (timestamp, &key))
            .count();
        self.held.insert(at, (timestamp, key, record));
        let time = self.held_time.map_or(timestamp, |time| time.max(timestamp));
        self.held_time = Some(time);
        let due = self
            .held
            .iter()
            .take_while(|(held, _, _)| *held <= time.saturating_sub(grace))
            .count();
        self.held.drain(..due).collect()
    }
}

impl<'a> Checker<'a> {
    /// I13 (J16, J17) for every versioned join: each task's committed
    /// deliveries, in committed order, through the checker's own
    /// histories; each stream record's delivery must write the join with
    /// the version as of its timestamp, and nothing else. A task is
    /// reported once, at its first wrong delivery.
    pub(super) fn check_versioned_joins(&mut self, committed: &Committed<'a>) {
        self.check_each_operator(
            committed,
            Histories::default,
            Self::check_versioned_delivery,
        );
    }

    /// One committed delivery; false once it is reported.
    fn check_versioned_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &VersionedJoinDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        histories: &mut Histories,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        if delivery.dead_lettered(plan) {
            return true;
        }
        let timestamp = record.data.timestamp;
        let Some(key) = record.data.key.clone().filter(|_| timestamp >= 0) else {
            // Refused (J16, J17): I6 and I10 judge the delivery.
            return true;
        };
        let retention = millis(decl.history_retention);
        if delivery.tp.topic == decl.table {
            histories.put(retention, key, timestamp, record.data.value.clone());
            return true;
        }
        let delivered_key = bytes_for_humans(&key);
        let joins = match decl.grace {
            Some(grace) => histories.arrive(millis(grace), key, timestamp, record),
            None => vec![(timestamp, key, record)],
        };
        // What the delivery must write: each join's output, in order, at
        // its stream record's timestamp.
        let mut expected = Vec::new();
        let mut seen = Vec::new();
        for (at, key, joined) in &joins {
            let version = histories.lookup(retention, key, *at);
            let row = version.and_then(|(_, value)| value.as_deref());
            let Ok(output) = decl.joined(delivery.tp, joined, row) else {
                // The joiner or a codec refuses it: I6 and I10 judge that.
                return true;
            };
            seen.push(format!(
                "{}@{} (key {}, timestamp {at}): {}",
                delivery.tp,
                joined.offset,
                bytes_for_humans(key),
                match version {
                    Some((version_at, Some(value))) =>
                        format!("the version @{version_at} = {}", bytes_for_humans(value)),
                    Some((version_at, None)) => format!("the tombstone @{version_at} (no row)"),
                    None => "no version (no row)".to_string(),
                }
            ));
            if let Some((key, value)) = output {
                expected.push((key, value, *at));
            }
        }
        let output = decl.output.as_ref();
        let wrote = self.written_to(delivery, output);
        let same = expected.len() == wrote.len()
            && expected
                .iter()
                .zip(&wrote)
                .all(|((key, value, at), written)| {
                    written.key == *key
                        && written.value.as_ref() == Some(value)
                        && written.timestamp == *at
                });
        if same {
            return true;
        }
        let output = output.map_or("its output", |topic| topic.as_str());
        let grace = match decl.grace {
            Some(grace) => format!(
                "grace {} ms, {} stream records still held after it",
                millis(grace),
                histories.held.len()
            ),
            None => "no grace period".to_string(),
        };
        let mut message = format!(
            "task {task} committed the delivery of {}@{} (key {}, timestamp {timestamp}; {grace}; the horizon {}), which joins {} stream record(s): {}. The join should write ",
            delivery.tp,
            delivery.offset,
            delivered_key,
            histories
                .horizon(retention)
                .map_or("not set (no table update yet)".to_string(), |horizon| horizon.to_string()),
            joins.len(),
            if seen.is_empty() { "none (held)".to_string() } else { seen.join("; ") },
        );
        let _ = write!(message, "{} record(s) to {output}", expected.len());
        for (key, value, at) in &expected {
            let _ = write!(
                message,
                " (key {}, value {}, @{at})",
                describe(key),
                bytes_for_humans(value)
            );
        }
        tell_written(&mut message, &wrote, true);
        self.violation(Invariant::I13, delivery.step, message)
            .on(delivery.at)
            .about(delivery.tp, delivery.offset);
        false
    }
}
