//! The committed history of a run, commit by commit, and the first commit
//! after which a failing property fails.
//!
//! A property is a verdict on everything a run committed; the commit that
//! turned it is what a reader wants told. The history is the run's commits
//! in trace order: each task transaction that committed (with the records
//! its deliveries, ticks and commit sent) and each input record (at its
//! production). A property is read again over prefixes of that history,
//! with the records of later commits hidden, and bisected to a commit
//! before which it held and after which it fails.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use parsley::Tp;

use crate::sim::running::property::{Committed, PropertyResult};
use crate::sim::world::trace::{Entry, Event, TaskAt, TxnRef};

/// One commit of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Commit {
    /// The step it committed at.
    pub step: u64,
    /// The task instance whose transaction it is; `None` for an input.
    pub at: Option<TaskAt>,
    /// The records it made visible, in the order they were sent.
    pub records: Vec<(Tp, u64)>,
}

/// How many prefixes a bisection reads at most: enough for 2^20 commits.
const READS_MAX: usize = 22;

/// The run's commits, in trace order (see the [module docs](self)).
pub(crate) fn commits(trace: &[Entry]) -> Vec<Commit> {
    let mut open: BTreeMap<(TaskAt, TxnRef), Vec<(Tp, u64)>> = BTreeMap::new();
    let mut commits = Vec::new();
    for entry in trace {
        match &entry.event {
            Event::InputProduced { tp, offset, .. } => commits.push(Commit {
                step: entry.step,
                at: None,
                records: vec![(tp.clone(), *offset)],
            }),
            Event::Delivered { at, txn, sent, .. } => open
                .entry((at.clone(), *txn))
                .or_default()
                .extend(sent.iter().cloned()),
            Event::TickChecked {
                at,
                txn,
                emitted: Some(emitted),
                ..
            } => open
                .entry((at.clone(), *txn))
                .or_default()
                .push(emitted.clone()),
            Event::Committed { at, txn, sent } => {
                let mut records = open.remove(&(at.clone(), *txn)).unwrap_or_default();
                records.extend(sent.iter().cloned());
                if !records.is_empty() {
                    commits.push(Commit {
                        step: entry.step,
                        at: Some(at.clone()),
                        records,
                    });
                }
            }
            Event::Aborted { at, txn, .. } => {
                open.remove(&(at.clone(), *txn));
            }
            _ => {}
        }
    }
    commits
}

/// The first commit of `commits` after which `property` fails over what
/// `committed` holds, found by bisection: the property holds over the
/// commits before it and fails with it. `None` when the property fails
/// over no commit at all, holds over all of them, or reads a task's state
/// (which is the run's end state whatever the prefix, so a prefix of the
/// records would be judged against a state from later).
pub(crate) fn first_failing(
    committed: &Committed<'_>,
    commits: &[Commit],
    property: &dyn Fn(&Committed<'_>) -> PropertyResult,
) -> Option<usize> {
    let fails_after = |kept: usize| -> Option<bool> {
        let hidden: HashSet<(Tp, u64)> = commits[kept..]
            .iter()
            .flat_map(|commit| commit.records.iter().cloned())
            .collect();
        let view = committed.hiding(&hidden);
        let verdict = catch_unwind(AssertUnwindSafe(|| property(&view)));
        let fails = !matches!(verdict, Ok(Ok(())));
        (!view.read_state()).then_some(fails)
    };
    // `passes` commits are known to pass, `fails` known to fail.
    let (mut passes, mut fails) = (0, commits.len());
    if fails_after(passes)? || !fails_after(fails)? {
        return None;
    }
    for _ in 0..READS_MAX {
        if fails - passes <= 1 {
            break;
        }
        let middle = passes + (fails - passes) / 2;
        if fails_after(middle)? {
            fails = middle;
        } else {
            passes = middle;
        }
    }
    (fails - passes == 1).then(|| fails - 1)
}

/// Whether a view read a task's state: set by [`Committed`]'s state reads.
#[derive(Debug, Default)]
pub(crate) struct StateRead(Cell<bool>);

impl StateRead {
    pub(crate) fn mark(&self) {
        self.0.set(true);
    }

    pub(crate) fn get(&self) -> bool {
        self.0.get()
    }
}
