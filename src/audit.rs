//! The log-only causal audit: the simulator's causal checks, run over nothing
//! but what a `read_committed` consumer can read back from a cluster.
//!
//! The simulator's checker (`parsley_sim::sim::checker`) has the trace: it knows
//! which instance fetched and delivered what, in which order. An audit of a
//! real cluster has only the committed logs and the application's committed
//! group offsets. This module is the pure part of such an audit: it takes
//! [`CommittedLogs`] (read from the in-memory model by
//! `parsley_sim::audit::committed_logs`, or from a broker by
//! `parsley_live::read_committed`) and
//! returns an [`AuditReport`]. It does no I/O.
//!
//! # What the logs say
//!
//! * **Committed history of a task.** Task `(stage, p)` consumes partition `p`
//!   of each source that has one, and `p` of its tick topic (its *lanes*). The
//!   group's committed offset `c` of a lane is the task's committed position:
//!   the committed records of the lane below `c` (its *prefix*) were delivered
//!   exactly once in the committed history, in offset order (G3, X3), and none
//!   at or beyond `c` was. Only the interleaving of the lanes is not in the
//!   logs.
//! * **Outputs of a task.** Every record the task committed to a sink
//!   partition, and its changelog partition `<app>-<stage>-state-changelog-p`,
//!   which only it writes. A sink partition may hold records of several
//!   tasks (keyed emissions go by Kafka's murmur2 partitioner). A committed
//!   output is *attributed* to the tasks that may have written it: tasks of
//!   stages that sink into the topic whose lanes the output's stamp claims
//!   (G4, G5: an emission claims the record it was emitted for), and, for a
//!   keyless record, whose partition maps to the record's partition. When the
//!   stamp claims no such lane, every task the partitioning allows is a
//!   candidate (so that a stamp that lost its claims is reported as I5, not
//!   as an unexplained output).
//! * **Checkpoint.** The metadata of the committed offsets is the task's
//!   checkpoint (history stamp and last tick time, `crate::task::Checkpoint`).
//! * **Dead letters** (X5, docs/RULES.md#dead-letter). For a stage with the
//!   opt-in, task `(stage, p)` alone writes partition `p` of
//!   `<app>-<stage>-dlq`, in delivery order. A committed delivery whose
//!   record a committed dead letter there names (`parsley.dlq.topic`,
//!   `.partition`, `.offset`) is a *dead-lettered delivery*: its only effect
//!   is that dead letter.
//!
//! # Reconstruction
//!
//! For each task the audit searches for an interleaving of its lane prefixes
//! that
//!
//! 1. keeps each lane in offset order;
//! 2. respects the gate (G2): a record is delivered only when each of its
//!    claims on a lane is resolved, i.e. names an offset below the lane's
//!    position — the next undelivered record of the prefix, or the committed
//!    offset once the prefix is delivered; a claim on the record's own lane
//!    must be below the record;
//! 3. reproduces the committed outputs: replaying the stage's pure logic
//!    (`Stage::replay_record`, `Stage::replay_tick`, with the stage's own slot
//!    map, the tick slot apart; a timer service's ticks with
//!    `Stage::replay_tick_over_slots` over every key slot, K2) over the
//!    interleaving, each emission must be,
//!    in order, the next committed record the task wrote to the partition the
//!    emission goes to (same key and value bytes), with a stamp that
//!    dominates the task's history after the delivery (G5: the history, which
//!    includes the delivered record's stamp and a claim on it); and each slot
//!    change must be the next record of the task's changelog partition (slot
//!    key and value, a tombstone for a deletion; a timer service's tick
//!    changes several slots, in order). A dead-lettered delivery
//!    instead matches its dead letter, which must be the next one of the
//!    task's dead-letter partition, with a stamp that dominates the history
//!    after the delivery; it emits nothing, changes no slot (the fold goes
//!    on without it), and the logic must refuse it (or its stamp not decode)
//!    unless its dead letter is `skipped`. A skipped record goes whatever
//!    its claims, and the history merges its stamp only if the gate would
//!    have let it through (docs/RULES.md#skip);
//! 4. ends with every committed output of the task matched, every record of
//!    its changelog partition matched and every dead letter of its
//!    dead-letter partition matched.
//!
//! The search is a depth-first search over the deliverable heads, oldest
//! record timestamp first (the live runtime's order), with backtracking and
//! a memo of failed states (lane positions and output cursors determine the
//! state: slots are the fold of the matched changelog records). It is bounded
//! by [`AuditOptions::search_steps`]; a task whose search runs out of steps is
//! reported as a note in the summary (*inconclusive*), never as a violation.
//!
//! # What is reported
//!
//! An [`AuditViolation`] names the invariant, as the simulator's do. Since
//! logs have no steps, `step` is the number of deliveries of the task's
//! reconstructed committed history before the point of failure (the deepest
//! point the search reached) for reconstruction failures, and 0 for the
//! checks that do not depend on an interleaving.
//!
//! * **I1 (causal delivery).** No gate-respecting interleaving reproduces a
//!   task's outputs, but one that ignores the gate does: the report names the
//!   delivery that went before its claim. Also I1: the search is stuck with
//!   every remaining head held (a prefix record claims a lane offset the
//!   committed history never delivers, or heads claim each other); a record
//!   in a task's prefix whose stamp header does not decode (it was
//!   delivered, so the gate let a poison record through); and, for every
//!   record read, a claim on its own tp at or beyond itself, or a claim at or
//!   beyond its tp's log end (G6: a cause that was never appended).
//! * **I3 (no aborted reads).** A claim, in any committed record, that names
//!   an offset inside the log where no committed record is: an aborted record
//!   or a transaction marker (G6). Only a writer that saw an uncommitted
//!   record can have written it. A claim at or beyond where the
//!   `read_committed` read of its tp stopped (the last stable offset) while
//!   the log goes on: a *precommitted read*, since no `read_committed`
//!   consumer can have delivered a record inside or behind a transaction
//!   still open (run the audit once the application has stopped, or a later
//!   read of another tp may see outputs committed after this one was read).
//!   And, where commit order is known, a *causal inversion*: a committed
//!   record claiming a record that was committed after it.
//! * **I4 (tick durability and cadence).** A committed tick record that is
//!   not a tick (null key, 8-byte big-endian time equal to the record
//!   timestamp, T4); two committed ticks of one task less than the interval
//!   apart (T3: no burst, no tick committed twice); a checkpoint whose last
//!   tick time is not the time of the last committed tick of the task (T6:
//!   the tick time commits with the tick). Every committed tick in a task's
//!   prefix is delivered exactly once by construction of the prefix; its
//!   effects appearing once is the I6/I7 check.
//! * **I5 (stamp inheritance).** An output whose content matches the
//!   emission but whose stamp does not dominate the history (in particular
//!   the delivered record's stamp plus a claim on it), and likewise a dead
//!   letter; a record of the application (sink, tick or dead-letter record)
//!   whose stamp header does not decode; a checkpoint whose history is not
//!   exactly the merge of the stamps of the prefix records plus a claim on
//!   each (G4, G7: independent of the interleaving; with skipped records, at
//!   least that without their stamps and at most that with them), or whose
//!   lanes carry different checkpoints (X1).
//! * **I6 (state).** A slot change missing from the changelog, a changelog
//!   record that differs from the fold, a changelog record no committed
//!   delivery writes, or a committed delivery whose logic fails (in a stage
//!   without the dead-letter opt-in; with it, that is I10).
//! * **I7 (exactly-once outputs).** An emission of a committed delivery with
//!   no committed record (*lost*); a committed output no committed delivery
//!   emits (*extra*, or *duplicated* when it repeats an output matched
//!   before); an output whose stamp claims no lane of any task that writes to
//!   its topic.
//! * **I10 (dead letters).** Interleaving-independent, for every committed
//!   record of a task's dead-letter partition: one that does not read as a
//!   dead letter (`crate::DeadLetter::from_record`); one naming another
//!   stage; one naming a record that is not a committed delivery of the
//!   task (not in its prefix; an altered offset header shows up here); one
//!   whose key and value are not those of the record it names; a record
//!   named by two dead letters (*dead-lettered twice*). From the
//!   reconstruction: a committed delivery the logic refuses, or whose stamp
//!   does not decode, with no dead letter, in a stage with the opt-in
//!   (*record lost*); a dead letter, not `skipped`, for a record the logic
//!   accepts; dead letters out of delivery order. A dead letter whose stamp
//!   falls short of the history is I5. `skipped` dead letters are allowed
//!   (operators skip in real deployments; the simulator's checker, which
//!   knows nothing was skipped, rejects them): each must still name a
//!   committed delivery of the task, once. The claims of a skipped record
//!   are not checked (G6), since skipping is how an operator gets past a
//!   claim that can never resolve; and with the opt-in a prefix record whose
//!   stamp does not decode is not I1 but must be dead-lettered.
//! * **I2 (exactly-once, in order).** A committed group offset beyond its
//!   tp's log end.
//!
//! # What the logs cannot tell
//!
//! * Which instance did what, fetch ranges and what a task held: G5 is
//!   checked as "dominates the history", not as the exact "history merged
//!   with the held records' stamps", so an under-claim of held stamps
//!   (`StampingForgetsHeld`) is invisible, and so is over-claiming.
//! * The wall clock: a lost tick interval (a tick check that should have
//!   emitted) is not visible; only bursts and the checkpoint's tick time are.
//! * A record skipped by the committed position (I2) shows up only through
//!   its missing effects (I6, I7); a record whose delivery has no effect can
//!   be skipped unseen.
//! * Liveness (I8) and determinism (I9) need runs, not logs.
//! * Whether a `skipped` dead letter was really the operator's: the logs
//!   cannot tell a skip from a runtime that dead-lettered a record it should
//!   have delivered and labelled it `skipped`. Nor is the kind of a refusal
//!   (`logic`, `codec`, `state-codec`, `bad-stamp`) compared with why the
//!   replay refuses, nor the `parsley.dlq.message` and `.stamp` headers.
//! * Claims on tps that were not read, or below a tp's log start
//!   (retention, compaction), are counted as unverifiable.
//! * The order in which records became committed is not in a broker's
//!   logs; the model's is ([`CommittedLogs::insert_commit_order`]), and
//!   where it is known a *causal inversion* is checked too.
//! * The audit assumes sink topics are written only by the application;
//!   anything else written there is an unexplained output. Record timestamps
//!   are not compared (a topic may use log-append time).
//! * When several tasks may have written a record (stamps that carry claims
//!   across partitions, as the timer scheduler's do), tasks are matched one
//!   after another and take the first fitting record; a task never takes a
//!   record whose stamp does not dominate its own history, so a wrong pick
//!   needs two tasks emitting identical bytes to one partition with
//!   mutually dominating stamps.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use crate::app::StagePlan;
use crate::assembly::Assembly;
use crate::header::{self, STAMP_HEADER};
use crate::partitioner::partition_for;
use crate::record::ConsumedRecord;
use crate::stage::{Replayed, SlotChange, SlotKey};
use crate::task::{tick_of, Checkpoint, CommittedOffset, TaskId};
use crate::{App, Claim, DeadLetter, DeadLetterKind, Emission, Stamp, Tp};
use bytes::Bytes;

pub use crate::invariant::Invariant;

/// One broken guarantee the logs show: which invariant, where in the
/// task's reconstructed history, and what, naming the records involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditViolation {
    /// Which invariant.
    pub invariant: Invariant,
    /// Deliveries of the task's reconstructed committed history before the
    /// point of failure; 0 for checks that need no interleaving.
    pub step: u64,
    /// What happened, naming the records involved.
    pub message: String,
}

impl AuditViolation {
    fn new(invariant: Invariant, step: u64, message: String) -> AuditViolation {
        AuditViolation {
            invariant,
            step,
            message,
        }
    }
}

impl fmt::Display for AuditViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at step {}: {}",
            self.invariant, self.step, self.message
        )
    }
}

/// Where a read of one tp started and stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogBounds {
    /// The log start offset: claims below it name records that retention or
    /// compaction may have removed, and are not verifiable.
    pub start: u64,
    /// Where the `read_committed` read stopped: the last stable offset when
    /// it read to the end. Claims in `[read_until, end)` may name records of
    /// a transaction still open, and are not verifiable.
    pub read_until: u64,
    /// The log end offset (high watermark).
    pub end: u64,
}

/// What was read back: committed records only (`read_committed`), per tp, in
/// offset order, with where each read stopped, and each stage group's
/// committed offsets (whose metadata is the task checkpoint, X6).
#[derive(Clone, Debug, Default)]
pub struct CommittedLogs {
    records: BTreeMap<Tp, Vec<ConsumedRecord>>,
    bounds: BTreeMap<Tp, LogBounds>,
    committed: BTreeMap<(String, Tp), CommittedOffset>,
    /// Per tp, `(offset, sequence)` ascending by offset: the order in which
    /// committed records became committed, where it is known.
    commit_order: BTreeMap<Tp, Vec<(u64, u64)>>,
}

impl CommittedLogs {
    /// No logs yet.
    pub fn new() -> Self {
        CommittedLogs::default()
    }

    /// The committed records of `tp`, replacing any inserted before. They
    /// are sorted by offset. Without [`CommittedLogs::insert_bounds`] they
    /// are taken to be the whole log: start 0, read to the end, and the log
    /// end just past the last record.
    pub fn insert_records(&mut self, tp: Tp, mut records: Vec<ConsumedRecord>) {
        records.sort_by_key(|record| record.offset);
        self.records.insert(tp, records);
    }

    /// Records where the read of `tp` started and stopped.
    pub fn insert_bounds(&mut self, tp: Tp, bounds: LogBounds) {
        self.bounds.insert(tp, bounds);
    }

    /// The order in which the committed records of `tp` became committed:
    /// `(offset, sequence)` pairs whose sequences are comparable across every
    /// tp of one read (a plain record's append, a transactional record's
    /// commit). A broker's consumer cannot see it; the model knows it
    /// (`parsley_sim::audit::committed_logs`). Where both a record and a record it
    /// claims have one, the audit checks that the cause committed first.
    pub fn insert_commit_order(&mut self, tp: Tp, mut order: Vec<(u64, u64)>) {
        order.sort_unstable();
        self.commit_order.insert(tp, order);
    }

    /// When the committed record at `tp@offset` became committed, if known.
    pub fn commit_sequence(&self, tp: &Tp, offset: u64) -> Option<u64> {
        let order = self.commit_order.get(tp)?;
        let at = order
            .binary_search_by_key(&offset, |&(offset, _)| offset)
            .ok()?;
        Some(order[at].1)
    }

    /// The committed offset of consumer group `group` (a stage's, X6) on
    /// `tp`.
    pub fn insert_committed(&mut self, group: &str, tp: Tp, offset: CommittedOffset) {
        self.committed.insert((group.to_string(), tp), offset);
    }

    /// The tps read, in order.
    pub fn tps(&self) -> impl Iterator<Item = &Tp> {
        self.records.keys()
    }

    /// The committed records of `tp` (empty when it was not read).
    pub fn records(&self, tp: &Tp) -> &[ConsumedRecord] {
        self.records.get(tp).map_or(&[], Vec::as_slice)
    }

    /// The bounds of the read of `tp`, explicit or derived from its records;
    /// `None` when `tp` was not read.
    pub fn bounds(&self, tp: &Tp) -> Option<LogBounds> {
        if let Some(bounds) = self.bounds.get(tp) {
            return Some(*bounds);
        }
        let records = self.records.get(tp)?;
        let end = records.last().map_or(0, |record| record.offset + 1);
        Some(LogBounds {
            start: 0,
            read_until: end,
            end,
        })
    }

    /// The committed offset of consumer group `group` on `tp`.
    pub fn committed(&self, group: &str, tp: &Tp) -> Option<&CommittedOffset> {
        self.committed.get(&(group.to_string(), tp.clone()))
    }
}

/// Bounds of the audit's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditOptions {
    /// How many deliveries one task's search may try (over all its
    /// backtracking) before the task is reported inconclusive.
    pub search_steps: u64,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            search_steps: 2_000_000,
        }
    }
}

/// What the audit read and reconstructed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditSummary {
    /// Tps read.
    pub tps: usize,
    /// Committed records read.
    pub records: usize,
    /// Tasks of the application.
    pub tasks: usize,
    /// Tasks whose committed history was reconstructed (gate respected).
    pub tasks_reconstructed: usize,
    /// Committed deliveries: records below the committed offsets of every
    /// task's lanes.
    pub deliveries: usize,
    /// Committed records in sink partitions.
    pub outputs: usize,
    /// Outputs matched to an emission.
    pub outputs_matched: usize,
    /// Committed changelog records.
    pub changelog_records: usize,
    /// Changelog records matched to a fold.
    pub changelog_matched: usize,
    /// Committed tick records, and how many of them are in a task's
    /// committed history.
    pub ticks: usize,
    /// Ticks in a committed history.
    pub ticks_delivered: usize,
    /// Committed records on dead-letter topics (X5).
    pub dead_letters: usize,
    /// Dead letters matched to a committed delivery they stand in for.
    pub dead_letters_matched: usize,
    /// Of the dead letters, how many the operator skipped (`skipped`).
    pub dead_letters_skipped: usize,
    /// Claims found to name a committed record.
    pub claims_checked: usize,
    /// Claims on tps not read, or below a log start.
    pub claims_unverifiable: usize,
    /// Deliveries tried by the searches, backtracking included.
    pub search_steps: u64,
    /// Inconclusive tasks and other remarks; not violations.
    pub notes: Vec<String>,
}

/// The audit's findings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditReport {
    /// Every violation found; empty when the logs are consistent.
    pub violations: Vec<AuditViolation>,
    /// What was read and reconstructed.
    pub summary: AuditSummary,
}

impl AuditReport {
    /// Whether no invariant is violated (notes do not count).
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// The invariants reported, each once.
    pub fn invariants(&self) -> BTreeSet<Invariant> {
        self.violations
            .iter()
            .map(|violation| violation.invariant)
            .collect()
    }
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        if self.violations.is_empty() {
            write!(f, "audit clean: ")?;
        } else {
            writeln!(f, "audit found {} violation(s):", self.violations.len())?;
            for violation in &self.violations {
                writeln!(f, "  {}: {}", violation.invariant, violation.message)?;
            }
            write!(f, "read: ")?;
        }
        write!(
            f,
            "{} records on {} tps; {}/{} tasks reconstructed, {} committed deliveries; {}/{} outputs and {}/{} changelog records matched; {}/{} dead letters matched ({} skipped); {} ticks ({} delivered); {} claims checked, {} unverifiable",
            s.records,
            s.tps,
            s.tasks_reconstructed,
            s.tasks,
            s.deliveries,
            s.outputs_matched,
            s.outputs,
            s.changelog_matched,
            s.changelog_records,
            s.dead_letters_matched,
            s.dead_letters,
            s.dead_letters_skipped,
            s.ticks,
            s.ticks_delivered,
            s.claims_checked,
            s.claims_unverifiable
        )?;
        for note in &s.notes {
            write!(f, "\n  note: {note}")?;
        }
        Ok(())
    }
}

/// Audits `logs` with the default [`AuditOptions`]. `parsley_sim::audit`
/// reads the logs from the harness's in-memory model, and
/// `parsley_live::read_committed` from a cluster.
pub fn audit(app: &App, assembly: &Assembly, logs: &CommittedLogs) -> AuditReport {
    audit_with(app, assembly, logs, AuditOptions::default())
}

/// Audits `logs`: see the [module docs](self) for what is checked.
pub fn audit_with(
    app: &App,
    assembly: &Assembly,
    logs: &CommittedLogs,
    options: AuditOptions,
) -> AuditReport {
    let mut summary = AuditSummary::default();
    let index = build_index(logs, &mut summary);
    let mut auditor = Auditor {
        app,
        assembly,
        logs,
        options,
        index: &index,
        violations: Vec::new(),
        summary,
    };
    let tasks = auditor.tasks();
    auditor.summary.tasks = tasks.len();
    let dead = auditor.check_dead_letters(&tasks);
    let skipped: HashSet<(Tp, u64)> = tasks
        .iter()
        .zip(&dead)
        .filter_map(|(task, dead)| Some((task, dead.as_ref()?)))
        .flat_map(|(task, dead)| {
            dead.by_source
                .iter()
                .filter(|(_, &entry)| dead.entries[entry].1 == DeadLetterKind::Skipped)
                .map(|(&(lane, offset), _)| (task.lanes[lane].tp.clone(), offset))
        })
        .collect();
    auditor.check_claims(&skipped);
    auditor.check_ticks();
    for (task, dead) in tasks.iter().zip(&dead) {
        auditor.check_checkpoint(task, dead.as_ref());
    }
    auditor.reconstruct(&tasks, &dead);
    AuditReport {
        violations: auditor.violations,
        summary: auditor.summary,
    }
}

// ----- internals -----

/// One tp as read, with its records' stamps decoded.
struct Log<'a> {
    tp: Tp,
    records: &'a [ConsumedRecord],
    stamps: Vec<Result<Stamp, String>>,
    bounds: LogBounds,
}

impl Log<'_> {
    fn index_of(&self, offset: u64) -> Option<usize> {
        self.records
            .binary_search_by_key(&offset, |record| record.offset)
            .ok()
    }

    /// The stamp of record `index`, empty when it does not decode (that is
    /// reported on its own).
    fn stamp(&self, index: usize) -> &Stamp {
        static EMPTY: std::sync::OnceLock<Stamp> = std::sync::OnceLock::new();
        match &self.stamps[index] {
            Ok(stamp) => stamp,
            Err(_) => EMPTY.get_or_init(Stamp::empty),
        }
    }
}

/// A consumed tp of a task and its committed prefix.
struct Lane<'a> {
    tp: Tp,
    tick: bool,
    log: &'a Log<'a>,
    /// Records of the prefix: `log.records[..len]`.
    len: usize,
    committed: u64,
}

/// A sink partition a task may have written, with the records it may have
/// written there: (index in the log, whether the task is the only
/// candidate).
struct Out<'a> {
    log: &'a Log<'a>,
    entries: Vec<(usize, bool)>,
}

/// A task's partition of its stage's dead-letter topic (X5), with the dead
/// letters there that name a record of the task's committed prefix.
struct DeadLetters<'a> {
    /// `None` when the partition was not read.
    log: Option<&'a Log<'a>>,
    /// The dead letters the task's committed deliveries must have written,
    /// in offset order (so in delivery order): index in `log`, and kind.
    entries: Vec<(usize, DeadLetterKind)>,
    /// `(lane, offset)` of the record each entry names, to the entry.
    by_source: HashMap<(usize, u64), usize>,
}

impl DeadLetters<'_> {
    /// The entry that dead-letters `offset` of `lane`, if any.
    fn entry(&self, lane: usize, offset: u64) -> Option<usize> {
        self.by_source.get(&(lane, offset)).copied()
    }

    /// Whether the operator skipped `offset` of `lane`: it goes whatever
    /// its claims (docs/RULES.md#skip).
    fn skips(&self, lane: usize, offset: u64) -> bool {
        self.entry(lane, offset)
            .is_some_and(|entry| self.entries[entry].1 == DeadLetterKind::Skipped)
    }

    fn record(&self, entry: usize) -> (&Log<'_>, &ConsumedRecord) {
        let log = self.log.expect("entries come from a read partition");
        (log, &log.records[self.entries[entry].0])
    }
}

struct TaskPlan<'a> {
    id: TaskId,
    plan: &'a StagePlan,
    lanes: Vec<Lane<'a>>,
    /// Set by [`Auditor::tasks`] when the task cannot be reconstructed.
    unreadable: Option<String>,
}

/// The search's state after some deliveries.
#[derive(Clone)]
struct Node {
    pos: Vec<usize>,
    out: Vec<usize>,
    changelog: usize,
    /// Dead letters matched: the next entry of the task's [`DeadLetters`].
    dead: usize,
    slots: BTreeMap<SlotKey, Bytes>,
    history: Stamp,
}

impl Node {
    fn key(&self) -> Vec<usize> {
        let mut key = self.pos.clone();
        key.extend(&self.out);
        key.push(self.changelog);
        key.push(self.dead);
        key
    }
}

struct Frame {
    node: Node,
    choices: Vec<usize>,
    next: usize,
    /// The lane delivered to reach this node, and the outputs it matched.
    via: Option<(usize, Vec<(usize, usize)>)>,
}

struct Failure {
    invariant: Invariant,
    message: String,
}

enum Search {
    Found {
        /// Lanes in delivery order.
        path: Vec<usize>,
        /// Matched outputs: (out, entry).
        matched: Vec<(usize, usize)>,
        changelog: usize,
        dead: usize,
    },
    Failed {
        best: Option<(usize, Failure)>,
    },
    Exhausted,
}

/// Everything one task's search looks at.
struct Ctx<'a, 'b> {
    task: &'b TaskPlan<'a>,
    outs: Vec<Out<'a>>,
    changelog: Option<&'a Log<'a>>,
    /// The task's dead letters, when its stage has the opt-in (X5).
    dead: Option<&'b DeadLetters<'a>>,
    /// Outputs matched by tasks searched before.
    taken: &'b HashSet<(Tp, u64)>,
    gate: bool,
    assembly: &'b Assembly,
}

struct Auditor<'a> {
    app: &'a App,
    assembly: &'a Assembly,
    logs: &'a CommittedLogs,
    options: AuditOptions,
    index: &'a BTreeMap<Tp, Log<'a>>,
    violations: Vec<AuditViolation>,
    summary: AuditSummary,
}

fn describe_record(record: &ConsumedRecord) -> String {
    let render = |bytes: Option<&Bytes>| {
        bytes.map_or("null".to_string(), |bytes| {
            match std::str::from_utf8(bytes) {
                Ok(text) if !text.chars().any(char::is_control) => text.to_string(),
                _ => format!(
                    "0x{}",
                    bytes
                        .iter()
                        .map(|byte| format!("{byte:02x}"))
                        .collect::<String>()
                ),
            }
        })
    };
    format!(
        "({}, {})",
        render(record.data.key.as_ref()),
        render(record.data.value.as_ref())
    )
}

fn same_content(record: &ConsumedRecord, emission: &Emission) -> bool {
    match emission.encoded() {
        Ok((key, value)) => {
            record.data.key.as_ref() == key && record.data.value.as_ref() == Some(value)
        }
        Err(_) => false,
    }
}

/// A claim that names no committed record: the invariant, why, and the
/// records that make it.
type BadClaim = (Invariant, String, Vec<(Tp, u64)>);

/// Every tp read, with its records' stamps decoded.
fn build_index<'a>(logs: &'a CommittedLogs, summary: &mut AuditSummary) -> BTreeMap<Tp, Log<'a>> {
    let mut index = BTreeMap::new();
    for (tp, records) in &logs.records {
        let stamps = records
            .iter()
            .map(|record| match record.data.header(STAMP_HEADER) {
                Some(bytes) => header::decode(bytes).map_err(|error| error.to_string()),
                None => Ok(Stamp::empty()),
            })
            .collect();
        summary.tps += 1;
        summary.records += records.len();
        let bounds = logs.bounds(tp).expect("a read tp has bounds");
        index.insert(
            tp.clone(),
            Log {
                tp: tp.clone(),
                records,
                stamps,
                bounds,
            },
        );
    }
    index
}

impl<'a> Auditor<'a> {
    fn violation(&mut self, invariant: Invariant, step: u64, message: String) {
        self.violations
            .push(AuditViolation::new(invariant, step, message));
    }

    fn is_written_by_app(&self, tp: &Tp) -> bool {
        self.app.stages().iter().any(|plan| {
            plan.tick_topic.as_ref() == Some(&tp.topic)
                || plan.dead_letter.as_ref() == Some(&tp.topic)
                || plan.stage.sinks().iter().any(|sink| sink.name == tp.topic)
        })
    }

    /// G6 over every record read: each claim names a committed record. The
    /// claims of a record the operator skipped are not checked: a skip is
    /// how an operator gets past a claim that can never resolve
    /// (docs/RULES.md#skip).
    fn check_claims(&mut self, skipped: &HashSet<(Tp, u64)>) {
        // Bad claims, grouped so that one missing record is reported once.
        let mut bad: BTreeMap<Claim, BadClaim> = BTreeMap::new();
        let mut undecodable = Vec::new();
        for log in self.index.values() {
            for (index, record) in log.records.iter().enumerate() {
                if skipped.contains(&(log.tp.clone(), record.offset)) {
                    continue;
                }
                let stamp = match &log.stamps[index] {
                    Ok(stamp) => stamp,
                    Err(error) => {
                        if self.is_written_by_app(&log.tp) {
                            undecodable.push(format!(
                                "{}@{} was written by the application, but its stamp header does not decode: {error}",
                                log.tp, record.offset
                            ));
                        }
                        continue;
                    }
                };
                for claim in stamp.claims() {
                    let claimant = (log.tp.clone(), record.offset);
                    if claim.tp == log.tp && claim.offset >= record.offset {
                        bad.entry(claim.clone())
                            .or_insert_with(|| {
                                (
                                    Invariant::I1,
                                    format!("a claim on its own tp at or beyond itself (G6): {claim} can never be delivered before it"),
                                    Vec::new(),
                                )
                            })
                            .2
                            .push(claimant);
                        continue;
                    }
                    let Some(claimed) = self.index.get(&claim.tp) else {
                        self.summary.claims_unverifiable += 1;
                        continue;
                    };
                    if claimed.index_of(claim.offset).is_some() {
                        self.summary.claims_checked += 1;
                        let claimant_at = self.logs.commit_sequence(&log.tp, record.offset);
                        let claimed_at = self.logs.commit_sequence(&claim.tp, claim.offset);
                        if let (Some(claimant_at), Some(claimed_at)) = (claimant_at, claimed_at) {
                            if claimed_at > claimant_at {
                                bad.entry(claim.clone())
                                    .or_insert_with(|| {
                                        (
                                            Invariant::I3,
                                            format!("causal inversion: {claim} was committed after the record that claims it; its writer must have read it before it was committed"),
                                            Vec::new(),
                                        )
                                    })
                                    .2
                                    .push(claimant);
                            }
                        }
                        continue;
                    }
                    let bounds = claimed.bounds;
                    let finding = if claim.offset < bounds.start {
                        None
                    } else if claim.offset >= bounds.end {
                        Some((
                            Invariant::I1,
                            format!(
                                "{claim} lies at or beyond the log end {} of {}: a cause that was never appended (G6)",
                                bounds.end, claim.tp
                            ),
                        ))
                    } else if claim.offset >= bounds.read_until {
                        Some((
                            Invariant::I3,
                            format!(
                                "precommitted read: {claim} lies at or beyond the last stable offset {} of {}, inside or behind a transaction still open, which no read_committed consumer can have delivered",
                                bounds.read_until, claim.tp
                            ),
                        ))
                    } else {
                        Some((
                            Invariant::I3,
                            format!(
                                "{claim} names no committed record: an aborted record or a transaction marker (G6)"
                            ),
                        ))
                    };
                    match finding {
                        None => self.summary.claims_unverifiable += 1,
                        Some((invariant, message)) => bad
                            .entry(claim.clone())
                            .or_insert_with(|| (invariant, message, Vec::new()))
                            .2
                            .push(claimant),
                    }
                }
            }
        }
        for message in undecodable {
            self.violation(Invariant::I5, 0, message);
        }
        for (claim, (invariant, message, claimants)) in bad {
            let (tp, offset) = &claimants[0];
            let more = match claimants.len() {
                1 => String::new(),
                n => format!(" ({} more records claim it)", n - 1),
            };
            self.violation(
                invariant,
                0,
                format!("{tp}@{offset} claims {claim}: {message}{more}"),
            );
        }
    }

    /// T3, T4, I4: the committed tick records of every task.
    fn check_ticks(&mut self) {
        let mut findings = Vec::new();
        for plan in self.app.stages() {
            let (Some(topic), Some(decl)) = (&plan.tick_topic, plan.stage.ticks()) else {
                continue;
            };
            let interval = i64::try_from(decl.interval.as_millis()).unwrap_or(i64::MAX);
            let partitions = self.assembly.partitions_of(topic.as_str()).unwrap_or(0);
            for partition in 0..partitions {
                let Some(log) = self.index.get(&Tp::new(topic.clone(), partition)) else {
                    continue;
                };
                self.summary.ticks += log.records.len();
                let mut last: Option<(u64, i64)> = None;
                for record in log.records {
                    let tp = &log.tp;
                    let time = tick_of(record).map(|tick| tick.timestamp);
                    if record.data.key.is_some() || time != Some(record.data.timestamp) {
                        findings.push(format!(
                            "{tp}@{} is not a tick record (T4: null key, value the 8-byte big-endian time equal to the record timestamp): key {:?}, timestamp {}, value time {time:?}",
                            record.offset, record.data.key, record.data.timestamp
                        ));
                        continue;
                    }
                    let time = record.data.timestamp;
                    if let Some((before, at)) = last {
                        if time.saturating_sub(at) < interval {
                            findings.push(format!(
                                "{tp}@{before} (at {at}) and {tp}@{} (at {time}) are committed ticks only {} ms apart, interval {interval} ms (T3: one tick per firing; T6: a tick committed once)",
                                record.offset,
                                time.saturating_sub(at)
                            ));
                        }
                    }
                    last = Some((record.offset, time));
                }
            }
        }
        for message in findings {
            self.violation(Invariant::I4, 0, message);
        }
    }

    /// Every task of the assembly with its lanes and committed prefixes.
    fn tasks(&mut self) -> Vec<TaskPlan<'a>> {
        let index = self.index;
        let mut tasks = Vec::new();
        for (stage, count) in &self.assembly.tasks {
            let Some(plan) = self.app.stage(stage) else {
                continue;
            };
            for partition in 0..*count {
                let id = TaskId {
                    stage: stage.as_str().into(),
                    partition,
                };
                let mut lanes = Vec::new();
                let mut unreadable = None;
                for topic in plan.consumed_topics() {
                    let count = self.assembly.partitions_of(topic.as_str()).unwrap_or(0);
                    if partition >= count {
                        continue;
                    }
                    let tp = Tp::new(topic.clone(), partition);
                    let committed = self
                        .logs
                        .committed(&plan.group, &tp)
                        .map_or(0, |offset| offset.offset);
                    let Some(log) = index.get(&tp) else {
                        if committed > 0 {
                            unreadable = Some(format!("{tp} was not read"));
                        }
                        continue;
                    };
                    if committed > log.bounds.end {
                        self.violations.push(AuditViolation::new(
                            Invariant::I2,
                            0,
                            format!(
                                "task {id}: the committed offset {committed} of {tp} lies beyond its log end {}",
                                log.bounds.end
                            ),
                        ));
                        unreadable = Some(format!(
                            "its committed offset on {tp} is beyond the log end"
                        ));
                    } else if committed > log.bounds.read_until {
                        unreadable = Some(format!(
                            "its committed offset {committed} on {tp} lies beyond where the read stopped ({}, an open transaction)",
                            log.bounds.read_until
                        ));
                    }
                    let len = log
                        .records
                        .partition_point(|record| record.offset < committed);
                    lanes.push(Lane {
                        tick: plan.tick_topic.as_ref() == Some(&topic),
                        tp,
                        log,
                        len,
                        committed,
                    });
                }
                tasks.push(TaskPlan {
                    id,
                    plan,
                    lanes,
                    unreadable,
                });
            }
        }
        tasks
    }

    /// G4, G7, T6: the committed checkpoint against the committed prefix and
    /// the committed ticks; I1 for prefix records whose stamps do not decode.
    ///
    /// With the dead-letter opt-in a prefix record whose stamp does not
    /// decode is not I1: the task dead-letters it (`bad-stamp`), which the
    /// reconstruction checks. A record the operator skipped is claimed by
    /// the history, but its stamp merged only if the gate let it through
    /// (docs/RULES.md#skip), which depends on the interleaving: the
    /// checkpoint must lie between the two.
    fn check_checkpoint(&mut self, task: &TaskPlan<'a>, dead: Option<&DeadLetters<'a>>) {
        let id = &task.id;
        let mut expected = Stamp::empty();
        let mut skipped_stamps = Stamp::empty();
        let mut skips = 0;
        for (lane_index, lane) in task.lanes.iter().enumerate() {
            for index in 0..lane.len {
                let record = &lane.log.records[index];
                if dead.is_some_and(|dead| dead.skips(lane_index, record.offset)) {
                    skipped_stamps.merge(lane.log.stamp(index));
                    expected.claim(&lane.tp, record.offset);
                    skips += 1;
                    continue;
                }
                if let Err(error) = &lane.log.stamps[index] {
                    if dead.is_some() {
                        expected.claim(&lane.tp, record.offset);
                        continue;
                    }
                    self.violation(
                        Invariant::I1,
                        0,
                        format!(
                            "task {id} delivered {}@{} in its committed history, but its stamp header does not decode ({error}): the gate must hold it as poison",
                            lane.tp, record.offset
                        ),
                    );
                }
                expected.merge(lane.log.stamp(index));
                expected.claim(&lane.tp, record.offset);
            }
            self.summary.deliveries += lane.len;
            if lane.tick {
                self.summary.ticks_delivered += lane.len;
            }
        }
        let committed: Vec<(&Tp, &CommittedOffset)> = task
            .lanes
            .iter()
            .filter_map(|lane| Some((&lane.tp, self.logs.committed(&task.plan.group, &lane.tp)?)))
            .collect();
        let mut checkpoint = Checkpoint {
            history: Stamp::empty(),
            last_tick_at: None,
        };
        if let Some((first_tp, first)) = committed.first() {
            for (tp, offset) in &committed[1..] {
                if offset.metadata != first.metadata {
                    self.violation(
                        Invariant::I5,
                        0,
                        format!("task {id}: the committed offsets of {first_tp} and {tp} carry different checkpoints (X1, docs/RULES.md#x1: one transaction commits every lane with one checkpoint)"),
                    );
                    break;
                }
            }
            match Checkpoint::decode(&first.metadata) {
                Ok(decoded) => checkpoint = decoded,
                Err(error) => {
                    self.violation(
                        Invariant::I5,
                        0,
                        format!("task {id}: the committed offset of {first_tp} carries no checkpoint (G7): {error}"),
                    );
                    return;
                }
            }
        }
        let upper = expected.merged(&skipped_stamps);
        if skips == 0 && checkpoint.history != expected {
            self.violation(
                Invariant::I5,
                0,
                format!(
                    "task {id}: the committed history {} is not the merge of the stamps of its committed deliveries plus a claim on each, {expected} (G4, G7)",
                    checkpoint.history
                ),
            );
        } else if skips > 0
            && !(checkpoint.history.dominates(&expected) && upper.dominates(&checkpoint.history))
        {
            self.violation(
                Invariant::I5,
                0,
                format!(
                    "task {id}: the committed history {} is not the merge of the stamps of its committed deliveries plus a claim on each, {expected}, with at most the stamps of its {skips} skipped records, {upper} (G4, G7)",
                    checkpoint.history
                ),
            );
        }
        if let Some(tick_lane) = task.lanes.iter().find(|lane| lane.tick) {
            let last = tick_lane
                .log
                .records
                .iter()
                .rev()
                .find_map(|record| tick_of(record).map(|tick| (record.offset, tick.timestamp)));
            if checkpoint.last_tick_at != last.map(|(_, time)| time) {
                let committed_tick = match last {
                    Some((offset, time)) => format!("{}@{offset} at {time}", tick_lane.tp),
                    None => "none".to_string(),
                };
                self.violation(
                    Invariant::I4,
                    0,
                    format!(
                        "task {id}: the committed tick time is {:?}, but the last committed tick is {committed_tick} (T6: the tick time commits with its tick)",
                        checkpoint.last_tick_at
                    ),
                );
            }
        }
    }

    /// I10 over every committed record of every task's partition of its
    /// stage's dead-letter topic (X5), independent of the interleaving: it
    /// reads as a dead letter (`crate::DeadLetter::from_record`), names the
    /// stage, names a record of the task's committed prefix (a committed
    /// delivery), holds that record's key and value, and no other committed
    /// dead letter names the same record. Returns, per task (`None` without
    /// the opt-in), the dead letters that name a committed delivery, for the
    /// reconstruction to match; a dead letter that names none is reported
    /// here and not matched.
    fn check_dead_letters(&mut self, tasks: &[TaskPlan<'a>]) -> Vec<Option<DeadLetters<'a>>> {
        let index = self.index;
        let mut all = Vec::with_capacity(tasks.len());
        // Per stage, the record each dead letter names, to the first dead
        // letter naming it.
        let mut named: BTreeMap<(&str, Tp, u64), (Tp, u64)> = BTreeMap::new();
        for task in tasks {
            let Some(topic) = &task.plan.dead_letter else {
                all.push(None);
                continue;
            };
            let id = &task.id;
            let tp = Tp::new(topic.clone(), id.partition);
            let log = index.get(&tp);
            let mut dead = DeadLetters {
                log,
                entries: Vec::new(),
                by_source: HashMap::new(),
            };
            for (record_index, record) in log.map_or(&[][..], |log| log.records).iter().enumerate()
            {
                self.summary.dead_letters += 1;
                let at = format!("{tp}@{}", record.offset);
                let letter = match DeadLetter::from_record(&record.data) {
                    Ok(letter) => letter,
                    Err(error) => {
                        self.violation(
                            Invariant::I10,
                            0,
                            format!(
                                "{at} on dead-letter topic {topic} is not a dead letter: {error}"
                            ),
                        );
                        continue;
                    }
                };
                if letter.kind == DeadLetterKind::Skipped {
                    self.summary.dead_letters_skipped += 1;
                }
                let source = format!("{}@{}", letter.tp, letter.offset);
                if let Some((first_tp, first)) = named.insert(
                    (&*id.stage, letter.tp.clone(), letter.offset),
                    (tp.clone(), record.offset),
                ) {
                    self.violation(
                        Invariant::I10,
                        0,
                        format!("{source} is dead-lettered twice in the committed logs: at {first_tp}@{first} and {at}"),
                    );
                    continue;
                }
                if *letter.stage != *id.stage {
                    self.violation(
                        Invariant::I10,
                        0,
                        format!(
                            "{at}, the dead letter of {source}, names stage {:?}, but {topic} is stage {:?}'s",
                            letter.stage, id.stage
                        ),
                    );
                }
                let delivered = task
                    .lanes
                    .iter()
                    .position(|lane| lane.tp == letter.tp)
                    .and_then(|lane| {
                        let at = task.lanes[lane].log.index_of(letter.offset)?;
                        (at < task.lanes[lane].len).then_some((lane, at))
                    });
                let Some((lane, named_index)) = delivered else {
                    if task.unreadable.is_none() {
                        self.violation(
                            Invariant::I10,
                            0,
                            format!(
                                "{at} ({}) dead-letters {source}, which is not a committed delivery of task {id} (task {id} writes {tp}; it consumes {})",
                                letter.kind,
                                task.lanes
                                    .iter()
                                    .map(|lane| format!("{} below {}", lane.tp, lane.committed))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        );
                    }
                    continue;
                };
                let original = &task.lanes[lane].log.records[named_index];
                if original.data.key != record.data.key || original.data.value != record.data.value
                {
                    self.violation(
                        Invariant::I10,
                        0,
                        format!(
                            "{at} {}, the dead letter of {source}, does not hold that record's key and value {}",
                            describe_record(record),
                            describe_record(original)
                        ),
                    );
                }
                dead.by_source
                    .insert((lane, letter.offset), dead.entries.len());
                dead.entries.push((record_index, letter.kind));
            }
            all.push(Some(dead));
        }
        all
    }

    /// The tasks that may have written each record of each sink partition.
    fn attribute(&self, tasks: &[TaskPlan<'a>]) -> BTreeMap<(Tp, usize), Vec<usize>> {
        let mut candidates = BTreeMap::new();
        let mut sinks: BTreeSet<&crate::TopicName> = BTreeSet::new();
        for plan in self.app.stages() {
            for sink in plan.stage.sinks() {
                sinks.insert(&sink.name);
            }
        }
        for topic in sinks {
            let partitions = self.assembly.partitions_of(topic.as_str()).unwrap_or(0);
            let writers: Vec<usize> = tasks
                .iter()
                .enumerate()
                .filter(|(_, task)| {
                    task.plan
                        .stage
                        .sinks()
                        .iter()
                        .any(|sink| sink.name == *topic)
                })
                .map(|(index, _)| index)
                .collect();
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                let Some(log) = self.index.get(&tp) else {
                    continue;
                };
                for (index, record) in log.records.iter().enumerate() {
                    let placed: Vec<usize> = writers
                        .iter()
                        .copied()
                        .filter(|&writer| {
                            record.data.key.is_some()
                                || tasks[writer].id.partition % partitions == partition
                        })
                        .collect();
                    let stamp = log.stamp(index);
                    let claimed: Vec<usize> = placed
                        .iter()
                        .copied()
                        .filter(|&writer| {
                            tasks[writer]
                                .lanes
                                .iter()
                                .any(|lane| stamp.offset(&lane.tp).is_some())
                        })
                        .collect();
                    let chosen = if claimed.is_empty() { placed } else { claimed };
                    candidates.insert((tp.clone(), index), chosen);
                }
            }
        }
        candidates
    }

    fn reconstruct(&mut self, tasks: &[TaskPlan<'a>], dead: &[Option<DeadLetters<'a>>]) {
        let index = self.index;
        let candidates = self.attribute(tasks);
        self.summary.outputs = candidates.len();
        let mut taken: HashSet<(Tp, u64)> = HashSet::new();
        // Outputs of tasks that could not be reconstructed: not reported again.
        let mut excused: HashSet<usize> = HashSet::new();
        for (task_index, task) in tasks.iter().enumerate() {
            let id = &task.id;
            if let Some(reason) = &task.unreadable {
                self.summary
                    .notes
                    .push(format!("task {id} was not reconstructed: {reason}"));
                excused.insert(task_index);
                continue;
            }
            let mut outs: Vec<Out<'a>> = Vec::new();
            for ((tp, record), writers) in &candidates {
                if !writers.contains(&task_index) {
                    continue;
                }
                let log = &index[tp];
                let sole = writers.len() == 1;
                match outs.iter_mut().find(|out| out.log.tp == *tp) {
                    Some(out) => out.entries.push((*record, sole)),
                    None => outs.push(Out {
                        log,
                        entries: vec![(*record, sole)],
                    }),
                }
            }
            // Every sink partition the task may emit to has an out, even
            // with no records: an emission there is then lost.
            for sink in task.plan.stage.sinks() {
                for partition in 0..self.assembly.partitions_of(sink.name.as_str()).unwrap_or(0) {
                    let tp = Tp::new(sink.name.clone(), partition);
                    if let Some(log) = index.get(&tp) {
                        if !outs.iter().any(|out| out.log.tp == tp) {
                            outs.push(Out {
                                log,
                                entries: Vec::new(),
                            });
                        }
                    }
                }
            }
            let changelog = task
                .plan
                .changelog
                .as_ref()
                .and_then(|topic| index.get(&Tp::new(topic.clone(), id.partition)));
            if task.plan.changelog.is_some() && changelog.is_none() {
                self.summary.notes.push(format!(
                    "task {id} was not reconstructed: its changelog partition was not read"
                ));
                excused.insert(task_index);
                continue;
            }
            let dead = dead[task_index].as_ref();
            if dead.is_some_and(|dead| dead.log.is_none()) {
                self.summary.notes.push(format!(
                    "task {id} was not reconstructed: its dead-letter partition was not read"
                ));
                excused.insert(task_index);
                continue;
            }
            self.summary.changelog_records += changelog.map_or(0, |log| log.records.len());
            let mut ctx = Ctx {
                task,
                outs,
                changelog,
                dead,
                taken: &taken,
                gate: true,
                assembly: self.assembly,
            };
            let gated = self.search(&ctx);
            let found = match gated {
                Search::Found {
                    path,
                    matched,
                    changelog,
                    dead,
                } => {
                    debug_assert_eq!(
                        path.len(),
                        task.lanes.iter().map(|lane| lane.len).sum::<usize>()
                    );
                    self.summary.tasks_reconstructed += 1;
                    Some((matched, changelog, dead))
                }
                Search::Exhausted => {
                    self.summary.notes.push(format!(
                        "task {id}: inconclusive, the search for an interleaving of its committed deliveries ran out of {} steps",
                        self.options.search_steps
                    ));
                    excused.insert(task_index);
                    None
                }
                Search::Failed { best } => {
                    ctx.gate = false;
                    match self.search(&ctx) {
                        Search::Found {
                            path,
                            matched,
                            changelog,
                            dead,
                        } => {
                            let (step, message) = self.gate_breach(task, ctx.dead, &path);
                            self.violation(Invariant::I1, step, message);
                            Some((matched, changelog, dead))
                        }
                        _ => {
                            let (depth, failure) = best.unwrap_or((
                                0,
                                Failure {
                                    invariant: Invariant::I1,
                                    message: format!(
                                        "task {id}: no interleaving of its committed deliveries reproduces its committed outputs"
                                    ),
                                },
                            ));
                            self.violation(failure.invariant, depth as u64, failure.message);
                            excused.insert(task_index);
                            None
                        }
                    }
                }
            };
            if let Some((matched, changelog, dead)) = found {
                self.summary.outputs_matched += matched.len();
                self.summary.changelog_matched += changelog;
                self.summary.dead_letters_matched += dead;
                let matched: Vec<(Tp, u64)> = matched
                    .into_iter()
                    .map(|(out, entry)| {
                        let out = &ctx.outs[out];
                        let record = &out.log.records[out.entries[entry].0];
                        (out.log.tp.clone(), record.offset)
                    })
                    .collect();
                drop(ctx);
                taken.extend(matched);
            }
        }
        // Outputs no task's committed deliveries account for.
        for ((tp, record_index), writers) in &candidates {
            let log = &index[tp];
            let record = &log.records[*record_index];
            if taken.contains(&(tp.clone(), record.offset)) {
                continue;
            }
            if writers.is_empty() {
                self.violation(
                    Invariant::I7,
                    0,
                    format!(
                        "{tp}@{} {} is committed, but no task of a stage that writes to {} emits to that partition (stamp {})",
                        record.offset,
                        describe_record(record),
                        tp.topic,
                        log.stamp(*record_index)
                    ),
                );
                continue;
            }
            if writers.iter().any(|writer| excused.contains(writer)) {
                continue;
            }
            let names: Vec<String> = writers
                .iter()
                .map(|writer| tasks[*writer].id.to_string())
                .collect();
            self.violation(
                Invariant::I7,
                0,
                format!(
                    "{tp}@{} {} is committed, but no committed delivery of {} emits it",
                    record.offset,
                    describe_record(record),
                    names.join(", ")
                ),
            );
        }
    }

    /// The first delivery of `path` that the gate would have held.
    fn gate_breach(
        &self,
        task: &TaskPlan<'a>,
        dead: Option<&DeadLetters<'a>>,
        path: &[usize],
    ) -> (u64, String) {
        let mut pos = vec![0; task.lanes.len()];
        for (step, &lane) in path.iter().enumerate() {
            let offset = task.lanes[lane].log.records[pos[lane]].offset;
            if dead.is_some_and(|dead| dead.skips(lane, offset)) {
                pos[lane] += 1;
                continue;
            }
            if let Some((claim, position)) = blocker(task, &pos, lane) {
                let record = &task.lanes[lane].log.records[pos[lane]];
                let never = if claim.offset >= task_threshold_end(task, &claim.tp) {
                    ", and its committed history never delivers it"
                } else {
                    ""
                };
                return (
                    step as u64,
                    format!(
                        "task {}: no interleaving of its committed deliveries that respects the gate (G2) reproduces its committed outputs and state; they are reproduced only by delivering {}@{} (stamp {}) before its claim {claim} was delivered (position of {} was {position}){never}",
                        task.id,
                        task.lanes[lane].tp,
                        record.offset,
                        task.lanes[lane].log.stamp(pos[lane]),
                        claim.tp
                    ),
                );
            }
            pos[lane] += 1;
        }
        (
            0,
            format!(
                "task {}: its committed outputs are reproduced only by an interleaving the gate allows too, yet none was found",
                task.id
            ),
        )
    }

    /// Depth-first search for an interleaving of `ctx.task`'s prefixes that
    /// reproduces its outputs (see the module docs).
    fn search(&mut self, ctx: &Ctx<'a, '_>) -> Search {
        let task = ctx.task;
        let root = Node {
            pos: vec![0; task.lanes.len()],
            out: vec![0; ctx.outs.len()],
            changelog: 0,
            dead: 0,
            slots: BTreeMap::new(),
            history: Stamp::empty(),
        };
        let choices = ready_lanes(ctx, &root);
        let mut stack = vec![Frame {
            node: root,
            choices,
            next: 0,
            via: None,
        }];
        let mut failed: HashSet<Vec<usize>> = HashSet::new();
        let mut best: Option<(usize, Failure)> = None;
        let mut steps = 0u64;
        loop {
            let depth = stack.len() - 1;
            let Some(frame) = stack.last_mut() else {
                unreachable!("the root is popped only by returning");
            };
            if frame.choices.is_empty() && frame.next == 0 {
                frame.next = 1;
                let done = frame
                    .node
                    .pos
                    .iter()
                    .zip(&task.lanes)
                    .all(|(pos, lane)| *pos == lane.len);
                let end = if done {
                    end_failure(ctx, &frame.node)
                } else {
                    Some(stuck_failure(ctx, &frame.node))
                };
                match end {
                    None => {
                        self.summary.search_steps += steps;
                        let mut path = Vec::new();
                        let mut matched = Vec::new();
                        for frame in &stack {
                            if let Some((lane, took)) = &frame.via {
                                path.push(*lane);
                                matched.extend(took.iter().copied());
                            }
                        }
                        let changelog = stack.last().map_or(0, |frame| frame.node.changelog);
                        let dead = stack.last().map_or(0, |frame| frame.node.dead);
                        return Search::Found {
                            path,
                            matched,
                            changelog,
                            dead,
                        };
                    }
                    Some(failure) => keep_deepest(&mut best, depth, failure),
                }
            }
            if frame.next >= frame.choices.len() {
                failed.insert(frame.node.key());
                stack.pop();
                if stack.is_empty() {
                    self.summary.search_steps += steps;
                    return Search::Failed { best };
                }
                continue;
            }
            let lane = frame.choices[frame.next];
            frame.next += 1;
            steps += 1;
            if steps > self.options.search_steps {
                self.summary.search_steps += steps;
                return Search::Exhausted;
            }
            match deliver(ctx, &frame.node, lane, depth) {
                Ok((node, took)) => {
                    if failed.contains(&node.key()) {
                        continue;
                    }
                    let choices = ready_lanes(ctx, &node);
                    stack.push(Frame {
                        node,
                        choices,
                        next: 0,
                        via: Some((lane, took)),
                    });
                }
                Err(failure) => keep_deepest(&mut best, depth, failure),
            }
        }
    }
}

fn keep_deepest(best: &mut Option<(usize, Failure)>, depth: usize, failure: Failure) {
    if best.as_ref().is_none_or(|(deepest, _)| depth > *deepest) {
        *best = Some((depth, failure));
    }
}

/// The committed offset of `tp` if the task consumes it, else infinity.
fn task_threshold_end(task: &TaskPlan<'_>, tp: &Tp) -> u64 {
    task.lanes
        .iter()
        .find(|lane| lane.tp == *tp)
        .map_or(u64::MAX, |lane| lane.committed)
}

/// The lane's position as far as the prefix tells: the next undelivered
/// record, or the committed offset once the prefix is delivered.
fn threshold(lane: &Lane<'_>, pos: usize) -> u64 {
    if pos < lane.len {
        lane.log.records[pos].offset
    } else {
        lane.committed
    }
}

/// The first claim of `lane`'s head on a lane of the task that is not yet
/// resolved (G2), with that lane's position.
fn blocker(task: &TaskPlan<'_>, pos: &[usize], lane: usize) -> Option<(Claim, u64)> {
    let stamp = task.lanes[lane].log.stamp(pos[lane]);
    for claim in stamp.claims() {
        if let Some(claimed) = task.lanes.iter().position(|known| known.tp == claim.tp) {
            let position = threshold(&task.lanes[claimed], pos[claimed]);
            if claim.offset >= position {
                return Some((claim.clone(), position));
            }
        }
    }
    None
}

/// The lanes whose head may go next, oldest record timestamp first.
fn ready_lanes(ctx: &Ctx<'_, '_>, node: &Node) -> Vec<usize> {
    let task = ctx.task;
    let mut ready: Vec<usize> = (0..task.lanes.len())
        .filter(|&lane| node.pos[lane] < task.lanes[lane].len)
        .filter(|&lane| {
            !ctx.gate
                || blocker(task, &node.pos, lane).is_none()
                || ctx.dead.is_some_and(|dead| {
                    dead.skips(lane, task.lanes[lane].log.records[node.pos[lane]].offset)
                })
        })
        .collect();
    ready.sort_by_key(|&lane| {
        let record = &task.lanes[lane].log.records[node.pos[lane]];
        (record.data.timestamp, task.lanes[lane].tp.clone())
    });
    ready
}

/// Why the search cannot go on from a node with undelivered heads.
fn stuck_failure(ctx: &Ctx<'_, '_>, node: &Node) -> Failure {
    let task = ctx.task;
    let held: Vec<String> = (0..task.lanes.len())
        .filter(|&lane| node.pos[lane] < task.lanes[lane].len)
        .filter_map(|lane| {
            let (claim, position) = blocker(task, &node.pos, lane)?;
            let never = if claim.offset >= task_threshold_end(task, &claim.tp) {
                ", which its committed history never delivers"
            } else {
                ""
            };
            Some(format!(
                "{}@{} claims {claim} (position of {} is {position}{never})",
                task.lanes[lane].tp, task.lanes[lane].log.records[node.pos[lane]].offset, claim.tp
            ))
        })
        .collect();
    Failure {
        invariant: Invariant::I1,
        message: format!(
            "task {}: its committed history delivers records the gate holds (G2): {}",
            task.id,
            held.join("; ")
        ),
    }
}

/// Why a node that delivered every prefix is not a reconstruction: outputs
/// or changelog records left over.
fn end_failure(ctx: &Ctx<'_, '_>, node: &Node) -> Option<Failure> {
    let task = ctx.task;
    for (index, out) in ctx.outs.iter().enumerate() {
        for &(record_index, sole) in &out.entries[node.out[index]..] {
            let record = &out.log.records[record_index];
            if !sole || ctx.taken.contains(&(out.log.tp.clone(), record.offset)) {
                continue;
            }
            let repeats = out.entries[..node.out[index]]
                .iter()
                .map(|&(earlier, _)| &out.log.records[earlier])
                .find(|earlier| {
                    earlier.data.key == record.data.key && earlier.data.value == record.data.value
                });
            let what = match repeats {
                Some(earlier) => format!(
                    "duplicated: it repeats {}@{}, which a committed delivery emitted",
                    out.log.tp, earlier.offset
                ),
                None => "extra".to_string(),
            };
            return Some(Failure {
                invariant: Invariant::I7,
                message: format!(
                    "task {}: {}@{} {} is committed, but no committed delivery emits it ({what})",
                    task.id,
                    out.log.tp,
                    record.offset,
                    describe_record(record)
                ),
            });
        }
    }
    if let Some(dead) = ctx.dead {
        if node.dead < dead.entries.len() {
            let (log, record) = dead.record(node.dead);
            return Some(Failure {
                invariant: Invariant::I10,
                message: format!(
                    "task {}: {}@{} is a committed dead letter, but no committed delivery wrote it",
                    task.id, log.tp, record.offset
                ),
            });
        }
    }
    if let Some(changelog) = ctx.changelog {
        if let Some(record) = changelog.records.get(node.changelog) {
            return Some(Failure {
                invariant: Invariant::I6,
                message: format!(
                    "task {}: {}@{} {} is committed, but no committed delivery writes it",
                    task.id,
                    changelog.tp,
                    record.offset,
                    describe_record(record)
                ),
            });
        }
    }
    None
}

/// Delivers the head of `lane` from `node`: replays the logic and matches
/// what it writes against the task's committed outputs.
fn deliver(
    ctx: &Ctx<'_, '_>,
    node: &Node,
    lane: usize,
    depth: usize,
) -> Result<(Node, Vec<(usize, usize)>), Failure> {
    let task = ctx.task;
    let id = &task.id;
    let plan = task.plan;
    let at = &task.lanes[lane];
    let record = &at.log.records[node.pos[lane]];
    let stamp = at.log.stamp(node.pos[lane]);
    let bad_stamp = at.log.stamps[node.pos[lane]].as_ref().err();
    let delivered = format!("{}@{}", at.tp, record.offset);
    let mut next = node.clone();
    next.pos[lane] += 1;
    let slot = if at.tick {
        SlotKey::Tick
    } else {
        SlotKey::for_key(record.data.key.as_ref())
    };
    let state = node.slots.get(&slot);
    let replay = || -> Result<Result<Replayed, String>, Failure> {
        if at.tick {
            match tick_of(record) {
                // K2: a timer service's tick reads every key slot; its
                // changes are to those, in `other_slots`.
                Some(tick) if plan.stage.timer_service().is_some() => {
                    let slots: Vec<(SlotKey, &[u8])> = node
                        .slots
                        .iter()
                        .map(|(slot, bytes)| (slot.clone(), &bytes[..]))
                        .collect();
                    Ok(plan.stage.replay_tick_over_slots(&slots, tick))
                }
                Some(tick) => Ok(plan.stage.replay_tick(state.map(|bytes| &bytes[..]), tick)),
                None => Err(Failure {
                    invariant: Invariant::I4,
                    message: format!(
                        "task {id} delivered {delivered} in its committed history, which is not a tick record"
                    ),
                }),
            }
        } else {
            Ok(plan.stage.replay_record(
                &at.tp.topic,
                state.map(|bytes| &bytes[..]),
                &at.tp,
                record,
            ))
        }
    };
    let mut replayed = None;
    if let Some(dead) = ctx.dead {
        if let Some(entry) = dead.entry(lane, record.offset) {
            return dead_lettered(ctx, dead, entry, node, next, lane, depth, replay);
        }
        // Not dead-lettered, in a stage that dead-letters what it refuses.
        let refusal = match bad_stamp {
            Some(error) => Some(format!("its stamp header does not decode ({error})")),
            None => {
                let outcome = replay()?;
                let refusal = outcome
                    .as_ref()
                    .err()
                    .map(|error| format!("its logic refuses it ({error})"));
                replayed = Some(outcome);
                refusal
            }
        };
        if let Some(refusal) = refusal {
            let dlq = dead
                .log
                .map_or_else(String::new, |log| format!(" on {}", log.tp));
            return Err(Failure {
                invariant: Invariant::I10,
                message: format!(
                    "task {id} delivered {delivered} in its committed history (after {depth} deliveries), but {refusal}, and no committed dead letter{dlq} names it (record lost)"
                ),
            });
        }
    }
    next.history.merge(stamp);
    next.history.claim(&at.tp, record.offset);
    let replayed = match replayed {
        Some(outcome) => outcome,
        None => replay()?,
    }
    .map_err(|error| Failure {
        invariant: Invariant::I6,
        message: format!(
            "task {id} delivered {delivered} in its committed history (after {depth} deliveries), but its logic fails there: {error}"
        ),
    })?;
    let mut took = Vec::new();
    for emission in &replayed.emissions {
        let Ok((key, _)) = emission.encoded() else {
            return Err(Failure {
                invariant: Invariant::I7,
                message: format!("task {id}: delivering {delivered} emits {emission:?}, which does not encode, yet the delivery is committed"),
            });
        };
        let topic = emission.topic();
        let target = ctx
            .outs
            .iter()
            .position(|out| {
                out.log.tp.topic == *topic
                    && out.log.tp.partition
                        == partition_for(
                            key.map(|key| &key[..]),
                            ctx.assembly.partitions_of(topic.as_str()).unwrap_or(1),
                            id.partition,
                        )
            })
            .ok_or_else(|| Failure {
                invariant: Invariant::I7,
                message: format!("task {id}: delivering {delivered} emits {emission:?}, to a partition that was not read"),
            })?;
        let out = &ctx.outs[target];
        let mut entry = next.out[target];
        // The first record with the emission's bytes whose stamp falls short:
        // if nothing else matches, that is the emission, badly stamped.
        let mut short: Option<usize> = None;
        loop {
            let Some(&(record_index, sole)) = out.entries.get(entry) else {
                return Err(match short {
                    Some(record_index) => {
                        badly_stamped(ctx, target, record_index, stamp, at, record, &next.history)
                    }
                    None => lost(ctx, target, &delivered, emission),
                });
            };
            let candidate = &out.log.records[record_index];
            if ctx.taken.contains(&(out.log.tp.clone(), candidate.offset)) {
                entry += 1;
                continue;
            }
            let content = same_content(candidate, emission);
            if content && out.log.stamp(record_index).dominates(&next.history) {
                took.push((target, entry));
                next.out[target] = entry + 1;
                break;
            }
            if content && short.is_none() {
                short = Some(record_index);
            }
            if sole {
                return Err(match short {
                    Some(record_index) => {
                        badly_stamped(ctx, target, record_index, stamp, at, record, &next.history)
                    }
                    None => mismatch(ctx, target, entry, &delivered, emission),
                });
            }
            entry += 1;
        }
    }
    // The delivery's own slot first, then the others (a timer service's
    // tick), each the next record of the changelog.
    let changes = std::iter::once((slot, replayed.slot)).chain(replayed.other_slots);
    for (slot, change) in changes {
        if change == SlotChange::Unchanged {
            continue;
        }
        let changelog = ctx.changelog.ok_or_else(|| Failure {
            invariant: Invariant::I6,
            message: format!("task {id}: delivering {delivered} changes slot {slot:?}, but the stage has no changelog"),
        })?;
        let value = match &change {
            SlotChange::Set(bytes) => Some(bytes.clone()),
            _ => None,
        };
        let expected_key = slot.changelog_key();
        let describe_change = || match &value {
            Some(bytes) => format!(
                "sets slot {slot:?} to {}",
                crate::text::bytes_for_humans(bytes)
            ),
            None => format!("deletes slot {slot:?}"),
        };
        let Some(logged) = changelog.records.get(next.changelog) else {
            return Err(Failure {
                invariant: Invariant::I6,
                message: format!(
                    "task {id}: delivering {delivered} {}, but {} holds no such change (state change lost)",
                    describe_change(),
                    changelog.tp
                ),
            });
        };
        if logged.data.key.as_ref() != Some(&expected_key) || logged.data.value != value {
            return Err(Failure {
                invariant: Invariant::I6,
                message: format!(
                    "task {id}: delivering {delivered} {}, but the next change on {} is {}@{} {}",
                    describe_change(),
                    changelog.tp,
                    changelog.tp,
                    logged.offset,
                    describe_record(logged)
                ),
            });
        }
        next.changelog += 1;
        match change {
            SlotChange::Set(bytes) => {
                next.slots.insert(slot, bytes);
            }
            _ => {
                next.slots.remove(&slot);
            }
        }
    }
    Ok((next, took))
}

/// A delivery that the task's dead letter `entry` stands in for (X5): it
/// wrote that dead letter, as the next of its partition of the dead-letter
/// topic, with a stamp that dominates the history after it (G5), and
/// nothing else; the fold goes on without it. Unless the operator skipped
/// the record, the logic must refuse it (or its stamp not decode). The
/// history claims the record, and merges its stamp unless it was skipped
/// while the gate held it (docs/RULES.md#skip).
#[allow(clippy::too_many_arguments)]
fn dead_lettered(
    ctx: &Ctx<'_, '_>,
    dead: &DeadLetters<'_>,
    entry: usize,
    node: &Node,
    mut next: Node,
    lane: usize,
    depth: usize,
    replay: impl Fn() -> Result<Result<Replayed, String>, Failure>,
) -> Result<(Node, Vec<(usize, usize)>), Failure> {
    let task = ctx.task;
    let id = &task.id;
    let at = &task.lanes[lane];
    let index = node.pos[lane];
    let record = &at.log.records[index];
    let delivered = format!("{}@{}", at.tp, record.offset);
    let (log, letter) = dead.record(entry);
    let kind = dead.entries[entry].1;
    let bad_stamp = at.log.stamps[index].is_err();
    if kind != DeadLetterKind::Skipped && !bad_stamp {
        if let Ok(replayed) = replay()? {
            let effects = replayed.emissions.len()
                + usize::from(!matches!(replayed.slot, SlotChange::Unchanged))
                + replayed.other_slots.len();
            return Err(Failure {
                invariant: Invariant::I10,
                message: format!(
                    "task {id}: {}@{} dead-letters {delivered} ({kind}), but its logic accepts that record (after {depth} deliveries, with {effects} effect(s)) and it is not skipped",
                    log.tp, letter.offset
                ),
            });
        }
    }
    if node.dead != entry {
        let (_, expected) = dead.record(node.dead);
        return Err(Failure {
            invariant: Invariant::I10,
            message: format!(
                "task {id}: delivering {delivered} (after {depth} deliveries) writes its dead letter {}@{}, but the task's next dead letter is {}@{} (a task writes its dead letters in delivery order)",
                log.tp, letter.offset, log.tp, expected.offset
            ),
        });
    }
    next.dead += 1;
    let held = kind == DeadLetterKind::Skipped && blocker(task, &node.pos, lane).is_some();
    if !held {
        next.history.merge(at.log.stamp(index));
    }
    next.history.claim(&at.tp, record.offset);
    let letter_stamp = log.stamp(dead.entries[entry].0);
    if !letter_stamp.dominates(&next.history) {
        return Err(Failure {
            invariant: Invariant::I5,
            message: format!(
                "task {id}: {}@{}, the dead letter of {delivered}, has stamp {letter_stamp}, which does not dominate the task's history after that delivery, {}, in the reconstructed order (G5)",
                log.tp, letter.offset, next.history
            ),
        });
    }
    Ok((next, Vec::new()))
}

/// I5: the record that carries an emission's bytes has a stamp that does not
/// dominate the history after the delivery.
fn badly_stamped(
    ctx: &Ctx<'_, '_>,
    target: usize,
    record_index: usize,
    delivered_stamp: &Stamp,
    at: &Lane<'_>,
    delivered: &ConsumedRecord,
    history: &Stamp,
) -> Failure {
    let out = &ctx.outs[target];
    let candidate = &out.log.records[record_index];
    let candidate_stamp = out.log.stamp(record_index);
    let mut inherited = delivered_stamp.clone();
    inherited.claim(&at.tp, delivered.offset);
    let what = if candidate_stamp.dominates(&inherited) {
        format!("does not dominate the task's history after that delivery, {history}, in the reconstructed order")
    } else {
        format!("does not claim the delivered record and its causes, {inherited}")
    };
    Failure {
        invariant: Invariant::I5,
        message: format!(
            "task {}: {}@{} {} was emitted while delivering {}@{}, but its stamp {candidate_stamp} {what} (G5)",
            ctx.task.id,
            out.log.tp,
            candidate.offset,
            describe_record(candidate),
            at.tp,
            delivered.offset
        ),
    }
}

/// An emission with no committed record left on its partition.
fn lost(ctx: &Ctx<'_, '_>, target: usize, delivered: &str, emission: &Emission) -> Failure {
    let out = &ctx.outs[target];
    Failure {
        invariant: Invariant::I7,
        message: format!(
            "task {}: delivering {delivered} emits {emission:?} to {}, but no committed record of the task there carries it (lost)",
            ctx.task.id, out.log.tp
        ),
    }
}

/// An emission whose next committed record is another one: either the
/// records before a later match are extra (or duplicated), or the emission is
/// lost.
fn mismatch(
    ctx: &Ctx<'_, '_>,
    target: usize,
    entry: usize,
    delivered: &str,
    emission: &Emission,
) -> Failure {
    let out = &ctx.outs[target];
    let record = &out.log.records[out.entries[entry].0];
    let later = out.entries[entry + 1..]
        .iter()
        .map(|&(index, _)| &out.log.records[index])
        .find(|later| same_content(later, emission));
    match later {
        Some(later) => {
            let repeats = out.entries[..entry]
                .iter()
                .map(|&(earlier, _)| &out.log.records[earlier])
                .find(|earlier| {
                    earlier.data.key == record.data.key && earlier.data.value == record.data.value
                });
            let what = match repeats {
                Some(earlier) => format!("duplicated: it repeats {}@{}", out.log.tp, earlier.offset),
                None => "extra".to_string(),
            };
            Failure {
                invariant: Invariant::I7,
                message: format!(
                    "task {}: {}@{} {} is committed, but no committed delivery emits it ({what}); delivering {delivered} emits {emission:?}, found further on at {}@{}",
                    ctx.task.id,
                    out.log.tp,
                    record.offset,
                    describe_record(record),
                    out.log.tp,
                    later.offset
                ),
            }
        }
        None => Failure {
            invariant: Invariant::I7,
            message: format!(
                "task {}: delivering {delivered} emits {emission:?} to {}, but the task's next committed record there is {}@{} {} and none later carries it (lost)",
                ctx.task.id,
                out.log.tp,
                out.log.tp,
                record.offset,
                describe_record(record)
            ),
        },
    }
}
