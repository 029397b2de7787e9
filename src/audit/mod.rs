//! The log-only causal audit: the simulator's causal checks, run over nothing
//! but what a `read_committed` consumer can read back from a cluster.
//!
//! The simulator's checker (in `parsley-sim`, `sim/src/sim/checker/`) has
//! the trace: it knows which instance fetched and delivered what, in which
//! order. An audit of a
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
//!    includes the delivered record's stamp and a claim on it); and the slot
//!    changes must be the task's changelog partition, transaction by
//!    transaction (S5). A transaction writes, at its commit, one record per
//!    slot it changed with the slot's value then (a tombstone for a
//!    deletion), in the order of first change, and its commit marker takes
//!    the next offset: so a *batch*, a run of committed changelog records at
//!    consecutive offsets, is one transaction's changes. The search keeps
//!    the changes since the last matched batch, one per slot, as *pending*;
//!    each slot a delivery changes must be one the next batch writes, and
//!    the transaction may end (a search choice, tried first) where the
//!    pending changes are exactly that batch, which is then matched. A
//!    dead-lettered delivery
//!    instead matches its dead letter, which must be the next one of the
//!    task's dead-letter partition, with a stamp that dominates the history
//!    after the delivery; it emits nothing, changes no slot (the fold goes
//!    on without it), and the logic must refuse it (or its stamp not decode)
//!    unless its dead letter is `skipped`. A skipped record goes whatever
//!    its claims, and the history merges its stamp only if the gate would
//!    have let it through (docs/RULES.md#skip);
//! 4. ends with every committed output of the task matched, no change
//!    pending, every record of its changelog partition matched and every
//!    dead letter of its dead-letter partition matched.
//!
//! The search is a depth-first search over the deliverable heads, oldest
//! record timestamp first (the live runtime's order), with backtracking and
//! a memo of failed states (lane positions, output cursors and the pending
//! changes determine the state: slots are the fold of the matched changelog
//! batches and the pending changes). It is bounded
//! by [`AuditOptions::search_steps`]; a task whose search runs out of steps is
//! reported as a note in the summary (*inconclusive*), never as a violation,
//! and an audit with such a note and no violation is not clean but
//! inconclusive ([`AuditReport::is_inconclusive`]).
//!
//! A node whose history already exceeds the stamp of an output the task must
//! still emit is cut off at once (the outputs' *lookahead*): the history only
//! grows, and an emission matches a record only if the record's stamp
//! dominates it (G5), so nothing after that node can match the output.
//! Without the cut, an output duplicated deep in a busy log made the search
//! try every order of the deliveries that could follow it. The verdict is
//! the search with the lookahead; when it finds no reconstruction, the
//! report's words come from the search without it (whose deepest failure
//! follows the committed order furthest) where that finishes within its
//! steps.
//!
//! # At a consistent cut
//!
//! A running application never stops writing: input flows, ticks and timer
//! fires commit, outputs are in flight. Its audit is taken at a cut, as
//! Kafka's own tools read a running group (`kafka-consumer-groups
//! --describe` reads the committed offsets, then the log ends) and as
//! Kafka Streams' exactly-once recovery sees a task (its committed offsets,
//! and what its transactions committed with them):
//!
//! * **The cut** is each stage group's committed offsets (with their
//!   checkpoints) read first, at `t0` ([`CommittedLogs::insert_committed`]);
//!   every log is read after them, each up to its last stable offset at
//!   its own read `t1 > t0`. A committed offset therefore never lies beyond
//!   a log read after it, and every record a transaction committed before
//!   `t0` is read. The offsets are read once more after the logs
//!   ([`CommittedLogs::insert_committed_after`]); a task whose offsets or
//!   checkpoint differ then *moved*: it committed while the logs were read.
//! * **Within the cut** are, of each task, its committed history (the
//!   records of its lanes below the cut's offsets, whose claims and outputs
//!   are judged as below) and what the transactions that committed those
//!   offsets wrote. **Beyond the cut** is what a moving task's later
//!   transactions wrote: the records of its sink and dead-letter
//!   partitions whose stamp claims one of its lanes at or beyond the cut's
//!   offset (every emission and dead letter claims the delivery it is for,
//!   G5), dead letters naming such a delivery, its ticks later than the
//!   cut's checkpoint's tick time (the tick time commits with the tick,
//!   T6), and its changelog batches after the last one its committed
//!   deliveries write (changelog records carry no stamps). A record beyond
//!   the cut, left over once the committed history is reconstructed, is not
//!   an extra output, nor a dead letter or state change no committed
//!   delivery writes, nor a tick the checkpoint should name. Everything within the cut is judged as
//!   before: an output of the cut that no delivery emits, a lost emission,
//!   a wrong checkpoint are violations whatever runs. An extra output whose
//!   stamp claims nothing beyond the cut is still reported.
//! * **Claims at a cut.** The logs are read one after another while the
//!   application runs, and a record may claim, through the stamps of the
//!   records its task holds (G5), a cause still in an open transaction, or
//!   one appended after its tp was read: in a read at a cut, a claim at or
//!   beyond where its tp's read stopped is unverifiable, whether or not a
//!   task moved (a task idle behind a held record claims as much).
//!   A claim below it that names no committed record is reported whatever
//!   the record's side of the cut (what lies below a last stable offset is
//!   settled). And since the offsets were read before the logs, a committed
//!   offset beyond its tp's last stable offset is a precommitted read (I3).
//! * A task that did not move, and every task of a read whose offsets were
//!   not read again (a stopped application, the model), has nothing beyond
//!   the cut: the cut is then everything and the audit is the same as of
//!   an application at rest. [`AuditSummary::cut`] names the cut per tp
//!   and counts what lay beyond it.
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
//!   still open (in a read at a cut, such a claim is unverifiable, and a
//!   committed offset beyond its tp's last stable offset is reported
//!   instead: see *At a consistent cut*).
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
//! * **I6 (state).** A slot change its transaction's batch does not name
//!   (or no batch left for it), changes that no batch matches (a value
//!   other than the fold's at the commit, a slot missing or extra, or out
//!   of order), a changelog record no committed delivery writes, or a
//!   committed delivery whose logic fails (in a stage without the
//!   dead-letter opt-in; with it, that is I10).
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

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use crate::assembly::Assembly;
use crate::record::ConsumedRecord;
use crate::task::CommittedOffset;
use crate::{App, DeadLetterKind, Tp};

mod batches;
mod checks;
mod index;
mod lookahead;
mod replay;
mod search;

use checks::Auditor;
use index::build_index;

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
    /// The stage groups' committed offsets read again after the logs, when
    /// they were: the audit of a running application (see the module docs,
    /// *At a consistent cut*).
    after: Option<GroupOffsets>,
}

/// Each stage group's committed offset (and checkpoint) per tp, keyed by
/// (group, tp).
pub type GroupOffsets = BTreeMap<(String, Tp), CommittedOffset>;

impl CommittedLogs {
    /// No logs yet.
    pub fn new() -> Self {
        CommittedLogs::default()
    }

    /// The committed records of `tp`, replacing any inserted before. They
    /// are sorted by offset. Without [`CommittedLogs::insert_bounds`] they
    /// are taken to be the whole log: start 0, read to the end, and the log
    /// end just past the last record.
    /// Progress records (V4) are left out: no task delivers them, and they
    /// are no task's emission.
    pub fn insert_records(&mut self, tp: Tp, mut records: Vec<ConsumedRecord>) {
        records.retain(|record| !crate::header::is_progress(&record.data));
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

    /// The stage groups' committed offsets read again once every log was
    /// read, the offsets of [`CommittedLogs::insert_committed`] having been
    /// read before the logs: the read of a running application. Those read
    /// first are the audit's cut; a task whose offsets or checkpoint differ
    /// here committed while the logs were read, and what its later
    /// transactions wrote lies beyond the cut and is not judged (module
    /// docs, *At a consistent cut*). Without this call the offsets and the
    /// logs are taken to be one instant's (a stopped application, the
    /// model): nothing lies beyond the cut.
    pub fn insert_committed_after(&mut self, offsets: GroupOffsets) {
        self.after = Some(offsets);
    }

    /// Whether the offsets were read again after the logs
    /// ([`CommittedLogs::insert_committed_after`]).
    pub fn read_at_cut(&self) -> bool {
        self.after.is_some()
    }

    /// Whether the committed offset or checkpoint of `group` on `tp` read
    /// after the logs differs from the one read before them: the group
    /// committed while the logs were read. False when the offsets were not
    /// read again.
    pub fn moved(&self, group: &str, tp: &Tp) -> bool {
        let Some(after) = &self.after else {
            return false;
        };
        let key = (group.to_string(), tp.clone());
        self.committed.get(&key) != after.get(&key)
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
    /// One per task that was not checked (its search ran out of steps, or
    /// a partition it needs was not read), saying why; not violations.
    /// [`AuditReport::is_inconclusive`] counts them as tasks.
    pub notes: Vec<String>,
    /// The cut the audit judged, and what lay beyond it.
    pub cut: AuditCut,
}

/// The cut an audit judged (module docs, *At a consistent cut*): the stage
/// groups' committed offsets, read first, and every log read after them up
/// to its last stable offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditCut {
    /// Whether the offsets were read again after the logs (the read of a
    /// possibly running application); false when offsets and logs are one
    /// instant's (the cut is then everything).
    pub read_again: bool,
    /// Tasks that committed while the logs were read: their offsets or
    /// checkpoint read after the logs differ from the cut's.
    pub tasks_moved: usize,
    /// Records read that lay beyond the cut, over every tp.
    pub beyond: usize,
    /// Per tp read, the cut there.
    pub tps: BTreeMap<Tp, TpCut>,
}

/// The cut on one tp.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TpCut {
    /// The committed offset, at the cut, of each stage group that consumes
    /// the tp (`(group, offset)`; none for a tp only written).
    pub committed: Vec<(String, u64)>,
    /// Where the `read_committed` read stopped: the last stable offset.
    pub read_until: u64,
    /// Records of the tp that lay beyond the cut: written by transactions
    /// that committed after the offsets were read (outputs, state changes,
    /// dead letters, ticks).
    pub beyond: usize,
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
    /// Whether no invariant is violated (notes do not count: see
    /// [`AuditReport::is_inconclusive`]).
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// Whether no invariant is violated but some task was not checked
    /// (its search ran out of steps, or a partition it needs was not
    /// read): the notes say which and why. Such an audit is not called
    /// clean.
    pub fn is_inconclusive(&self) -> bool {
        self.violations.is_empty() && !self.summary.notes.is_empty()
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
        if self.is_inconclusive() {
            write!(
                f,
                "audit inconclusive: no violation found, but {} of {} tasks not checked (the notes below say why); read: ",
                s.notes.len(),
                s.tasks
            )?;
        } else if self.violations.is_empty() {
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
        let cut = &s.cut;
        if cut.read_again {
            write!(
                f,
                "\n  cut: each stage group's committed offsets, read before the logs; every log read after them to its last stable offset; {} of {} tasks committed while the logs were read; {} records beyond the cut, not judged",
                cut.tasks_moved, s.tasks, cut.beyond
            )?;
            for (tp, at) in &cut.tps {
                write!(f, "\n    {tp}:")?;
                for (group, offset) in &at.committed {
                    write!(f, " committed {offset} ({group}),")?;
                }
                write!(f, " read to {}, {} beyond", at.read_until, at.beyond)?;
            }
        }
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
    let beyond = auditor.beyond_cut(&tasks);
    let dead = auditor.check_dead_letters(&tasks, &beyond);
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
        auditor.check_checkpoint(task, dead.as_ref(), &beyond);
    }
    auditor.reconstruct(&tasks, &dead, &beyond);
    AuditReport {
        violations: auditor.violations,
        summary: auditor.summary,
    }
}
