//! I13: versioned joins (J16, J17), from each task's committed deliveries
//! alone.
//!
//! The checker keeps its own histories: for every key, the list of
//! (timestamp, value) of the committed table records the task delivered,
//! and the observed stream time, with an update below the horizon dropped.
//! It shares nothing with the join's lookup; only the output record of a
//! stream record joined with a value (`VersionedJoinDecl::joined`) comes
//! from the stage, since the joiner and the codecs are the user's.

use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::App;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::VersionedJoinDecl;
use rustc_hash::FxHashMap;

use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// One task's versioned table, as the checker keeps it: every version
/// ever put, in no order, and the highest timestamp put.
#[derive(Default)]
struct Histories {
    versions: FxHashMap<Bytes, Vec<(i64, Option<Bytes>)>>,
    observed: Option<i64>,
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
}

impl<'a> Checker<'a> {
    /// I13 (J16, J17) for every versioned join: each task's committed
    /// deliveries, in committed order, through the checker's own
    /// histories; each stream record's delivery must write the join with
    /// the version as of its timestamp, and nothing else. A task is
    /// reported once, at its first wrong delivery.
    pub(super) fn check_versioned_joins(&mut self, committed: &Committed<'a>) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            let Some(decl) = plan.stage.hooks().operator::<VersionedJoinDecl>() else {
                continue;
            };
            self.check_each_task(
                committed,
                plan.name(),
                Histories::default,
                |checker, task, delivery, histories| {
                    checker.check_versioned_delivery(plan, decl, task, delivery, histories)
                },
            );
        }
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
        let retention = decl.retention_ms();
        if delivery.tp.topic == decl.table {
            histories.put(retention, key, timestamp, record.data.value.clone());
            return true;
        }
        let version = histories.lookup(retention, &key, timestamp);
        let row = version.and_then(|(_, value)| value.as_deref());
        let Ok(expected) = decl.joined(delivery.tp, &record, row) else {
            // The joiner or a codec refuses it: I6 and I10 judge that.
            return true;
        };
        let output = decl.output.as_ref();
        let mut wrote = Vec::new();
        for (tp, offset) in delivery.sent {
            if output != Some(&tp.topic) {
                continue;
            }
            let id = self.tps.id(tp);
            if let Some(data) = self.tps.data(id, *offset) {
                wrote.push((
                    data.key.clone(),
                    data.value.clone(),
                    format!("{tp}@{offset}"),
                ));
            }
        }
        let same = match (&expected, &wrote[..]) {
            (None, []) => true,
            (Some((key, value)), [(wrote_key, wrote_value, _)]) => {
                wrote_key == key && wrote_value.as_ref() == Some(value)
            }
            _ => false,
        };
        if same {
            return true;
        }
        let seen = match version {
            Some((at, Some(value))) => format!("the version @{at} = {}", bytes_for_humans(value)),
            Some((at, None)) => format!("the tombstone @{at} (no row)"),
            None => "no version (no row)".to_string(),
        };
        let output = output.map_or("its output", |topic| topic.as_str());
        let mut message = format!(
            "task {task} committed the delivery of {}@{} (key {}, timestamp {timestamp}), whose key's table as of that timestamp was {seen}, the horizon {}: the join should write ",
            delivery.tp,
            delivery.offset,
            bytes_for_humans(&key),
            histories
                .horizon(retention)
                .map_or("not set (no table update yet)".to_string(), |horizon| horizon.to_string()),
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
        let _ = write!(message, " — it wrote {}", wrote.len());
        for (key, value, at) in &wrote {
            let _ = write!(
                message,
                "; {at}: key {} value {}",
                describe(key),
                describe(value)
            );
        }
        self.violation(Invariant::I13, delivery.step, message)
            .on(delivery.at)
            .about(delivery.tp, delivery.offset);
        false
    }
}

fn describe(bytes: &Option<Bytes>) -> String {
    bytes
        .as_ref()
        .map_or("null".to_string(), |bytes| bytes_for_humans(bytes))
}
