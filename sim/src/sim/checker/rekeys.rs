//! I17: re-keyed outputs (R3), from each task's committed deliveries and
//! the committed logs alone.
//!
//! For a stage that re-keys one of its outputs within itself, each
//! committed delivery's records on that output and on the re-key's
//! repartition topic must pair one to one, in the order written, each copy
//! with its record's value, timestamp and headers, on the partition its key
//! hashes to. Only the key the copy should have comes from the stage
//! (`RekeyOutputDecl::key_of`), since the key function and the codecs
//! are the user's; the checker trusts none of the wrapper that writes the
//! copies, and its replay of the stage's logic (I7) would repeat any bug
//! of that wrapper.

use std::fmt::Write as _;

use parsley::bytes_for_humans;
use parsley::partition_for;
use parsley::RekeyOutputDecl;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::{App, RecordData, Tp};

use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant, Relation};

fn describe(bytes: Option<&bytes::Bytes>) -> String {
    bytes.map_or("null".to_string(), |bytes| bytes_for_humans(bytes))
}

impl<'a> Checker<'a> {
    /// I17 for every re-key within a stage: each task's committed
    /// deliveries, reported once per task at its first wrong one.
    pub(super) fn check_rekeyed_outputs(&mut self, committed: &Committed<'a>) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            for decl in plan.stage.hooks().operators::<parsley::RekeyOutputDecl>() {
                self.check_each_task(
                    committed,
                    plan.name(),
                    || (),
                    |checker, task, delivery, ()| {
                        checker.check_rekeyed_delivery(plan, decl, task, delivery)
                    },
                );
            }
        }
    }

    /// One committed delivery; false once it is reported.
    fn check_rekeyed_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &RekeyOutputDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
    ) -> bool {
        if delivery.dead_lettered(plan) {
            return true;
        }
        let written = |topic: &parsley::TopicName| {
            delivery
                .sent
                .iter()
                .filter(move |(tp, _)| tp.topic == *topic)
                .collect::<Vec<_>>()
        };
        let records = written(&decl.output);
        let copies = written(&decl.repartition);
        let partitions = self
            .input
            .assembly
            .partitions_of(decl.repartition.as_str())
            .expect("the assembly sizes every derived topic");
        let what = format!("{}@{}", delivery.tp, delivery.offset);
        let mut problem = None;
        if records.len() != copies.len() {
            // Told as counts: which record lacks its copy (or which copy
            // its record) positions alone cannot tell.
            let (tp, offset) = records
                .first()
                .or(copies.first())
                .expect("one is not empty");
            problem = Some((
                tp.clone(),
                *offset,
                format!(
                    "wrote {} records to {} and {} copies to {}",
                    records.len(),
                    decl.output,
                    copies.len(),
                    decl.repartition
                ),
            ));
        }
        for (record_at, copy_at) in records.iter().zip(&copies) {
            if problem.is_some() {
                break;
            }
            let (Some(original), Some(copied)) = (self.data_at(record_at), self.data_at(copy_at))
            else {
                continue;
            };
            if let Some(mismatch) =
                self.copy_mismatch(decl, original, copied, copy_at, partitions, task)
            {
                problem = Some((
                    copy_at.0.clone(),
                    copy_at.1,
                    format!(
                        "wrote {}@{} to {}, then its copy {}@{} to {}, which {mismatch}",
                        record_at.0,
                        record_at.1,
                        decl.output,
                        copy_at.0,
                        copy_at.1,
                        decl.repartition
                    ),
                ));
                break;
            }
        }
        let Some((tp, offset, message)) = problem else {
            return true;
        };
        let message = format!(
            "task {task}: delivering {what}, stage {:?} {message} (R3: the re-key {:?} writes each record of {} again, its key selected, value, timestamp and stamp kept)",
            plan.name(),
            decl.name,
            decl.output
        );
        self.violation(Invariant::I17, delivery.step, message)
            .on(delivery.at)
            .about(delivery.tp, delivery.offset)
            .naming(Relation::Named, &tp, offset, None);
        false
    }

    /// The record written at `at`, from the log.
    fn data_at(&mut self, (tp, offset): &(Tp, u64)) -> Option<&'a RecordData> {
        let id = self.tps.id(tp);
        self.tps.data(id, *offset)
    }

    /// What is wrong with `copied`, the copy at `copy_at` of `original`,
    /// if anything.
    #[allow(clippy::too_many_arguments)]
    fn copy_mismatch(
        &self,
        decl: &RekeyOutputDecl,
        original: &RecordData,
        copied: &RecordData,
        copy_at: &(Tp, u64),
        partitions: u32,
        task: &TaskId,
    ) -> Option<String> {
        let mut wrong = String::new();
        if copied.value != original.value {
            let _ = write!(
                wrong,
                "has the value {} where the record has {}",
                describe(copied.value.as_ref()),
                describe(original.value.as_ref())
            );
        } else if copied.timestamp != original.timestamp {
            let _ = write!(
                wrong,
                "has the timestamp {} where the record has {}",
                copied.timestamp, original.timestamp
            );
        } else if copied.headers != original.headers {
            wrong.push_str("has other headers (another stamp) than the record");
        } else if let Some(value) = &original.value {
            // A key function that refuses the record: I6 and I10 judge it.
            let expected = decl.key_of(original.key.as_ref(), value).ok()?;
            let partition = partition_for(expected.as_deref(), partitions, task.partition);
            if copied.key != expected {
                let _ = write!(
                    wrong,
                    "has the key {} where the re-key's function selects {}",
                    describe(copied.key.as_ref()),
                    describe(expected.as_ref())
                );
            } else if copy_at.0.partition != partition {
                let _ = write!(
                    wrong,
                    "is on partition {} where its key hashes to partition {partition}",
                    copy_at.0.partition
                );
            }
        }
        (!wrong.is_empty()).then_some(wrong)
    }
}
