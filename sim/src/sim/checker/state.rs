//! I6: state. Replays the stages' pure logic over each task's committed
//! deliveries (the fold of its committed history) and compares the state it
//! gives with the committed changelog; on the way it asks the oracles of
//! what each committed delivery wrote: its dead letter (I10) and its
//! emissions (I7).

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::{App, TopicName, Tp};
use parsley::{ConsumedRecord, Tick};
use parsley::{ReplayError, Replayed, SlotChange, SlotKey, Stage};

use rustc_hash::FxHashMap;

use super::outputs::Accounted;
use super::reconstruction::{committed_of, written_epoch, Committed, Delivery};
use super::{Checker, Invariant};

/// A task's state as the fold has it, slot by slot. Compared whole, and slot
/// by slot in key order only on a mismatch: a hash map does.
pub(super) type Slots = FxHashMap<SlotKey, Bytes>;

/// One call of a stage's logic as a committed delivery made it: on a
/// record, or on a tick.
pub(super) enum Call<'r> {
    Record(&'r ConsumedRecord),
    Tick(Tick),
}

impl Call<'_> {
    /// What `stage`'s logic does for this call over `slots`, the task's
    /// state before it. A timer service's tick and a windowed aggregation's
    /// record or tick read every slot (K2, W2), and their changes to others
    /// are in `other_slots`.
    pub(super) fn replay(
        &self,
        stage: &Stage,
        slots: &Slots,
        tp: &Tp,
    ) -> Result<Replayed, ReplayError> {
        let every_slot = || -> Vec<(SlotKey, &[u8])> {
            slots
                .iter()
                .map(|(slot, bytes)| (slot.clone(), &bytes[..]))
                .collect()
        };
        match self {
            Call::Tick(tick) if stage.hooks().tick_reads_every_slot() => {
                stage.hooks().replay_tick_over_slots(&every_slot(), *tick)
            }
            Call::Tick(tick) => stage
                .hooks()
                .replay_tick(slots.get(&SlotKey::Tick).map(|b| &b[..]), *tick),
            Call::Record(record) if stage.hooks().record_reads_every_slot() => stage
                .hooks()
                .replay_record_over_slots(&tp.topic, &every_slot(), tp, record),
            Call::Record(record) => {
                let slot = SlotKey::for_key(record.data.key.as_ref());
                stage
                    .hooks()
                    .replay_record(&tp.topic, slots.get(&slot).map(|b| &b[..]), tp, record)
            }
        }
    }
}

impl<'a> Checker<'a> {
    /// I6 and I7: folds each task's committed deliveries, comparing the
    /// emissions with the committed outputs as it goes and the state with
    /// the committed changelog at the end. Returns the records the
    /// committed deliveries wrote, for [`Checker::check_outputs_accounted`].
    pub(super) fn check_committed_folds(&mut self, committed: &Committed<'a>) -> Accounted {
        let mut accounted = Accounted::default();
        let app: &'a App = self.input.app;
        for task in self.input.assembly.task_ids() {
            let plan = app.stage(&task.stage).expect("tasks belong to stages");
            let deliveries = committed_of(committed, &task);
            let mut slots = Slots::default();
            // A consistent view writes its outputs at its commits (V5),
            // epoch by epoch.
            let view_epoch = plan
                .region
                .as_ref()
                .filter(|region| region.is_view)
                .map(|region| region.epoch_ms);
            let mut held = view_epoch.map(|_| Vec::new());
            let mut epochs = FxHashMap::default();
            for delivery in deliveries {
                let epoch =
                    view_epoch.map(|epoch_ms| self.delivery_epoch(delivery, epoch_ms, &mut epochs));
                for (tp, offset) in delivery
                    .sent
                    .iter()
                    .chain(delivery.commit.unwrap_or_default())
                {
                    accounted.mark(&mut self.tps, tp, *offset);
                }
                let hold = held.as_mut().zip(epoch);
                self.fold_delivery(&task, plan, delivery, &mut slots, hold);
                if let (Some(held), Some(_)) = (held.as_mut(), delivery.commit) {
                    self.compare_releases(&task, delivery, held);
                    held.clear();
                }
            }
            if let Some(changelog) = &plan.changelog {
                let step = deliveries.last().map_or(0, |delivery| delivery.step);
                self.compare_state(&task, changelog, &slots, step);
            }
        }
        accounted
    }

    /// One committed delivery of the fold: replays the stage's logic over
    /// the delivered record (or tick) and its slot, checks a refusal's dead
    /// letter, compares the emissions and applies the slot changes. When
    /// the replay disagrees with what was committed, the logic is called
    /// again to tell impure logic (S4) from a broken rule.
    fn fold_delivery(
        &mut self,
        task: &TaskId,
        plan: &StagePlan,
        delivery: &Delivery<'a>,
        slots: &mut Slots,
        held: Option<(&mut Held, i64)>,
    ) {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return;
        };
        let is_tick = plan.tick_topic.as_ref() == Some(&delivery.tp.topic);
        let call = match is_tick {
            true => match parsley::tick_of(&record) {
                Some(tick) => Call::Tick(tick),
                None => return,
            },
            false => Call::Record(&record),
        };
        let replayed = call.replay(&plan.stage, slots, delivery.tp);
        let found = self.violations.len();
        let accepted = match &plan.dead_letter {
            Some(dead_letter) => {
                self.check_refusal(task, dead_letter, delivery, &record, &replayed)
            }
            None => true,
        };
        if accepted {
            match (&replayed, held) {
                (Ok(replayed), Some((held, epoch))) => {
                    let copies: Vec<TopicName> = plan
                        .stage
                        .hooks()
                        .operators::<parsley::RekeyOutputDecl>()
                        .map(|rekey| rekey.repartition.clone())
                        .collect();
                    hold(held, epoch, &replayed.emissions, &copies)
                }
                (Ok(replayed), None) => self.compare_emissions(task, delivery, &replayed.emissions),
                (Err(error), _) => {
                    self.violation(
                        Invariant::I6,
                        delivery.step,
                        format!(
                            "task {task} committed the delivery of {}@{}, whose logic fails: {error}",
                            delivery.tp, delivery.offset
                        ),
                    )
                    .on(delivery.at)
                    .about(delivery.tp, delivery.offset);
                }
            }
        }
        if self.violations.len() > found {
            self.name_impure_logic(task, &call, slots, delivery, &replayed, found);
        }
        let (true, Ok(replayed)) = (accepted, replayed) else {
            return;
        };
        let slot = match call {
            Call::Tick(_) => SlotKey::Tick,
            Call::Record(record) => SlotKey::for_key(record.data.key.as_ref()),
        };
        match replayed.slot {
            SlotChange::Set(bytes) => {
                slots.insert(slot, bytes);
            }
            SlotChange::Deleted => {
                slots.remove(&slot);
            }
            SlotChange::Unchanged => {}
        }
        apply_other_slots(slots, replayed.other_slots);
    }

    /// `step` is that of the task's last committed delivery: the state is
    /// compared once, at the end.
    fn compare_state(&mut self, task: &TaskId, changelog: &TopicName, slots: &Slots, step: u64) {
        let tp = Tp::new(changelog.clone(), task.partition);
        let id = self.tps.id(&tp);
        // By changelog key as logged, each key parsed once (a slot has one
        // key), with its slot and its value borrowed from the log (`None`:
        // deleted).
        let mut logged: FxHashMap<&[u8], (SlotKey, Option<&Bytes>)> = FxHashMap::default();
        let records = self
            .tps
            .log(id)
            .into_iter()
            .flat_map(|log| log.read_committed());
        for (offset, data) in records {
            let Some(key) = data.key.as_deref() else {
                self.invalid_slot_key(&tp, offset);
                continue;
            };
            let value = data.value.as_ref();
            match logged.entry(key) {
                MapEntry::Occupied(mut entry) => entry.get_mut().1 = value,
                MapEntry::Vacant(entry) => match SlotKey::from_changelog_key(key) {
                    Ok(slot) => {
                        entry.insert((slot, value));
                    }
                    Err(_) => self.invalid_slot_key(&tp, offset),
                },
            }
        }
        let live = || {
            logged
                .values()
                .filter_map(|(slot, value)| Some((slot, (*value)?)))
        };
        let same = live().count() == slots.len()
            && live().all(|(slot, value)| slots.get(slot) == Some(value));
        if !same {
            let logged: BTreeMap<&SlotKey, &Bytes> = live().collect();
            let slot_keys: BTreeSet<&SlotKey> =
                logged.keys().copied().chain(slots.keys()).collect();
            for slot in slot_keys {
                let (actual, expected) = (logged.get(slot).copied(), slots.get(slot));
                if actual != expected {
                    let render = |bytes: Option<&Bytes>| {
                        bytes.map_or("unset".to_string(), |bytes| {
                            parsley::bytes_for_humans(bytes)
                        })
                    };
                    let message = format!(
                        "task {task}: committed slot {slot:?} is {} on {tp}, but the fold of its committed deliveries gives {}",
                        render(actual),
                        render(expected)
                    );
                    self.violation(Invariant::I6, step, message).of_task(task);
                    return;
                }
            }
        }
    }

    fn invalid_slot_key(&mut self, tp: &Tp, offset: u64) {
        self.violation(
            Invariant::I6,
            0,
            format!("{tp}@{offset} has no valid slot key"),
        )
        .about(tp, offset);
    }
}

/// A delivery's changes to slots other than its own (K2: a timer service's
/// tick).
fn apply_other_slots(slots: &mut Slots, changes: Vec<(SlotKey, SlotChange)>) {
    for (slot, change) in changes {
        match change {
            SlotChange::Set(bytes) => {
                slots.insert(slot, bytes);
            }
            SlotChange::Deleted => {
                slots.remove(&slot);
            }
            SlotChange::Unchanged => {}
        }
    }
}

/// V5: what a consistent view holds until its commit: per epoch, in
/// order, the last emission per topic and key, in the order each was first
/// held.
pub(super) type Held = Vec<(i64, Vec<(Option<bytes::Bytes>, parsley::Emission)>)>;

/// Holds `emissions` of a delivery of `epoch`. A re-keyed copy (R3, an
/// emission to one of `copies`, right after the record it copies) is held
/// under the key of that record, so that each row's copy is kept.
fn hold(held: &mut Held, epoch: i64, emissions: &[parsley::Emission], copies: &[TopicName]) {
    if held.last().is_none_or(|(last, _)| *last != epoch) {
        held.push((epoch, Vec::new()));
    }
    let (_, held) = held.last_mut().expect("pushed above");
    let key_of =
        |emission: &parsley::Emission| emission.encoded().ok().and_then(|(key, _)| key.cloned());
    let mut copied: Option<Option<bytes::Bytes>> = None;
    for emission in emissions {
        let identity = match copies.contains(emission.topic()) {
            true => copied.take().unwrap_or_else(|| key_of(emission)),
            false => {
                copied = Some(key_of(emission));
                key_of(emission)
            }
        };
        let at = held
            .iter()
            .position(|(key, earlier)| earlier.topic() == emission.topic() && *key == identity);
        match at {
            Some(at) => held[at] = (identity, emission.clone()),
            None => held.push((identity, emission.clone())),
        }
    }
}

impl Checker<'_> {
    /// The epoch of a consistent view's delivery (V3), computed here: from
    /// its record's `parsley-epoch` header on a topic stages write, or as
    /// the running highest timestamp of its source partition over
    /// `epoch_ms` (cached per tp in `epochs`).
    fn delivery_epoch(
        &mut self,
        delivery: &Delivery<'_>,
        epoch_ms: i64,
        epochs: &mut FxHashMap<usize, FxHashMap<u64, i64>>,
    ) -> i64 {
        if let Some(value) = self
            .tps
            .data(delivery.id, delivery.offset)
            .and_then(|data| data.header(parsley::header::EPOCH_HEADER))
        {
            return written_epoch(value).map_or(i64::MIN, |(epoch, _)| epoch);
        }
        let tps = &self.tps;
        let source = epochs.entry(delivery.id).or_insert_with(|| {
            tps.source_epochs(delivery.id, epoch_ms)
                .into_iter()
                .collect()
        });
        source.get(&delivery.offset).copied().unwrap_or(i64::MIN)
    }
}
