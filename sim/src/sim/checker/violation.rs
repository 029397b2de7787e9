//! What the checker reports: a broken guarantee ([`Violation`]), the other
//! records it names ([`Related`]) and where they were.

use std::fmt;
use std::sync::Arc;

use parsley::TaskId;
use parsley::{Stamp, Tp};

use crate::model::EntryStatus;
use crate::sim::world::trace::{Entry, TaskAt};

use super::Invariant;

/// One broken guarantee: which, when, where, and the records involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant.
    pub invariant: Invariant,
    /// The step of the run at which it broke (for the audit, see its docs).
    pub step: u64,
    /// What happened, naming the records involved.
    pub message: String,
    /// The task it broke on, when the check knows it.
    pub task: Option<Arc<TaskId>>,
    /// The application instance that ran the task, when the check knows it:
    /// the checks of a task's committed history name the instance that made
    /// the committed delivery they are about.
    pub instance: Option<u32>,
    /// The record the message is about: the delivery that broke the rule, or
    /// the emission, tick or committed record that is wrong.
    pub record: Option<(Tp, u64)>,
    /// That record's stamp as its log holds it, where the rule is about
    /// stamps (I1, I5).
    pub stamp: Option<Stamp>,
    /// The other records the violation names, each with where it was at the
    /// violating step: every claim of the delivered record (I1), the record
    /// being delivered when a wrong record was written (I5, I7) and the
    /// claims its stamp lacks or has in excess (I5), the record that was due
    /// instead (I2).
    pub related: Vec<Related>,
    /// Which of the simulator's own findings it is, when it is one rather
    /// than the checker's or a property's: they share I8 or I9 with the
    /// checker, and a report groups and shrinks by this.
    pub finding: Option<Finding>,
}

/// The simulator's own findings, each sharing an invariant with the
/// checker's (docs/RULES.md#i8, #i9) and opening its message with its
/// [`Finding::prefix`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Finding {
    /// A task stop the simulation did not expect (I8).
    UnexpectedStop,
    /// A task start the model refused (I8).
    RefusedStart,
    /// A run that panicked: the harness, an input generator or a property
    /// (I8).
    Panicked,
    /// Logic found not to be a pure function (S4, under I9).
    Impure,
}

impl Finding {
    /// Every finding.
    pub const ALL: [Finding; 4] = [
        Finding::UnexpectedStop,
        Finding::RefusedStart,
        Finding::Panicked,
        Finding::Impure,
    ];

    /// What its violations' messages open with, and how a report names it.
    pub fn prefix(self) -> &'static str {
        match self {
            Finding::UnexpectedStop => "unexpected stop",
            Finding::RefusedStart => "refused start",
            Finding::Panicked => "the run panicked",
            Finding::Impure => "S4 (logic is not a pure function)",
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix())
    }
}

impl Violation {
    /// A violation that names no task and no record.
    pub fn new(invariant: Invariant, step: u64, message: String) -> Violation {
        Violation {
            invariant,
            step,
            message,
            task: None,
            instance: None,
            record: None,
            stamp: None,
            related: Vec::new(),
            finding: None,
        }
    }

    /// The simulator's own `finding` of `invariant` at `step`: its message
    /// is the finding's prefix, then `": "` and `rest`.
    pub fn found(finding: Finding, invariant: Invariant, step: u64, rest: &str) -> Violation {
        Violation {
            finding: Some(finding),
            ..Violation::new(invariant, step, format!("{}: {rest}", finding.prefix()))
        }
    }

    /// The task instance it broke on, when both the task and the instance
    /// are known.
    pub fn at(&self) -> Option<TaskAt> {
        Some(TaskAt {
            task: Arc::clone(self.task.as_ref()?),
            instance: self.instance?,
        })
    }

    /// The trace entry at which it broke: among the entries of its step, the
    /// first on its task instance that concerns its record, else the first
    /// that concerns its record, else the first on its task, else the step's
    /// last entry; a step without entries gives the last entry before it.
    /// `None` only for an empty trace.
    pub fn entry_in(&self, trace: &[Entry]) -> Option<usize> {
        let start = trace.partition_point(|entry| entry.step < self.step);
        let end = trace.partition_point(|entry| entry.step <= self.step);
        let on_task = |index: &usize, instance: bool| {
            let (Some(task), Some(at)) = (&self.task, trace[*index].event.task_at()) else {
                return false;
            };
            at.task == *task && (!instance || self.instance.is_none_or(|i| i == at.instance))
        };
        let concerns = |index: &usize| {
            self.record
                .as_ref()
                .is_some_and(|(tp, offset)| trace[*index].event.concerns(tp, *offset))
        };
        (start..end)
            .find(|index| concerns(index) && on_task(index, true))
            .or_else(|| (start..end).find(concerns))
            .or_else(|| (start..end).find(|index| on_task(index, false)))
            .or_else(|| end.checked_sub(1))
            .or_else(|| (!trace.is_empty()).then_some(0))
    }

    /// Names the task instance it broke on.
    pub(super) fn on(&mut self, at: &TaskAt) -> &mut Violation {
        self.task = Some(Arc::clone(&at.task));
        self.instance = Some(at.instance);
        self
    }

    /// Names the task it broke on.
    pub(super) fn of_task(&mut self, task: &TaskId) -> &mut Violation {
        self.task = Some(Arc::new(task.clone()));
        self
    }

    /// Names the record the message is about.
    pub(super) fn about(&mut self, tp: &Tp, offset: u64) -> &mut Violation {
        self.record = Some((tp.clone(), offset));
        self
    }

    /// Names that record's stamp.
    pub(super) fn stamped(&mut self, stamp: &Stamp) -> &mut Violation {
        self.stamp = Some(stamp.clone());
        self
    }

    /// Names another record; where it was is filled in once the whole
    /// trace has been checked ([`check`](super::check)).
    pub(super) fn naming(
        &mut self,
        relation: Relation,
        tp: &Tp,
        offset: u64,
        gate: Option<Gate>,
    ) -> &mut Violation {
        self.related.push(Related {
            relation,
            tp: tp.clone(),
            offset,
            gate,
            status: None,
            deliveries: Vec::new(),
        });
        self
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at step {}: {}",
            self.invariant, self.step, self.message
        )
    }
}

/// A record a violation names besides its own, and where it was at the
/// violating step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Related {
    /// How it bears on the violation.
    pub relation: Relation,
    /// Its tp.
    pub tp: Tp,
    /// Its offset.
    pub offset: u64,
    /// Where the violating task instance's gate had it at the violating
    /// step, for a record of one of that instance's own tps.
    pub gate: Option<Gate>,
    /// Its status in the log at the end of the run; `None` when the log
    /// holds no record at that offset.
    pub status: Option<EntryStatus>,
    /// Every delivery of it in the trace, by any task instance, in trace
    /// order.
    pub deliveries: Vec<DeliveryOf>,
}

/// How a related record bears on a violation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Relation {
    /// A claim of the violation's record that the task had not delivered
    /// when it delivered the record (I1).
    Unresolved,
    /// Another claim of the violation's record.
    Claim,
    /// The record being delivered when the violation's record was written
    /// (I5, I7).
    Delivering,
    /// The record that was due instead of the violation's (I2).
    Due,
    /// A claim the violation's record should carry and does not (I5).
    Missing,
    /// A claim the violation's record carries and should not (I5).
    Extra,
    /// Another record a failing property names as what it is about.
    Named,
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Relation::Unresolved => "unresolved claim",
            Relation::Named => "named by the property",
            Relation::Claim => "claim",
            Relation::Delivering => "being delivered",
            Relation::Due => "due",
            Relation::Missing => "missing claim",
            Relation::Extra => "extra claim",
        })
    }
}

/// Where a task instance's gate had a record of one of its own tps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    /// Delivered: the tp's position had passed it.
    Delivered,
    /// Fetched, waiting in the instance's buffer, not delivered.
    Fetched,
    /// Not fetched yet.
    NotFetched,
}

/// One delivery of a related record, and how its transaction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryOf {
    /// The step of the delivery.
    pub step: u64,
    /// The task instance that delivered it.
    pub at: TaskAt,
    /// How the delivery's transaction ended, as far as the trace tells.
    pub ended: TxnEnd,
    /// Whether it came before the violation in the trace (a step can hold
    /// several deliveries).
    pub before: bool,
}

/// How a task's transaction ended, as far as the trace tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnEnd {
    /// It committed at this step.
    Committed(u64),
    /// It aborted at this step.
    Aborted(u64),
    /// The trace shows no end: its instance crashed or was fenced, or the
    /// run ended first.
    Unfinished,
}

impl fmt::Display for TxnEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnEnd::Committed(step) => write!(f, "committed at step {step}"),
            TxnEnd::Aborted(step) => write!(f, "aborted at step {step}"),
            TxnEnd::Unfinished => f.write_str("never committed"),
        }
    }
}

impl Related {
    /// Where the record was when the violation happened, in a few words:
    /// what the violating instance's gate had done with it, its status in
    /// the log, its last delivery before the violation and its first after.
    pub fn whereabouts(&self) -> String {
        let mut parts = Vec::new();
        match self.gate {
            Some(Gate::Delivered) => parts.push("delivered by then".to_string()),
            Some(Gate::Fetched) => parts.push("fetched but not delivered yet".to_string()),
            Some(Gate::NotFetched) => parts.push("not fetched yet".to_string()),
            None => {}
        }
        parts.push(
            match self.status {
                None => "not in the log",
                Some(EntryStatus::Committed) => "committed in the log",
                Some(EntryStatus::Open) => "in a transaction still open at the end of the run",
                Some(EntryStatus::Aborted) => "written by an aborted transaction",
                Some(EntryStatus::Control) => "a transaction marker in the log",
            }
            .to_string(),
        );
        let before = self.deliveries.partition_point(|delivery| delivery.before);
        let describe = |delivery: &DeliveryOf| {
            format!(
                "step {} by {} ({})",
                delivery.step, delivery.at, delivery.ended
            )
        };
        if let Some(last) = before.checked_sub(1).map(|last| &self.deliveries[last]) {
            let earlier = match before - 1 {
                0 => String::new(),
                1 => " (and once before)".to_string(),
                times => format!(" (and {times} times before)"),
            };
            parts.push(format!("delivered at {}{earlier}", describe(last)));
        }
        match self.deliveries.get(before) {
            Some(next) => parts.push(format!("next delivered at {}", describe(next))),
            None if before == 0 => parts.push("never delivered".to_string()),
            None => parts.push("not delivered again".to_string()),
        }
        parts.join("; ")
    }
}
