//! I13: foreign-key joins (J14), from each resolve task's committed
//! deliveries alone.
//!
//! The checker keeps its own model of each resolve task: per left key, the
//! offset and value of the latest left record the task delivered (the
//! current version) and whether the output's latest record for the key is
//! a result, read from what the task wrote. It uses none of the join's
//! state and none of its code but the response codec; the user's
//! extractor and joiner (`ForeignKeyJoinDecl::extracted` and `joined`,
//! with the tables' codecs and nothing else) are called for the values.
//! Then: a response whose version is not its key's current version is
//! stale and writes nothing; a current one writes its key's result, the
//! joiner's value for the current left value and the response's right
//! value, when it has a right value or the join is a left join, else a
//! tombstone when the key had a result, else nothing; a response is never
//! delivered before the task delivered its left partition up to the
//! response's version (G2); a deleted left row writes a tombstone when it
//! had a result, nothing otherwise; a left update whose value refers to a
//! foreign key writes nothing (its response decides), and one that refers
//! to none is decided at once, as a current response with no right value.

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::{App, Codec};
use parsley::{ForeignKeyJoinDecl, ForeignKeyJoinPart, JoinKind, ResponseCodec};
use rustc_hash::FxHashMap;

use super::operated::Written;
use super::purity::{Answer, UserCalls};
use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// A left key as the checker has it: the current version, its left value,
/// and whether the output's latest record for it is a result.
#[derive(Clone)]
struct Current {
    version: u64,
    left: Bytes,
    joined: bool,
}

/// A resolve task as the checker has it: its left keys, and the offset of
/// the latest record it delivered from its left partition.
#[derive(Default)]
struct Model {
    versions: FxHashMap<Bytes, Current>,
    left_delivered: Option<u64>,
}

/// What a delivery must write under its key.
#[derive(Debug, PartialEq)]
enum Expected {
    Nothing,
    /// The key's result (none: the key has one with its sides, and the
    /// user's joiner gave none, so no record the stage wrote can be it).
    Result(Option<Bytes>),
    Tombstone,
}

impl<'a> Checker<'a> {
    /// I13 (J14) for every foreign-key join's resolve stage: each task's
    /// committed deliveries, in committed order, through the checker's own
    /// versions. A task is reported once, at its first wrong delivery.
    pub(super) fn check_foreign_key_joins(&mut self, committed: &Committed<'a>) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            let Some(decl) = plan.stage.hooks().operator::<parsley::ForeignKeyJoinDecl>() else {
                continue;
            };
            if decl.part != ForeignKeyJoinPart::Resolve {
                continue;
            }
            self.check_each_task(
                committed,
                plan.name(),
                Model::default,
                |checker, task, delivery, model| {
                    checker.check_resolve_delivery(plan, decl, task, delivery, model)
                },
            );
        }
    }

    /// One committed delivery of a resolve task; false once it is reported.
    fn check_resolve_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &ForeignKeyJoinDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        model: &mut Model,
    ) -> bool {
        let versions = &mut model.versions;
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        if delivery.dead_lettered(plan) {
            return true;
        }
        let Some(key) = record.data.key.clone() else {
            // Refused (J15): I6 and I10 judge the delivery.
            return true;
        };
        let current = versions.get(&key).cloned();
        let had = current.as_ref().is_some_and(|current| current.joined);
        let mut calls = UserCalls::default();
        let (expected, why) = if delivery.tp.topic == decl.left {
            model.left_delivered = Some(delivery.offset);
            match &record.data.value {
                None => {
                    versions.remove(&key);
                    match had {
                        true => (
                            Expected::Tombstone,
                            "the left row is deleted and had a result".to_string(),
                        ),
                        false => (
                            Expected::Nothing,
                            "the left row is deleted and had no result".to_string(),
                        ),
                    }
                }
                Some(left) => {
                    let extracted = decl.extracted(left);
                    let bytes = left.clone();
                    calls.note("extractor", answer_of(&extracted), move |plan, _, _| {
                        let decl = plan.stage.hooks().operator::<ForeignKeyJoinDecl>()?;
                        Some(answer_of(&decl.extracted(&bytes)))
                    });
                    let Ok(foreign) = extracted else {
                        // The extractor or a codec refuses it: I6 and I10
                        // judge that.
                        return true;
                    };
                    versions.insert(
                        key.clone(),
                        Current {
                            version: delivery.offset,
                            left: left.clone(),
                            joined: had,
                        },
                    );
                    match foreign {
                        Some(foreign) => (
                            Expected::Nothing,
                            format!(
                                "a left update that refers to foreign key {} (its response decides the result)",
                                bytes_for_humans(&foreign)
                            ),
                        ),
                        None if decl.kind == JoinKind::Left => {
                            let Some(joined) = self.fk_joined(decl, &key, left, None, &mut calls)
                            else {
                                return true;
                            };
                            (
                                Expected::Result(joined),
                                "a left update that refers to no foreign key, of a left join"
                                    .to_string(),
                            )
                        }
                        None if had => (
                            Expected::Tombstone,
                            "a left update that refers to no foreign key, of an inner join, for a key with a result".to_string(),
                        ),
                        None => (
                            Expected::Nothing,
                            "a left update that refers to no foreign key, of an inner join, for a key without a result".to_string(),
                        ),
                    }
                }
            }
        } else {
            let Some(response) = record
                .data
                .value
                .as_ref()
                .and_then(|bytes| ResponseCodec.decode(bytes).ok())
            else {
                // Refused (J15): I6 and I10 judge the delivery.
                return true;
            };
            // G2: the response claims the left record of its version, so
            // the task delivered its left partition up to that offset first;
            // for a key's first record as for any other.
            if model
                .left_delivered
                .is_none_or(|delivered| response.version > delivered)
            {
                let message = format!(
                    "task {task} committed the delivery of response {}@{} (key {}, version {}) before the left record of its version: it had delivered its left partition {} (J14: the response claims its left record, G2)",
                    delivery.tp,
                    delivery.offset,
                    bytes_for_humans(&key),
                    response.version,
                    model
                        .left_delivered
                        .map_or("not at all".to_string(), |delivered| format!("up to offset {delivered}")),
                );
                self.violation(Invariant::I13, delivery.step, message)
                    .on(delivery.at)
                    .about(delivery.tp, delivery.offset);
                return false;
            }
            match &current {
                Some(current) if response.version > current.version => {
                    let message = format!(
                        "task {task} committed the delivery of response {}@{} (key {}, version {}) before the left record of its version: its latest left record of the key was offset {} (J14: the response claims its left record, G2)",
                        delivery.tp,
                        delivery.offset,
                        bytes_for_humans(&key),
                        response.version,
                        current.version
                    );
                    self.violation(Invariant::I13, delivery.step, message)
                        .on(delivery.at)
                        .about(delivery.tp, delivery.offset);
                    return false;
                }
                Some(current) if response.version == current.version => {
                    let result = response.right.is_some() || decl.kind == JoinKind::Left;
                    match (result, had) {
                        (true, _) => {
                            let Some(joined) = self.fk_joined(
                                decl,
                                &key,
                                &current.left,
                                response.right.as_ref(),
                                &mut calls,
                            ) else {
                                return true;
                            };
                            (Expected::Result(joined), "a current response".to_string())
                        }
                        (false, true) => (
                            Expected::Tombstone,
                            "a current response with no right value, for a key with a result"
                                .to_string(),
                        ),
                        (false, false) => (
                            Expected::Nothing,
                            "a current response with no right value, for a key without a result"
                                .to_string(),
                        ),
                    }
                }
                Some(current) => (
                    Expected::Nothing,
                    format!(
                        "a stale response: version {}, when the key's latest left record is offset {}",
                        response.version, current.version
                    ),
                ),
                None => (
                    Expected::Nothing,
                    format!(
                        "a stale response: version {}, for a key whose left row is deleted",
                        response.version
                    ),
                ),
            }
        };
        let output = decl.output.as_ref();
        let wrote = self.written_to(delivery, output);
        let under_key = |written: &Written| written.key.as_ref() == Some(&key);
        let same = match (&expected, &wrote[..]) {
            (Expected::Nothing, []) => true,
            (Expected::Result(Some(value)), [written]) => {
                under_key(written) && written.value.as_ref() == Some(value)
            }
            (Expected::Tombstone, [written]) => under_key(written) && written.value.is_none(),
            _ => false,
        };
        if same {
            // The output's latest record for the key, as the model's.
            if let (Some(current), [written]) = (versions.get_mut(&key), &wrote[..]) {
                current.joined = written.value.is_some();
            }
            return true;
        }
        let output = output.map_or("its output", |topic| topic.as_str());
        let message = format!(
            "task {task} committed the delivery of {}@{} (key {}), {why}: the join should write {} to {output}",
            delivery.tp,
            delivery.offset,
            bytes_for_humans(&key),
            match &expected {
                Expected::Nothing => "nothing".to_string(),
                Expected::Result(Some(value)) =>
                    format!("its result {} under the key", bytes_for_humans(value)),
                Expected::Result(None) =>
                    "its result under the key (the user's joiner gave none for sides that have one)".to_string(),
                Expected::Tombstone => "one tombstone under the key".to_string(),
            },
        );
        self.report_join_delivery(task, delivery, &record, &calls, message, &wrote)
    }

    /// The key's result value for these sides, by the user's joiner:
    /// `Some(None)` when it gives none, `None` when the joiner or a codec
    /// refuses it (I6 and I10 judge that).
    fn fk_joined(
        &self,
        decl: &ForeignKeyJoinDecl,
        key: &Bytes,
        left: &Bytes,
        right: Option<&Bytes>,
        calls: &mut UserCalls<'_>,
    ) -> Option<Option<Bytes>> {
        let joined = decl.joined(key, left, right.map(|right| &right[..]));
        let sides = (key.clone(), left.clone(), right.cloned());
        calls.note("joiner", answer_of(&joined), move |plan, _, _| {
            let decl = plan.stage.hooks().operator::<ForeignKeyJoinDecl>()?;
            let (key, left, right) = &sides;
            Some(answer_of(&decl.joined(key, left, right.as_deref())))
        });
        joined.ok()
    }
}

/// A user function's answer as the S4 probe compares it.
pub(super) fn answer_of(answer: &Result<Option<Bytes>, parsley::ReplayError>) -> Answer {
    Answer::of(answer, |answer| vec![answer.clone()])
}
