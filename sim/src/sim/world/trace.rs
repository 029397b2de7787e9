//! What a simulated run did, event by event: the record the checker
//! recomputes every invariant from, the shrinker compares, and the timeline
//! draws.

use std::fmt;
use std::sync::Arc;

use parsley::TaskId;
use parsley::{Claim, Tp};

/// One transaction of one task instance: the producer (id and epoch) and the
/// host's transaction number. Unique within a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxnRef {
    /// The producer id.
    pub producer: u64,
    /// The producer's epoch.
    pub epoch: u32,
    /// The host's transaction number.
    pub number: u64,
}

impl fmt::Display for TxnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "txn {}.{}#{}", self.producer, self.epoch, self.number)
    }
}

/// Where an event happened: a task on an application instance. The task id
/// is shared, so that recording an event does not copy its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskAt {
    /// The task.
    pub task: Arc<TaskId>,
    /// The application instance.
    pub instance: u32,
}

impl fmt::Display for TaskAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@i{}", self.task, self.instance)
    }
}

/// One thing that happened in a run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// An input record was appended (plain) or sent in an input transaction.
    InputProduced {
        /// The tp.
        tp: Tp,
        /// The offset.
        offset: u64,
        /// Whether it was sent in an input transaction.
        transactional: bool,
    },
    /// An input transaction committed, aborted, or was left hanging.
    InputTransaction {
        /// The input transaction's transactional id.
        id: String,
        /// How it ended.
        outcome: InputOutcome,
    },
    /// The broker aborted transactions that outlived their timeout.
    TransactionsExpired {
        /// Their transactional ids.
        ids: Vec<String>,
    },
    /// The wall clock moved.
    ClockAdvanced {
        /// The wall clock, milliseconds since the epoch.
        now: i64,
    },
    /// A task instance started from what was committed.
    TaskStarted {
        /// The task instance.
        at: TaskAt,
    },
    /// A fetch for a task returned records, or, for a task that delivers
    /// in timestamp order (G9), any fetch: what its waits depend on.
    Fetched {
        /// The task instance.
        at: TaskAt,
        /// The tp.
        tp: Tp,
        /// The fetch position.
        from: u64,
        /// The position after the fetch.
        next: u64,
        /// How many records it returned.
        records: usize,
        /// The log end (high watermark) the fetch carried.
        log_end: u64,
        /// The visible end (last stable offset) the driver gave a task that
        /// delivers in timestamp order with the fetch; `None` for others.
        visible_end: Option<u64>,
    },
    /// A task that delivers in timestamp order (G9), holding records, was
    /// asked what to deliver and offered nothing: a moment its waits for
    /// caught-up sources start from.
    Withheld {
        /// The task instance.
        at: TaskAt,
    },
    /// A head was first seen held on `claim`.
    Held {
        /// The task instance.
        at: TaskAt,
        /// The tp.
        tp: Tp,
        /// The offset.
        offset: u64,
        /// The claim it waits on.
        claim: Claim,
        /// Whether the record is a tick.
        tick: bool,
    },
    /// A record was delivered inside a transaction.
    Delivered {
        /// The task instance.
        at: TaskAt,
        /// The transaction it belongs to.
        txn: TxnRef,
        /// The tp.
        tp: Tp,
        /// The offset.
        offset: u64,
        /// Where each record it sent landed.
        sent: Vec<(Tp, u64)>,
    },
    /// The task was asked for a tick at `now`; `emitted` is where it went.
    TickChecked {
        /// The task instance.
        at: TaskAt,
        /// The transaction it belongs to.
        txn: TxnRef,
        /// The wall clock, milliseconds since the epoch.
        now: i64,
        /// Where the tick went, if one was emitted.
        emitted: Option<(Tp, u64)>,
    },
    /// A task's transaction committed.
    Committed {
        /// The task instance.
        at: TaskAt,
        /// The transaction it belongs to.
        txn: TxnRef,
        /// Where each changelog record the commit sent landed: one per slot
        /// the transaction changed (S5).
        sent: Vec<(Tp, u64)>,
    },
    /// A task's transaction aborted.
    Aborted {
        /// The task instance.
        at: TaskAt,
        /// The transaction it belongs to.
        txn: TxnRef,
        /// Why it aborted.
        cause: AbortCause,
    },
    /// The task stopped on bad input or failing logic (X5).
    TaskStopped {
        /// The task instance.
        at: TaskAt,
        /// The tp.
        tp: Tp,
        /// The offset.
        offset: u64,
        /// The task's error.
        error: String,
    },
    /// A zombie learned it was fenced and dropped the task (X4).
    Fenced {
        /// The task instance.
        at: TaskAt,
    },
    /// An instance crashed, losing its uncommitted work.
    Crashed {
        /// The application instance.
        instance: u32,
    },
    /// A crashed instance came back.
    Restarted {
        /// The application instance.
        instance: u32,
    },
    /// The task now belongs to `to`; the old owner is a zombie until fenced.
    Moved {
        /// The task.
        task: TaskId,
        /// The fetch position.
        from: u32,
        /// The new owner instance.
        to: u32,
    },
    /// Faults and inputs stop; the world must quiesce (I8).
    LivenessPhase,
    /// A starting task restored its slots through its local store (S6).
    StoreRestored {
        /// The task instance.
        at: TaskAt,
        /// The changelog offset it restored from.
        from: u64,
        /// Slot loads: the store's slots and the changelog records after it.
        loaded: usize,
        /// Why the store was cleared and rebuilt, if it was.
        rebuilt: Option<String>,
    },
    /// A crash damaged a task's directory on the instance's disk (S6).
    DiskFault {
        /// The application instance.
        instance: u32,
        /// The task.
        task: TaskId,
        /// What the crash did.
        fault: &'static str,
    },
    /// An interactive query of one key's slot was asked of an instance
    /// (Q1), and what it answered.
    Queried {
        /// The key's task, and the instance asked.
        at: TaskAt,
        /// The key's bytes.
        key: bytes::Bytes,
        /// The task's changelog partition.
        changelog: Tp,
        /// The slot's state answered (`None`: it holds none), or the
        /// refusal's name.
        answer: Result<Option<bytes::Bytes>, &'static str>,
    },
}

impl Event {
    /// The task instance the event happened on, if any.
    pub fn task_at(&self) -> Option<&TaskAt> {
        match self {
            Event::TaskStarted { at }
            | Event::Fetched { at, .. }
            | Event::Withheld { at }
            | Event::Held { at, .. }
            | Event::Delivered { at, .. }
            | Event::TickChecked { at, .. }
            | Event::Committed { at, .. }
            | Event::Aborted { at, .. }
            | Event::TaskStopped { at, .. }
            | Event::Fenced { at }
            | Event::StoreRestored { at, .. }
            | Event::Queried { at, .. } => Some(at),
            _ => None,
        }
    }

    /// Whether the event writes, delivers, holds or stops on the record at
    /// `offset` of `tp`, or holds another record on a claim on it.
    pub fn concerns(&self, tp: &Tp, offset: u64) -> bool {
        let is = |other: &Tp, other_offset: u64| other_offset == offset && other == tp;
        match self {
            Event::InputProduced {
                tp: other,
                offset: other_offset,
                ..
            }
            | Event::TaskStopped {
                tp: other,
                offset: other_offset,
                ..
            } => is(other, *other_offset),
            Event::Delivered {
                tp: other,
                offset: other_offset,
                sent,
                ..
            } => {
                is(other, *other_offset)
                    || sent
                        .iter()
                        .any(|(sent_tp, sent_offset)| is(sent_tp, *sent_offset))
            }
            Event::TickChecked {
                emitted: Some((other, other_offset)),
                ..
            } => is(other, *other_offset),
            Event::Committed { sent, .. } => sent
                .iter()
                .any(|(sent_tp, sent_offset)| is(sent_tp, *sent_offset)),
            Event::Held {
                tp: other,
                offset: other_offset,
                claim,
                ..
            } => is(other, *other_offset) || is(&claim.tp, claim.offset),
            _ => false,
        }
    }
}

/// How an input transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputOutcome {
    /// It committed.
    Committed,
    /// It was left open, to hang until the transaction timeout.
    Hanging,
}

/// Why a task's transaction aborted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AbortCause {
    /// A fault aborted the open transaction.
    Fault,
    /// The commit failed.
    CommitFailed,
    /// The task stopped on bad input or failing logic.
    Stopped,
    /// The producer was fenced by a newer instance.
    Fenced,
}

/// An event, the step that produced it and the wall clock at the time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The step of the run.
    pub step: u64,
    /// The wall clock, milliseconds since the epoch.
    pub now: i64,
    /// What happened.
    pub event: Event,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::InputProduced {
                tp,
                offset,
                transactional,
            } => {
                write!(
                    f,
                    "input {tp}@{offset}{}",
                    if *transactional {
                        " (in a transaction)"
                    } else {
                        ""
                    }
                )
            }
            Event::InputTransaction { id, outcome } => {
                write!(f, "input transaction {id} {outcome:?}")
            }
            Event::TransactionsExpired { ids } => {
                write!(f, "broker aborted timed-out transactions {ids:?}")
            }
            Event::ClockAdvanced { now } => write!(f, "clock -> {now}"),
            Event::TaskStarted { at } => write!(f, "{at} started"),
            Event::Fetched {
                at,
                tp,
                from,
                next,
                records,
                log_end,
                visible_end,
            } => {
                write!(
                    f,
                    "{at} fetched {records} from {tp}@{from} (next {next}, log end {log_end}"
                )?;
                if let Some(visible) = visible_end {
                    write!(f, ", visible end {visible}")?;
                }
                write!(f, ")")
            }
            Event::Withheld { at } => write!(f, "{at} was asked what to deliver: nothing yet (G9)"),
            Event::Held {
                at,
                tp,
                offset,
                claim,
                tick,
            } => {
                write!(
                    f,
                    "{at} holds {}{tp}@{offset} on {claim}",
                    if *tick { "tick " } else { "" }
                )
            }
            Event::Delivered {
                at,
                txn,
                tp,
                offset,
                sent,
            } => {
                write!(f, "{at} delivered {tp}@{offset} in {txn}")?;
                for (tp, offset) in sent {
                    write!(f, ", sent {tp}@{offset}")?;
                }
                Ok(())
            }
            Event::TickChecked {
                at,
                txn,
                now,
                emitted,
            } => match emitted {
                Some((tp, offset)) => write!(f, "{at} ticked at {now}: {tp}@{offset} in {txn}"),
                None => write!(f, "{at} checked for a tick at {now}: none due"),
            },
            Event::Committed { at, txn, sent } => {
                write!(f, "{at} committed {txn}")?;
                for (tp, offset) in sent {
                    write!(f, ", sent {tp}@{offset}")?;
                }
                Ok(())
            }
            Event::Aborted { at, txn, cause } => write!(f, "{at} aborted {txn} ({cause:?})"),
            Event::TaskStopped {
                at,
                tp,
                offset,
                error,
            } => write!(f, "{at} stopped at {tp}@{offset}: {error}"),
            Event::Fenced { at } => write!(f, "{at} was fenced"),
            Event::Crashed { instance } => write!(f, "instance {instance} crashed"),
            Event::Restarted { instance } => write!(f, "instance {instance} restarted"),
            Event::Moved { task, from, to } => {
                write!(f, "task {task} moved from instance {from} to {to}")
            }
            Event::LivenessPhase => write!(f, "faults and inputs off: liveness phase"),
            Event::StoreRestored {
                at,
                from,
                loaded,
                rebuilt,
            } => match rebuilt {
                Some(why) => write!(
                    f,
                    "{at} rebuilt its local store from the whole changelog ({why}): {loaded} loads"
                ),
                None => write!(
                    f,
                    "{at} restored its local store and the changelog from offset {from}: {loaded} loads"
                ),
            },
            Event::DiskFault {
                instance,
                task,
                fault,
            } => write!(f, "instance {instance}'s crash left task {task}'s directory with {fault}"),
            Event::Queried {
                at,
                key,
                answer,
                ..
            } => {
                let key = parsley::bytes_for_humans(key);
                match answer {
                    Ok(Some(value)) => write!(
                        f,
                        "{at} answered a query of key {key}: {}",
                        parsley::bytes_for_humans(value)
                    ),
                    Ok(None) => write!(f, "{at} answered a query of key {key}: no state"),
                    Err(refusal) => write!(f, "{at} refused a query of key {key}: {refusal}"),
                }
            }
        }
    }
}
