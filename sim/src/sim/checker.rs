//! The independent checker: recomputes every guarantee (I1–I8, I10, I11) from the
//! recorded trace and the committed logs, trusting none of the runtime's own
//! bookkeeping.
//!
//! It rebuilds, per task instance, what the gate must have looked like: the
//! records each fetch brought (read back from the logs), the position of each
//! consumed tp, the history, the held records and the committed snapshot that
//! aborts and restarts return to. From that it knows what every stamp should
//! have been (G5 is exact: history merged with the stamps of held records),
//! and by replaying the stages' pure logic over the committed deliveries it
//! knows what state and outputs the committed history must have produced.

use std::borrow::Cow;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use parsley::assembly::Assembly;
use parsley::header::{self, STAMP_HEADER};
use parsley::record::{ConsumedRecord, RecordData};
use parsley::stage::{SlotChange, SlotKey};
use parsley::task::TaskId;
use parsley::{App, Claim, Stamp, TopicName, Tp};

use crate::model::{Cluster, EntryStatus, LogView};
use crate::sim::trace::{Entry, Event, TaskAt, TxnRef};
use rustc_hash::FxHashMap;

pub use parsley::audit::Invariant;

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
    fn on(&mut self, at: &TaskAt) -> &mut Violation {
        self.task = Some(Arc::clone(&at.task));
        self.instance = Some(at.instance);
        self
    }

    /// Names the task it broke on.
    fn of_task(&mut self, task: &TaskId) -> &mut Violation {
        self.task = Some(Arc::new(task.clone()));
        self
    }

    /// Names the record the message is about.
    fn about(&mut self, tp: &Tp, offset: u64) -> &mut Violation {
        self.record = Some((tp.clone(), offset));
        self
    }

    /// Names that record's stamp.
    fn stamped(&mut self, stamp: &Stamp) -> &mut Violation {
        self.stamp = Some(stamp.clone());
        self
    }

    /// Names another record; where it was is filled in once the whole
    /// trace has been checked ([`Checker::locate_related`]).
    fn naming(
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

/// What the checker needs besides the trace and the logs.
pub struct CheckInput<'a> {
    /// The application that ran.
    pub app: &'a App,
    /// Its assembly on the model.
    pub assembly: &'a Assembly,
    /// The model, with every log.
    pub cluster: &'a Cluster,
    /// The run's trace.
    pub trace: &'a [Entry],
    /// Whether the world quiesced within its liveness budget.
    pub quiesced: bool,
    /// The liveness budget, for the I8 message.
    pub liveness_steps: u64,
}

/// Every tp the checker looks at, numbered on first sight, with its log
/// (looked up once) and the stamps of its records (decoded once).
struct Tps<'a> {
    cluster: &'a Cluster,
    /// Per topic name, the numbers of its tps: (partition, number).
    topics: Vec<(TopicName, Vec<(u32, usize)>)>,
    logs: Vec<Option<LogView<'a>>>,
    /// Per tp, whether a stage consumes it: only then are its stamps looked
    /// up again after they are checked.
    consumed: Vec<bool>,
    /// The topics the stages consume.
    consumed_topics: Vec<TopicName>,
    /// Per tp, by offset: `None` until looked at, then the decoded stamp
    /// (`None` when the header does not decode).
    stamps: Vec<Vec<Option<Option<Rc<Stamp>>>>>,
    empty: Rc<Stamp>,
    /// Scratch space for canonical encodings of expected stamps.
    encoded: Vec<u8>,
}

impl<'a> Tps<'a> {
    fn new(cluster: &'a Cluster, app: &App) -> Self {
        Tps {
            cluster,
            topics: Vec::new(),
            logs: Vec::new(),
            consumed: Vec::new(),
            consumed_topics: app
                .stages()
                .iter()
                .flat_map(|plan| plan.consumed_topics())
                .collect(),
            stamps: Vec::new(),
            empty: Rc::new(Stamp::empty()),
            encoded: Vec::new(),
        }
    }

    /// The index of `name` in `topics`. Names handed out by one application
    /// share an allocation, and `TopicName`'s equality compares pointers
    /// before bytes.
    fn topic(&mut self, name: &TopicName) -> usize {
        match self.topics.iter().position(|(known, _)| known == name) {
            Some(topic) => topic,
            None => {
                self.topics.push((name.clone(), Vec::new()));
                self.topics.len() - 1
            }
        }
    }

    fn id(&mut self, tp: &Tp) -> usize {
        let topic = self.topic(&tp.topic);
        let partitions = &mut self.topics[topic].1;
        if let Some(&(_, id)) = partitions
            .iter()
            .find(|(partition, _)| *partition == tp.partition)
        {
            return id;
        }
        let id = self.logs.len();
        partitions.push((tp.partition, id));
        self.logs.push(self.cluster.log(tp).ok());
        self.consumed.push(self.consumed_topics.contains(&tp.topic));
        self.stamps.push(Vec::new());
        id
    }

    fn log(&self, id: usize) -> Option<LogView<'a>> {
        self.logs[id]
    }

    fn status(&self, id: usize, offset: u64) -> Option<EntryStatus> {
        self.logs[id]?.status(offset)
    }

    /// The data record at `offset`, whatever its status.
    fn data(&self, id: usize, offset: u64) -> Option<&'a RecordData> {
        self.logs[id]?.record(offset)
    }

    /// The committed data records of the tp numbered `id` in `[from, to)`.
    fn committed_offsets(&self, id: usize, from: u64, to: u64) -> impl Iterator<Item = u64> + 'a {
        self.log(id)
            .into_iter()
            .flat_map(move |log| log.committed_offsets(from, to))
    }

    /// The stamp a record carries in the log (empty without a header; `None`
    /// when the header does not decode or there is no such data record).
    fn stamp(&mut self, id: usize, offset: u64) -> Option<Rc<Stamp>> {
        let data = self.data(id, offset)?;
        let index = usize::try_from(offset).ok()?;
        if let Some(Some(cached)) = self.stamps[id].get(index) {
            return cached.clone();
        }
        let stamp = match data.header(STAMP_HEADER) {
            Some(bytes) => header::decode(bytes).ok().map(Rc::new),
            None => Some(Rc::clone(&self.empty)),
        };
        self.remember(id, index, stamp.clone());
        stamp
    }

    /// Whether a record carries exactly `expected`, deciding most cases
    /// without decoding: a header that is byte for byte the canonical
    /// encoding of `expected` decodes to `expected` (the decoder accepts only
    /// canonical headers, and each stamp has one). False when unsure: then
    /// [`Tps::stamp`] decodes.
    fn carries(&mut self, id: usize, offset: u64, expected: &Stamp) -> bool {
        let Some(data) = self.data(id, offset) else {
            return false;
        };
        let Ok(index) = usize::try_from(offset) else {
            return false;
        };
        if let Some(Some(cached)) = self.stamps[id].get(index) {
            return cached.as_deref() == Some(expected);
        }
        let Some(bytes) = data.header(STAMP_HEADER) else {
            return false;
        };
        if !header::is_header_of(bytes, expected, &mut self.encoded) {
            return false;
        }
        if self.consumed[id] {
            self.remember(id, index, Some(Rc::new(expected.clone())));
        }
        true
    }

    fn remember(&mut self, id: usize, index: usize, stamp: Option<Rc<Stamp>>) {
        let cache = &mut self.stamps[id];
        if cache.len() <= index {
            let end = self.logs[id].map_or(0, |log| log.high_watermark() as usize);
            cache.resize(end.max(index + 1), None);
        }
        cache[index] = Some(stamp);
    }
}

/// A task instance's gate as the checker rebuilds it.
#[derive(Clone, Default)]
struct Lanes {
    tps: Vec<Tp>,
    /// The tps' numbers in [`Tps`].
    ids: Vec<usize>,
    buffers: Vec<VecDeque<u64>>,
    fetch_next: Vec<u64>,
}

impl Lanes {
    fn position(&self, lane: usize) -> u64 {
        self.buffers[lane]
            .front()
            .copied()
            .unwrap_or(self.fetch_next[lane])
    }

    fn lane(&self, tp: &Tp) -> Option<usize> {
        self.tps.iter().position(|known| known == tp)
    }

    fn positions_into(&self, positions: &mut Vec<u64>) {
        positions.clear();
        positions.extend((0..self.tps.len()).map(|lane| self.position(lane)));
    }

    /// What the gate had done with the record `claim` names, for a claim on
    /// one of its tps. `delivering` is the lane and offset being delivered:
    /// its lane has passed only the offsets before it.
    fn gate(&self, claim: &Claim, delivering: Option<(usize, u64)>) -> Option<Gate> {
        let lane = self.lane(&claim.tp)?;
        let passed = match delivering {
            Some((delivering, offset)) if delivering == lane => offset > claim.offset,
            _ => self.position(lane) > claim.offset,
        };
        Some(if passed {
            Gate::Delivered
        } else if self.fetch_next[lane] > claim.offset {
            Gate::Fetched
        } else {
            Gate::NotFetched
        })
    }

    fn rewind(&mut self, positions: &[u64]) {
        for buffer in &mut self.buffers {
            buffer.clear();
        }
        self.fetch_next.copy_from_slice(positions);
    }
}

/// The committed snapshot of a task, as the checker recomputes it.
#[derive(Clone, Default)]
struct Snapshot {
    positions: Vec<u64>,
    history: Stamp,
    last_tick_at: Option<i64>,
}

struct Instance {
    lanes: Lanes,
    history: Stamp,
    started_at: i64,
    /// The tick emitted in the open transaction, if any.
    open_tick: Option<i64>,
}

/// A delivery in a transaction, waiting to learn whether it commits; it
/// points into the trace.
#[derive(Clone, Copy)]
struct Delivery<'a> {
    step: u64,
    at: &'a TaskAt,
    tp: &'a Tp,
    /// `tp`'s number in [`Tps`].
    id: usize,
    offset: u64,
    sent: &'a [(Tp, u64)],
}

struct Checker<'a> {
    input: &'a CheckInput<'a>,
    violations: Vec<Violation>,
    tps: Tps<'a>,
}

/// Runs every check and returns the violations found, first ones first.
pub fn check(input: &CheckInput<'_>) -> Vec<Violation> {
    let mut checker = Checker {
        input,
        violations: Vec::new(),
        tps: Tps::new(input.cluster, input.app),
    };
    let committed = checker.replay_trace();
    checker.check_committed_histories(&committed);
    checker.check_committed_checkpoints(&committed);
    checker.check_outputs_and_state(&committed);
    checker.check_dead_letter_logs();
    checker.check_timers();
    checker.check_liveness(&committed);
    checker.locate_related();
    checker.violations.sort_by_key(|violation| violation.step);
    checker.violations
}

/// The claims of `expected` that `actual` does not make (or makes on an
/// earlier offset), as missing; then those of `actual` beyond `expected`,
/// as extra: how an emission's or tick's stamp differs from what it
/// should inherit (I5).
fn stamp_difference(actual: &Stamp, expected: &Stamp) -> Vec<(Relation, Claim)> {
    let beyond = |stamp: &Stamp, other: &Stamp, relation: Relation| {
        stamp
            .claims()
            .iter()
            .filter(|claim| {
                other
                    .offset(&claim.tp)
                    .is_none_or(|offset| offset < claim.offset)
            })
            .map(|claim| (relation, claim.clone()))
            .collect::<Vec<_>>()
    };
    let mut difference = beyond(expected, actual, Relation::Missing);
    difference.extend(beyond(actual, expected, Relation::Extra));
    difference
}

/// Per task, its committed deliveries in committed order.
type Committed<'a> = FxHashMap<Arc<TaskId>, Vec<Delivery<'a>>>;

/// Keeps an emptied list of deliveries for reuse.
fn recycle<'a>(spare: &mut Vec<Vec<Delivery<'a>>>, mut deliveries: Vec<Delivery<'a>>) {
    if deliveries.capacity() > 0 {
        deliveries.clear();
        spare.push(deliveries);
    }
}

/// A task's committed deliveries.
fn committed_of<'c, 'a>(committed: &'c Committed<'a>, task: &TaskId) -> &'c [Delivery<'a>] {
    committed.get(task).map_or(&[], Vec::as_slice)
}

impl<'a> Checker<'a> {
    /// Records a violation; the caller names its task and records on the
    /// returned value.
    fn violation(&mut self, invariant: Invariant, step: u64, message: String) -> &mut Violation {
        self.violations
            .push(Violation::new(invariant, step, message));
        self.violations.last_mut().expect("just pushed")
    }

    /// Fills in where each related record was: its status in the log and
    /// every delivery of it in the trace, with how its transaction ended.
    /// Runs only for a failing run, in two passes over the trace.
    fn locate_related(&mut self) {
        let wanted: BTreeSet<(Tp, u64)> = self
            .violations
            .iter()
            .flat_map(|violation| &violation.related)
            .map(|related| (related.tp.clone(), related.offset))
            .collect();
        if wanted.is_empty() {
            return;
        }
        /// A delivery of a wanted record: its trace index, task instance and
        /// transaction.
        struct Seen<'t> {
            index: usize,
            at: &'t TaskAt,
            txn: TxnRef,
        }
        let trace: &'a [Entry] = self.input.trace;
        let mut deliveries: BTreeMap<(Tp, u64), Vec<Seen>> = BTreeMap::new();
        let mut ends: FxHashMap<TxnRef, TxnEnd> = FxHashMap::default();
        for (index, entry) in trace.iter().enumerate() {
            if let Event::Delivered {
                at,
                txn,
                tp,
                offset,
                ..
            } = &entry.event
            {
                let key = (tp.clone(), *offset);
                if wanted.contains(&key) {
                    let txn = *txn;
                    deliveries
                        .entry(key)
                        .or_default()
                        .push(Seen { index, at, txn });
                    ends.insert(txn, TxnEnd::Unfinished);
                }
            }
        }
        for entry in trace {
            let (txn, end) = match &entry.event {
                Event::Committed { txn, .. } => (txn, TxnEnd::Committed(entry.step)),
                Event::Aborted { txn, .. } => (txn, TxnEnd::Aborted(entry.step)),
                _ => continue,
            };
            if let Some(known) = ends.get_mut(txn) {
                *known = end;
            }
        }
        let tps = &mut self.tps;
        for violation in &mut self.violations {
            let happened = violation.entry_in(trace).unwrap_or(0);
            for related in &mut violation.related {
                let id = tps.id(&related.tp);
                related.status = tps.status(id, related.offset);
                let key = (related.tp.clone(), related.offset);
                let seen = deliveries.get(&key).map_or(&[][..], Vec::as_slice);
                related.deliveries = seen
                    .iter()
                    .map(|seen| DeliveryOf {
                        step: trace[seen.index].step,
                        at: seen.at.clone(),
                        ended: ends[&seen.txn],
                        before: seen.index < happened,
                    })
                    .collect();
            }
        }
    }

    /// The record at `offset` of the tp numbered `id` in the log, whatever
    /// its status.
    fn record(&self, id: usize, offset: u64) -> Option<ConsumedRecord> {
        let data = self.tps.data(id, offset)?.clone();
        Some(ConsumedRecord { offset, data })
    }

    fn consumed_tps(&self, task: &TaskId) -> Vec<Tp> {
        let plan = self
            .input
            .app
            .stage(&task.stage)
            .expect("tasks belong to stages");
        plan.consumed_topics()
            .into_iter()
            .filter(|topic| {
                self.input
                    .assembly
                    .partitions_of(topic.as_str())
                    .is_some_and(|count| task.partition < count)
            })
            .map(|topic| Tp::new(topic, task.partition))
            .collect()
    }

    fn tick_interval(&self, task: &TaskId) -> Option<i64> {
        let plan = self.input.app.stage(&task.stage)?;
        Some(plan.stage.ticks()?.interval.as_millis() as i64)
    }

    /// The held records of an instance's gate: buffered records with a claim
    /// on a consumed tp that the lane's position has not passed (G2).
    fn held_stamp(&mut self, lanes: &Lanes) -> Stamp {
        let mut merged = Stamp::empty();
        for lane in 0..lanes.tps.len() {
            for &offset in &lanes.buffers[lane] {
                let Some(stamp) = self.tps.stamp(lanes.ids[lane], offset) else {
                    continue;
                };
                let held = stamp.claims().iter().any(|claim| {
                    lanes
                        .lane(&claim.tp)
                        .is_some_and(|index| lanes.position(index) <= claim.offset)
                });
                if held {
                    merged.merge(&stamp);
                }
            }
        }
        merged
    }

    /// What an instance's emissions must carry (G5, exact): its history
    /// merged with the stamps of its held records.
    fn expected_stamp<'s>(&mut self, history: &'s Stamp, lanes: &Lanes) -> Cow<'s, Stamp> {
        let held = self.held_stamp(lanes);
        if held.is_empty() {
            return Cow::Borrowed(history);
        }
        let mut expected = history.clone();
        expected.merge(&held);
        Cow::Owned(expected)
    }

    /// Walks the trace, rebuilding every instance's gate, and checks what
    /// depends on the moment: I1, I3, I4 and I5. Returns the committed
    /// deliveries per task.
    fn replay_trace(&mut self) -> Committed<'a> {
        let trace: &'a [Entry] = self.input.trace;
        let mut instances: FxHashMap<TaskAt, Instance> = FxHashMap::default();
        let mut snapshots: FxHashMap<Arc<TaskId>, Snapshot> = FxHashMap::default();
        let mut open: FxHashMap<TxnRef, Vec<Delivery<'a>>> = FxHashMap::default();
        let mut committed: Committed<'a> = FxHashMap::default();
        // Emptied lists of an ended transaction's deliveries, for the next.
        let mut spare: Vec<Vec<Delivery<'a>>> = Vec::new();
        for entry in trace {
            let step = entry.step;
            match &entry.event {
                Event::TaskStarted { at } => {
                    let tps = self.consumed_tps(&at.task);
                    let ids = tps.iter().map(|tp| self.tps.id(tp)).collect();
                    let snapshot =
                        snapshots
                            .entry(Arc::clone(&at.task))
                            .or_insert_with(|| Snapshot {
                                positions: vec![0; tps.len()],
                                ..Snapshot::default()
                            });
                    let lanes = Lanes {
                        buffers: vec![VecDeque::new(); tps.len()],
                        fetch_next: snapshot.positions.clone(),
                        tps,
                        ids,
                    };
                    let history = snapshot.history.clone();
                    instances.insert(
                        at.clone(),
                        Instance {
                            lanes,
                            history,
                            started_at: entry.now,
                            open_tick: None,
                        },
                    );
                }
                Event::Fetched {
                    at,
                    tp,
                    from,
                    next,
                    records,
                } => {
                    let Some(instance) = instances.get_mut(at) else {
                        continue;
                    };
                    let Some(lane) = instance.lanes.lane(tp) else {
                        continue;
                    };
                    let id = instance.lanes.ids[lane];
                    let buffer = &mut instance.lanes.buffers[lane];
                    let before = buffer.len();
                    buffer.extend(self.tps.committed_offsets(id, *from, *next));
                    let found = buffer.len() - before;
                    if found != *records {
                        self.violation(
                            Invariant::I3,
                            step,
                            format!("{at} fetched {records} records from {tp} [{from}, {next}), but {found} committed records lie there"),
                        )
                        .on(at);
                    }
                    instance.lanes.fetch_next[lane] = *next;
                }
                Event::Delivered {
                    at,
                    txn,
                    tp,
                    offset,
                    sent,
                } => {
                    let delivery = self.on_delivered(step, at, tp, *offset, sent, &mut instances);
                    if let Some(delivery) = delivery {
                        open.entry(*txn)
                            .or_insert_with(|| spare.pop().unwrap_or_default())
                            .push(delivery);
                    }
                }
                Event::TickChecked {
                    at, now, emitted, ..
                } => {
                    self.on_tick_checked(
                        step,
                        at,
                        *now,
                        emitted.as_ref(),
                        &mut instances,
                        &snapshots,
                    );
                }
                Event::Committed { at, txn } => {
                    let deliveries = open.remove(txn).unwrap_or_default();
                    let Some(instance) = instances.get_mut(at) else {
                        recycle(&mut spare, deliveries);
                        continue;
                    };
                    let snapshot = snapshots.entry(Arc::clone(&at.task)).or_default();
                    instance.lanes.positions_into(&mut snapshot.positions);
                    snapshot.history.clone_from(&instance.history);
                    if let Some(tick) = instance.open_tick.take() {
                        snapshot.last_tick_at = Some(tick);
                    }
                    let task = committed.entry(Arc::clone(&at.task)).or_default();
                    let deliveries = if task.is_empty() {
                        std::mem::replace(task, deliveries)
                    } else {
                        task.extend_from_slice(&deliveries);
                        deliveries
                    };
                    recycle(&mut spare, deliveries);
                }
                Event::Aborted { at, txn, .. } => {
                    if let Some(deliveries) = open.remove(txn) {
                        recycle(&mut spare, deliveries);
                    }
                    let Some(instance) = instances.get_mut(at) else {
                        continue;
                    };
                    match snapshots.get(&at.task) {
                        Some(snapshot) => {
                            instance.lanes.rewind(&snapshot.positions);
                            instance.history.clone_from(&snapshot.history);
                        }
                        None => {
                            let positions = vec![0; instance.lanes.tps.len()];
                            instance.lanes.rewind(&positions);
                            instance.history = Stamp::empty();
                        }
                    }
                    instance.open_tick = None;
                }
                Event::Crashed { instance } => {
                    instances.retain(|at, _| at.instance != *instance);
                }
                Event::Fenced { at } => {
                    instances.remove(at);
                }
                _ => {}
            }
        }
        committed
    }

    /// Checks a delivery; returns it unless its instance or lane is unknown
    /// or its stamp does not decode.
    fn on_delivered(
        &mut self,
        step: u64,
        at: &'a TaskAt,
        tp: &'a Tp,
        offset: u64,
        sent: &'a [(Tp, u64)],
        instances: &mut FxHashMap<TaskAt, Instance>,
    ) -> Option<Delivery<'a>> {
        let instance = instances.get_mut(at);
        let lane = instance
            .as_deref()
            .and_then(|instance| instance.lanes.lane(tp));
        let id = match (&instance, lane) {
            (Some(instance), Some(lane)) => instance.lanes.ids[lane],
            _ => self.tps.id(tp),
        };
        // I3: only committed records are delivered.
        let status = self.tps.status(id, offset);
        if status != Some(EntryStatus::Committed) {
            self.violation(
                Invariant::I3,
                step,
                format!("{at} delivered {tp}@{offset}, which is {status:?} in the log"),
            )
            .on(at)
            .about(tp, offset);
        }
        let dead_letters = self
            .input
            .app
            .stage(&at.task.stage)
            .is_some_and(|plan| plan.dead_letter.is_some());
        let stamp = match self.tps.stamp(id, offset) {
            // X5's opt-in: a stamp that does not decode is dead-lettered,
            // with no claims of its own (I10 checks the dead letter).
            None if dead_letters => Some(Rc::clone(&self.tps.empty)),
            stamp => stamp,
        };
        let Some(stamp) = stamp else {
            self.violation(
                Invariant::I1,
                step,
                format!("{at} delivered {tp}@{offset}, whose stamp header does not decode"),
            )
            .on(at)
            .about(tp, offset);
            return None;
        };
        let (instance, lane) = (instance?, lane?);
        // G3: the delivered record is the head of its lane.
        let head = instance.lanes.buffers[lane].front().copied();
        if head != Some(offset) {
            let violation = self
                .violation(
                    Invariant::I2,
                    step,
                    format!("{at} delivered {tp}@{offset}, but the head of {tp} was {head:?}"),
                )
                .on(at)
                .about(tp, offset);
            if let Some(head) = head {
                violation.naming(Relation::Due, tp, head, Some(Gate::Fetched));
            }
        } else {
            instance.lanes.buffers[lane].pop_front();
        }
        // I1: every claim on a consumed tp was delivered before, in this
        // instance's view (the committed history plus its open transaction).
        for claim in stamp.claims() {
            let Some(claimed_lane) = instance.lanes.lane(&claim.tp) else {
                continue;
            };
            let position = instance.lanes.position(claimed_lane);
            let passed = if claimed_lane == lane {
                offset > claim.offset
            } else {
                position > claim.offset
            };
            if !passed {
                let violation = self
                    .violation(
                        Invariant::I1,
                        step,
                        format!("{at} delivered {tp}@{offset} before its claim {claim} was delivered (position of {} was {position})", claim.tp),
                    )
                    .on(at)
                    .about(tp, offset)
                    .stamped(&stamp);
                // Every claim, with what the gate had done with it: the
                // unresolved one is why, the others are its context.
                for other in stamp.claims() {
                    let relation = if other == claim {
                        Relation::Unresolved
                    } else {
                        Relation::Claim
                    };
                    let gate = instance.lanes.gate(other, Some((lane, offset)));
                    violation.naming(relation, &other.tp, other.offset, gate);
                }
            }
        }
        instance.history.merge(&stamp);
        instance.history.claim(tp, offset);
        // I5 (G5, exact): every emission carries the history merged with the
        // stamps of the held records.
        let (history, lanes) = (&instance.history, &instance.lanes);
        let mut expected: Option<Cow<Stamp>> = None;
        for (sent_tp, sent_offset) in sent {
            if sent_tp.topic.as_str().ends_with("-state-changelog") {
                continue;
            }
            let expected = expected.get_or_insert_with(|| self.expected_stamp(history, lanes));
            let sent_id = self.tps.id(sent_tp);
            // The expected stamp claims the delivered record and its causes
            // (the history merged them), so an emission carrying it is right.
            if self.tps.carries(sent_id, *sent_offset, expected) {
                continue;
            }
            let actual = self.tps.stamp(sent_id, *sent_offset);
            let actual: &Stamp = actual.as_deref().unwrap_or(&self.tps.empty);
            let mut inherited = (*stamp).clone();
            inherited.claim(tp, offset);
            let message = if !actual.dominates(&inherited) {
                format!("{at} emitted {sent_tp}@{sent_offset} while delivering {tp}@{offset} with stamp {actual}, which does not claim the delivered record and its causes {inherited}")
            } else if *actual != **expected {
                format!("{at} emitted {sent_tp}@{sent_offset} while delivering {tp}@{offset} with stamp {actual}; the history merged with the held records is {expected}")
            } else {
                continue;
            };
            let difference = stamp_difference(actual, expected);
            let actual = actual.clone();
            let violation = self
                .violation(Invariant::I5, step, message)
                .on(at)
                .about(sent_tp, *sent_offset)
                .stamped(&actual)
                .naming(Relation::Delivering, tp, offset, None);
            for (relation, claim) in difference {
                let gate = lanes.gate(&claim, None);
                violation.naming(relation, &claim.tp, claim.offset, gate);
            }
        }
        Some(Delivery {
            step,
            at,
            tp,
            id,
            offset,
            sent,
        })
    }

    fn on_tick_checked(
        &mut self,
        step: u64,
        at: &TaskAt,
        now: i64,
        emitted: Option<&(Tp, u64)>,
        instances: &mut FxHashMap<TaskAt, Instance>,
        snapshots: &FxHashMap<Arc<TaskId>, Snapshot>,
    ) {
        let Some(interval) = self.tick_interval(&at.task) else {
            return;
        };
        let Some(instance) = instances.get_mut(at) else {
            return;
        };
        // I4: the last tick is the open transaction's, else the committed one,
        // else the task's start.
        let committed_tick = snapshots
            .get(&at.task)
            .and_then(|snapshot| snapshot.last_tick_at);
        let since = instance
            .open_tick
            .or(committed_tick)
            .unwrap_or(instance.started_at);
        let due = now - since >= interval;
        match (due, emitted) {
            (true, None) => {
                self.violation(
                    Invariant::I4,
                    step,
                    format!("{at} emitted no tick at {now}, though the last tick (or start) was at {since} and the interval is {interval} ms: an interval was lost"),
                )
                .on(at);
            }
            (false, Some((tp, offset))) => {
                self.violation(
                    Invariant::I4,
                    step,
                    format!("{at} emitted tick {tp}@{offset} at {now}, only {} ms after the last at {since} (interval {interval} ms)", now - since),
                )
                .on(at)
                .about(tp, *offset);
            }
            _ => {}
        }
        let Some((tp, offset)) = emitted else { return };
        instance.open_tick = Some(now);
        self.check_tick_record(step, at, now, tp, *offset);
        // I5: a tick carries exactly the history merged with the held stamps.
        let expected = self.expected_stamp(&instance.history, &instance.lanes);
        let id = self.tps.id(tp);
        // The expected stamp claims the history (it merged it).
        if self.tps.carries(id, *offset, &expected) {
            return;
        }
        let actual = self.tps.stamp(id, *offset);
        let actual: &Stamp = actual.as_deref().unwrap_or(&self.tps.empty);
        let message = if !actual.dominates(&instance.history) {
            format!("{at} emitted tick {tp}@{offset} with stamp {actual}, which does not claim the task's history {}", instance.history)
        } else if *actual != *expected {
            format!("{at} emitted tick {tp}@{offset} with stamp {actual}; the history merged with the held records is {expected}")
        } else {
            return;
        };
        let difference = stamp_difference(actual, &expected);
        let actual = actual.clone();
        let violation = self
            .violation(Invariant::I5, step, message)
            .on(at)
            .about(tp, *offset)
            .stamped(&actual);
        for (relation, claim) in difference {
            let gate = instance.lanes.gate(&claim, None);
            violation.naming(relation, &claim.tp, claim.offset, gate);
        }
    }

    /// I4 (T4): a tick lands on the task's own partition of its stage's tick
    /// topic, without a key, and carries the world's clock at the poll as
    /// its time, in its value (8 bytes, big-endian) and as its record
    /// timestamp. The partition comes from the application and the task, the
    /// time from the world's clock: neither is taken from the core.
    fn check_tick_record(&mut self, step: u64, at: &TaskAt, now: i64, tp: &Tp, offset: u64) {
        let own = self
            .input
            .app
            .stage(&at.task.stage)
            .and_then(|plan| plan.tick_topic.clone())
            .map(|topic| Tp::new(topic, at.task.partition));
        if own.as_ref() != Some(tp) {
            let own = own.map_or_else(|| "none".to_string(), |own| own.to_string());
            self.violation(
                Invariant::I4,
                step,
                format!("{at} emitted a tick to {tp}@{offset}, but its own tick partition is {own} (T4)"),
            )
            .on(at)
            .about(tp, offset);
        }
        let id = self.tps.id(tp);
        let Some(data) = self.tps.data(id, offset) else {
            self.violation(
                Invariant::I4,
                step,
                format!("{at} emitted a tick to {tp}@{offset}, where the log holds no record"),
            )
            .on(at)
            .about(tp, offset);
            return;
        };
        let value_ok = data.value.as_deref() == Some(&now.to_be_bytes()[..]);
        if data.key.is_some() || data.timestamp != now || !value_ok {
            let value = data.value.as_deref().map(<[u8]>::len).unwrap_or(0);
            self.violation(
                Invariant::I4,
                step,
                format!(
                    "{at} emitted tick {tp}@{offset} at wall-clock {now}, but the record has {} key, timestamp {} and a {value}-byte value{} (T4: null key, the emission time as timestamp and as 8-byte value)",
                    if data.key.is_some() { "a" } else { "no" },
                    data.timestamp,
                    if value_ok { " holding that time" } else { " not holding that time" },
                ),
            )
            .on(at)
            .about(tp, offset);
        }
    }

    /// I2: each task's committed deliveries of each consumed tp are exactly
    /// a prefix of that tp's committed records, in order, once each.
    fn check_committed_histories(&mut self, committed: &Committed<'a>) {
        let tasks: Vec<TaskId> = self.input.assembly.task_ids();
        for task in tasks {
            let deliveries = committed_of(committed, &task);
            for tp in self.consumed_tps(&task) {
                let end = self.input.cluster.high_watermark(&tp).unwrap_or(0);
                let id = self.tps.id(&tp);
                let mut records = self.tps.committed_offsets(id, 0, end);
                let delivered = deliveries.iter().filter(|delivery| delivery.id == id);
                for delivery in delivered {
                    let expected = records.next();
                    if expected != Some(delivery.offset) {
                        let message = match expected {
                            Some(expected) if delivery.offset > expected => format!("task {task} skipped {tp}@{expected}: its committed history delivers {tp}@{} next", delivery.offset),
                            Some(expected) => format!("task {task} delivered {tp}@{} again (or out of order) where {tp}@{expected} was due", delivery.offset),
                            None => format!("task {task} delivered {tp}@{}, beyond the committed records of {tp}", delivery.offset),
                        };
                        let violation = self
                            .violation(Invariant::I2, delivery.step, message)
                            .on(delivery.at)
                            .about(&tp, delivery.offset);
                        if let Some(expected) = expected {
                            violation.naming(Relation::Due, &tp, expected, None);
                        }
                        break;
                    }
                }
            }
        }
    }

    /// I5 (G4, G7): the history a task committed in its checkpoint is the
    /// merge of the stamps of its committed deliveries plus a claim on each:
    /// what a restarted task resumes from, so a history cut short (a lost
    /// claim on a wide application) is seen even before a restart.
    fn check_committed_checkpoints(&mut self, committed: &Committed<'a>) {
        let tasks: Vec<TaskId> = self.input.assembly.task_ids();
        for task in tasks {
            let plan = self
                .input
                .app
                .stage(&task.stage)
                .expect("tasks belong to stages");
            let Some(checkpoint) = self.consumed_tps(&task).iter().find_map(|tp| {
                let offset = self.input.cluster.committed(&plan.group, tp)?;
                parsley::task::Checkpoint::decode(&offset.metadata).ok()
            }) else {
                continue;
            };
            let deliveries = committed_of(committed, &task);
            let mut expected = Stamp::empty();
            // The first delivery whose stamp or claim the history lost.
            let mut lost: Option<(&Delivery<'a>, Rc<Stamp>)> = None;
            for delivery in deliveries {
                // A stamp that does not decode is I1's to report.
                let Some(stamp) = self.tps.stamp(delivery.id, delivery.offset) else {
                    continue;
                };
                let mut caused = (*stamp).clone();
                caused.merge(&Stamp::from_claims([Claim::new(
                    delivery.tp.clone(),
                    delivery.offset,
                )]));
                if lost.is_none() && !checkpoint.history.dominates(&caused) {
                    lost = Some((delivery, Rc::clone(&stamp)));
                }
                expected.merge(&caused);
            }
            if checkpoint.history != expected {
                // Dated at the delivery whose cause was lost, if one was.
                let step = lost
                    .as_ref()
                    .map(|(delivery, _)| delivery.step)
                    .or_else(|| deliveries.last().map(|delivery| delivery.step))
                    .unwrap_or(0);
                let violation = self
                    .violation(
                        Invariant::I5,
                        step,
                        format!(
                            "task {task}: the committed history {} is not the merge of the stamps of its committed deliveries plus a claim on each, {expected} (G4, G7)",
                            checkpoint.history
                        ),
                    )
                    .of_task(&task);
                if let Some((delivery, stamp)) = lost {
                    violation
                        .on(delivery.at)
                        .about(delivery.tp, delivery.offset)
                        .stamped(&stamp)
                        .naming(Relation::Delivering, delivery.tp, delivery.offset, None);
                }
            }
        }
    }

    /// I6 and I7: replays the stages' pure logic over each task's committed
    /// deliveries, and compares the state with the committed changelog and
    /// the emissions with the committed outputs; every committed output must
    /// come from a committed delivery.
    fn check_outputs_and_state(&mut self, committed: &Committed<'a>) {
        // Per tp number, by offset: written by a committed delivery or tick.
        let mut accounted: Vec<Vec<bool>> = Vec::new();
        let mut account = |tps: &mut Tps<'a>, tp: &Tp, offset: u64| {
            let id = tps.id(tp);
            if accounted.len() <= id {
                accounted.resize(id + 1, Vec::new());
            }
            let marks = &mut accounted[id];
            let index = offset as usize;
            if marks.len() <= index {
                let end = tps.log(id).map_or(0, |log| log.high_watermark() as usize);
                marks.resize(end.max(index + 1), false);
            }
            marks[index] = true;
        };
        let app: &'a App = self.input.app;
        for task in self.input.assembly.task_ids() {
            let plan = app.stage(&task.stage).expect("tasks belong to stages");
            let tick_topic = plan.tick_topic.as_ref();
            // Compared whole, and slot by slot in key order only on a
            // mismatch: a hash map does.
            let mut slots: FxHashMap<SlotKey, Bytes> = FxHashMap::default();
            let deliveries = committed_of(committed, &task);
            for delivery in deliveries {
                for (tp, offset) in delivery.sent {
                    account(&mut self.tps, tp, *offset);
                }
                let Some(record) = self.record(delivery.id, delivery.offset) else {
                    continue;
                };
                let is_tick = tick_topic == Some(&delivery.tp.topic);
                let tick = match is_tick {
                    true => match parsley::task::tick_of(&record) {
                        Some(tick) => Some(tick),
                        None => continue,
                    },
                    false => None,
                };
                // K2: a timer service's tick reads every key slot, and its
                // changes are to those (`other_slots`), not to the tick slot.
                let over_slots = match tick {
                    Some(tick) if plan.stage.timer_service().is_some() => {
                        let current: Vec<(SlotKey, &[u8])> = slots
                            .iter()
                            .map(|(slot, bytes)| (slot.clone(), &bytes[..]))
                            .collect();
                        Some(plan.stage.replay_tick_over_slots(&current, tick))
                    }
                    _ => None,
                };
                let slot = if is_tick {
                    SlotKey::Tick
                } else {
                    SlotKey::for_key(record.data.key.as_ref())
                };
                let slot = slots.entry(slot);
                let state = match &slot {
                    MapEntry::Occupied(slot) => Some(&slot.get()[..]),
                    MapEntry::Vacant(_) => None,
                };
                let replayed = match (over_slots, tick) {
                    (Some(replayed), _) => replayed,
                    (None, Some(tick)) => plan.stage.replay_tick(state, tick),
                    (None, None) => {
                        plan.stage
                            .replay_record(&delivery.tp.topic, state, delivery.tp, &record)
                    }
                };
                if let Some(dead_letter) = &plan.dead_letter {
                    let wrote_dead_letter =
                        delivery.sent.iter().any(|(tp, _)| tp.topic == *dead_letter);
                    match &replayed {
                        Err(error) => {
                            // Refused: a dead letter and nothing else, and
                            // no slot change (the fold goes on without it).
                            let error = error.clone();
                            self.check_dead_letter(&task, dead_letter, delivery, &record, &error);
                            continue;
                        }
                        Ok(_) if wrote_dead_letter => {
                            self.violation(
                                Invariant::I10,
                                delivery.step,
                                format!(
                                    "task {task} dead-lettered {}@{}, which its logic accepts",
                                    delivery.tp, delivery.offset
                                ),
                            )
                            .on(delivery.at)
                            .about(delivery.tp, delivery.offset);
                            continue;
                        }
                        Ok(_) => {}
                    }
                }
                let replayed = match replayed {
                    Ok(replayed) => replayed,
                    Err(error) => {
                        self.violation(Invariant::I6, delivery.step, format!("task {task} committed the delivery of {}@{}, whose logic fails: {error}", delivery.tp, delivery.offset))
                            .on(delivery.at)
                            .about(delivery.tp, delivery.offset);
                        continue;
                    }
                };
                match (replayed.slot, slot) {
                    (SlotChange::Set(bytes), MapEntry::Occupied(mut slot)) => {
                        slot.insert(bytes);
                    }
                    (SlotChange::Set(bytes), MapEntry::Vacant(slot)) => {
                        slot.insert(bytes);
                    }
                    (SlotChange::Deleted, MapEntry::Occupied(slot)) => {
                        slot.remove();
                    }
                    (SlotChange::Unchanged | SlotChange::Deleted, _) => {}
                }
                for (slot, change) in replayed.other_slots {
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
                self.compare_emissions(&task, delivery, &replayed.emissions);
            }
            if let Some(changelog) = &plan.changelog {
                let step = deliveries.last().map_or(0, |delivery| delivery.step);
                self.compare_state(&task, changelog, &slots, step);
            }
        }
        // Every committed record a task wrote must come from a committed
        // delivery (outputs, changelogs) or a committed tick check.
        for entry in self.input.trace {
            if let Event::TickChecked {
                emitted: Some((tp, offset)),
                ..
            } = &entry.event
            {
                let id = self.tps.id(tp);
                if self.tps.status(id, *offset) == Some(EntryStatus::Committed) {
                    account(&mut self.tps, tp, *offset);
                }
            }
        }
        let written: BTreeSet<TopicName> = self
            .input
            .app
            .stages()
            .iter()
            .flat_map(|plan| {
                plan.stage
                    .sinks()
                    .iter()
                    .map(|sink| sink.name.clone())
                    .chain(plan.changelog.clone())
                    .chain(plan.dead_letter.clone())
            })
            .collect();
        let dead_letter_topics: BTreeSet<TopicName> = app
            .stages()
            .iter()
            .filter_map(|plan| plan.dead_letter.clone())
            .collect();
        for topic in written {
            let partitions = self
                .input
                .assembly
                .partitions_of(topic.as_str())
                .unwrap_or(0);
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                let id = self.tps.id(&tp);
                let Some(log) = self.tps.log(id) else {
                    continue;
                };
                let marks = accounted.get(id).map_or(&[][..], Vec::as_slice);
                let unaccounted: Vec<u64> = log
                    .read_committed()
                    .map(|(offset, _)| offset)
                    .filter(|&offset| !marks.get(offset as usize).copied().unwrap_or(false))
                    .collect();
                let invariant = if dead_letter_topics.contains(&topic) {
                    Invariant::I10
                } else {
                    Invariant::I7
                };
                for offset in unaccounted {
                    let writer = self.writer_of(&tp, offset);
                    let step = writer.map_or(0, |entry| entry.step);
                    let violation = self
                        .violation(
                            invariant,
                            step,
                            format!(
                                "{tp}@{offset} is committed but no committed delivery wrote it"
                            ),
                        )
                        .about(&tp, offset);
                    if let Some(Event::Delivered {
                        at,
                        tp: delivered,
                        offset: delivered_offset,
                        ..
                    }) = writer.map(|entry| &entry.event)
                    {
                        violation.on(at).naming(
                            Relation::Delivering,
                            delivered,
                            *delivered_offset,
                            None,
                        );
                    }
                }
            }
        }
    }

    /// I11 (K2), from the committed logs alone, for every timer service: each
    /// request of its committed history (below its group's committed offset)
    /// that it accepts has exactly one committed fire once it is due (a
    /// committed tick of that history claims it and is at or past its time;
    /// pending timers are fine), at a record timestamp not before its time,
    /// with a stamp that claims the request and its causes; no fire lacks
    /// such a request. The service's pure logic only reads a request's time
    /// and encodes the fire it asks for (`Stage::replay_record`,
    /// `Stage::replay_tick_over_slots`), since its topics' codecs are the
    /// user's.
    fn check_timers(&mut self) {
        /// A request the service accepted, and what it asks for.
        struct Asked {
            task: TaskId,
            tp: Tp,
            offset: u64,
            time: i64,
            /// A committed tick at or past its time claims it.
            due: bool,
        }
        let app: &'a App = self.input.app;
        let last_step = self.input.trace.last().map_or(0, |entry| entry.step);
        for plan in app.stages() {
            let Some(timer) = plan.stage.timer_service() else {
                continue;
            };
            let partitions = |topic: &TopicName| {
                self.input
                    .assembly
                    .partitions_of(topic.as_str())
                    .unwrap_or(0)
            };
            // By the fire's key and value bytes: the requests asking for it,
            // in (partition, offset) order.
            let mut asked: BTreeMap<(Option<Bytes>, Option<Bytes>), Vec<Asked>> = BTreeMap::new();
            for partition in 0..partitions(&timer.requests) {
                let task = TaskId {
                    stage: plan.name().into(),
                    partition,
                };
                let tp = Tp::new(timer.requests.clone(), partition);
                let id = self.tps.id(&tp);
                let end = self
                    .input
                    .cluster
                    .committed(&plan.group, &tp)
                    .map_or(0, |position| position.offset);
                // The committed ticks of the task's history: how far each
                // claims the request partition, and its time.
                let mut ticks: Vec<(u64, i64)> = Vec::new();
                if let Some(tick_topic) = &plan.tick_topic {
                    let tick_tp = Tp::new(tick_topic.clone(), partition);
                    let tick_id = self.tps.id(&tick_tp);
                    let tick_end = self
                        .input
                        .cluster
                        .committed(&plan.group, &tick_tp)
                        .map_or(0, |position| position.offset);
                    for offset in self.tps.committed_offsets(tick_id, 0, tick_end) {
                        let Some(data) = self.tps.data(tick_id, offset) else {
                            continue;
                        };
                        let time = data.timestamp;
                        let claimed = self
                            .tps
                            .stamp(tick_id, offset)
                            .and_then(|stamp| stamp.offset(&tp));
                        if let Some(claimed) = claimed {
                            ticks.push((claimed, time));
                        }
                    }
                }
                for offset in self.tps.committed_offsets(id, 0, end) {
                    let Some(record) = self.record(id, offset) else {
                        continue;
                    };
                    // Refused requests (no key, a value that does not
                    // decode, a time in the past) ask for nothing.
                    let Ok(replayed) =
                        plan.stage
                            .replay_record(&timer.requests, None, &tp, &record)
                    else {
                        continue;
                    };
                    let (Some(key), SlotChange::Set(pending)) = (&record.data.key, &replayed.slot)
                    else {
                        continue;
                    };
                    let Ok(time) = <[u8; 8]>::try_from(&pending[..]).map(i64::from_be_bytes) else {
                        continue;
                    };
                    let slot = [(SlotKey::Key(key.clone()), &pending[..])];
                    let Ok(fired) = plan
                        .stage
                        .replay_tick_over_slots(&slot, parsley::Tick::new(time))
                    else {
                        continue;
                    };
                    let Some(Ok((fire_key, fire_value))) =
                        fired.emissions.first().map(|fire| fire.encoded())
                    else {
                        continue;
                    };
                    let due = ticks
                        .iter()
                        .any(|(claimed, at)| *claimed >= offset && *at >= time);
                    asked
                        .entry((fire_key.cloned(), Some(fire_value.clone())))
                        .or_default()
                        .push(Asked {
                            task: task.clone(),
                            tp: tp.clone(),
                            offset,
                            time,
                            due,
                        });
                }
            }
            // Every committed fire, matched in order to a request asking
            // for it.
            let mut matched: BTreeMap<(Option<Bytes>, Option<Bytes>), usize> = BTreeMap::new();
            for partition in 0..partitions(&timer.fires) {
                let tp = Tp::new(timer.fires.clone(), partition);
                let id = self.tps.id(&tp);
                let Some(log) = self.tps.log(id) else {
                    continue;
                };
                for (offset, data) in log.read_committed() {
                    let wanted = (data.key.clone(), data.value.clone());
                    let count = matched.entry(wanted.clone()).or_default();
                    let index = *count;
                    *count += 1;
                    let requests = asked.get(&wanted).map_or(&[][..], Vec::as_slice);
                    let key = data.key.as_ref().map_or("no key".to_string(), |key| {
                        format!("key {}", parsley::text::bytes_for_humans(key))
                    });
                    let writer = self.writer_of(&tp, offset);
                    let step = writer.map_or(last_step, |entry| entry.step);
                    let at = writer.and_then(|entry| entry.event.task_at());
                    let Some(request) = requests.get(index) else {
                        let message = match requests.first() {
                            Some(first) => format!(
                                "{tp}@{offset} fires {key} at {} again: {} committed request(s) ask for it ({}@{} first), and the fires before it answered them all (a duplicate fire)",
                                first.time,
                                requests.len(),
                                first.tp,
                                first.offset
                            ),
                            None => format!(
                                "{tp}@{offset} ({key}) is a fire of timer service {} that no committed request of its committed history asks for (an invented fire)",
                                plan.name()
                            ),
                        };
                        let violation = self
                            .violation(Invariant::I11, step, message)
                            .about(&tp, offset);
                        if let Some(at) = at {
                            violation.on(at);
                        }
                        continue;
                    };
                    let (request_tp, request_offset, time) =
                        (request.tp.clone(), request.offset, request.time);
                    if data.timestamp < time {
                        let message = format!(
                            "{tp}@{offset} fires {request_tp}@{request_offset} ({key}, time {time}) with record timestamp {}: {} ms before its due time",
                            data.timestamp,
                            time - data.timestamp
                        );
                        let violation = self
                            .violation(Invariant::I11, step, message)
                            .about(&tp, offset);
                        if let Some(at) = at {
                            violation.on(at);
                        }
                    }
                    let request_id = self.tps.id(&request_tp);
                    let mut inherited = self
                        .tps
                        .stamp(request_id, request_offset)
                        .map_or_else(Stamp::empty, |stamp| (*stamp).clone());
                    inherited.claim(&request_tp, request_offset);
                    let actual = self.tps.stamp(id, offset);
                    let actual: &Stamp = actual.as_deref().unwrap_or(&self.tps.empty);
                    if !actual.dominates(&inherited) {
                        let actual = actual.clone();
                        let message = format!(
                            "{tp}@{offset}, the fire of {request_tp}@{request_offset}, has stamp {actual}, which does not claim the request and its causes {inherited} (G5)"
                        );
                        let violation = self
                            .violation(Invariant::I11, step, message)
                            .about(&tp, offset)
                            .stamped(&actual);
                        if let Some(at) = at {
                            violation.on(at);
                        }
                    }
                }
            }
            // Every due request fired.
            for (wanted, requests) in &asked {
                let fired = matched.get(wanted).copied().unwrap_or(0);
                let Some(request) = requests.iter().skip(fired).find(|request| request.due) else {
                    continue;
                };
                let key = wanted.0.as_ref().map_or("no key".to_string(), |key| {
                    format!("key {}", parsley::text::bytes_for_humans(key))
                });
                let message = format!(
                    "task {}: timer request {}@{} ({key}, time {}) is in its committed history and due (a committed tick at or past its time claims it), but no committed fire on {} answers it ({fired} of {} requests for it fired)",
                    request.task,
                    request.tp,
                    request.offset,
                    request.time,
                    timer.fires,
                    requests.len()
                );
                let (task, tp, offset) = (request.task.clone(), request.tp.clone(), request.offset);
                // At the request's last delivery: the committed one.
                let delivered =
                    self.input
                        .trace
                        .iter()
                        .rev()
                        .find_map(|entry| match &entry.event {
                            Event::Delivered {
                                at,
                                tp: delivered,
                                offset: delivered_offset,
                                ..
                            } if *delivered == tp && *delivered_offset == offset => {
                                Some((entry.step, at))
                            }
                            _ => None,
                        });
                let step = delivered.map_or(last_step, |(step, _)| step);
                let violation = self
                    .violation(Invariant::I11, step, message)
                    .of_task(&task)
                    .about(&tp, offset);
                if let Some((_, at)) = delivered {
                    violation.on(at);
                }
            }
        }
    }

    /// I10 over every committed record of every dead-letter topic: it reads
    /// as a dead letter, and names a record no other committed dead letter
    /// names (exactly once).
    fn check_dead_letter_logs(&mut self) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            let Some(topic) = &plan.dead_letter else {
                continue;
            };
            let partitions = self
                .input
                .assembly
                .partitions_of(topic.as_str())
                .unwrap_or(0);
            let mut named: BTreeMap<(Tp, u64), (Tp, u64)> = BTreeMap::new();
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                let id = self.tps.id(&tp);
                let Some(log) = self.tps.log(id) else {
                    continue;
                };
                for (offset, data) in log.read_committed() {
                    match parsley::DeadLetter::from_record(data) {
                        Err(error) => {
                            self.violation(
                                Invariant::I10,
                                0,
                                format!("{tp}@{offset} on dead-letter topic {topic} is not a dead letter: {error}"),
                            )
                            .about(&tp, offset);
                        }
                        Ok(letter) => {
                            let source = (letter.tp.clone(), letter.offset);
                            if let Some(first) = named.insert(source, (tp.clone(), offset)) {
                                self.violation(
                                    Invariant::I10,
                                    0,
                                    format!("{}@{} is dead-lettered twice in the committed logs: at {}@{} and {tp}@{offset}", letter.tp, letter.offset, first.0, first.1),
                                )
                                .about(&tp, offset)
                                .naming(Relation::Delivering, &letter.tp, letter.offset, None);
                            }
                        }
                    }
                }
            }
        }
    }

    /// I10 for one committed delivery of a record the logic refuses, in a
    /// stage with X5's opt-in: it wrote one record, on the task's partition
    /// of the dead-letter topic, with the refused key and value and headers
    /// naming its stage, tp and offset; no emission and no changelog record.
    fn check_dead_letter(
        &mut self,
        task: &TaskId,
        dead_letter: &TopicName,
        delivery: &Delivery<'a>,
        record: &ConsumedRecord,
        error: &str,
    ) {
        let delivered = format!("{}@{}", delivery.tp, delivery.offset);
        let expected_tp = Tp::new(dead_letter.clone(), task.partition);
        let problem = match delivery.sent {
            [] => Some(format!("task {task} committed the delivery of {delivered}, which its logic refuses ({error}), but wrote no dead letter")),
            [(tp, offset)] if *tp == expected_tp => {
                let id = self.tps.id(tp);
                match self.tps.data(id, *offset).map(parsley::DeadLetter::from_record) {
                    None => Some(format!("task {task}: the dead letter {tp}@{offset} of {delivered} is not in the log")),
                    Some(Err(not)) => Some(format!("task {task}: {tp}@{offset}, written for {delivered}, is not a dead letter: {not}")),
                    Some(Ok(letter)) => {
                        if letter.tp != *delivery.tp || letter.offset != delivery.offset {
                            Some(format!("task {task}: the dead letter {tp}@{offset} of {delivered} names {}@{}", letter.tp, letter.offset))
                        } else if *letter.stage != *task.stage {
                            Some(format!("task {task}: the dead letter {tp}@{offset} of {delivered} names stage {:?}", letter.stage))
                        } else if letter.key != record.data.key || letter.value != record.data.value {
                            Some(format!("task {task}: the dead letter {tp}@{offset} does not hold the key and value of {delivered}"))
                        } else if letter.kind == parsley::DeadLetterKind::Skipped {
                            Some(format!("task {task}: {delivered} is dead-lettered as skipped, but the simulation skips nothing"))
                        } else {
                            None
                        }
                    }
                }
            }
            sent => Some(format!(
                "task {task} committed the delivery of {delivered}, which its logic refuses ({error}); it must write one dead letter to {expected_tp} and nothing else, but wrote {}",
                sent.iter().map(|(tp, offset)| format!("{tp}@{offset}")).collect::<Vec<_>>().join(", ")
            )),
        };
        if let Some(message) = problem {
            self.violation(Invariant::I10, delivery.step, message)
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
        }
    }

    /// The delivery at which the trace shows `tp@offset` being written.
    fn writer_of(&self, tp: &Tp, offset: u64) -> Option<&'a Entry> {
        self.input.trace.iter().find(|entry| match &entry.event {
            Event::Delivered { sent, .. } => sent
                .iter()
                .any(|(sent_tp, sent_offset)| sent_tp == tp && *sent_offset == offset),
            _ => false,
        })
    }

    fn compare_emissions(
        &mut self,
        task: &TaskId,
        delivery: &Delivery,
        expected: &[parsley::Emission],
    ) {
        let sent = delivery.sent;
        let actual = || {
            sent.iter()
                .filter(|(tp, _)| !tp.topic.as_str().ends_with("-state-changelog"))
        };
        let describe = |emissions: &[parsley::Emission]| {
            emissions
                .iter()
                .map(|emission| format!("{emission:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let count = actual().count();
        if count != expected.len() {
            let message = format!(
                "task {task}: delivering {}@{} committed {} records, but its logic emits [{}]",
                delivery.tp,
                delivery.offset,
                count,
                describe(expected)
            );
            self.violation(Invariant::I7, delivery.step, message)
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
            return;
        }
        for ((tp, offset), emission) in actual().zip(expected) {
            let id = self.tps.id(tp);
            let Some(data) = self.tps.data(id, *offset) else {
                continue;
            };
            let Ok((key, value)) = emission.encoded() else {
                continue;
            };
            let same = tp.topic == *emission.topic()
                && data.key.as_ref() == key
                && data.value.as_ref() == Some(value);
            if !same {
                self.violation(
                    Invariant::I7,
                    delivery.step,
                    format!("task {task}: delivering {}@{} committed {tp}@{offset}, but its logic emits {emission:?}", delivery.tp, delivery.offset),
                )
                .on(delivery.at)
                .about(tp, *offset)
                .naming(Relation::Delivering, delivery.tp, delivery.offset, None);
            }
        }
    }

    /// `step` is that of the task's last committed delivery: the state is
    /// compared once, at the end.
    fn compare_state(
        &mut self,
        task: &TaskId,
        changelog: &TopicName,
        slots: &FxHashMap<SlotKey, Bytes>,
        step: u64,
    ) {
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
                            parsley::text::bytes_for_humans(bytes)
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

    /// I8: once faults and inputs stopped, the world quiesced within its
    /// budget, nothing is held, and every committed record of every consumed
    /// tp was delivered — except behind a task that stopped on a poison
    /// record, which must sit exactly at that record.
    fn check_liveness(&mut self, committed: &Committed<'a>) {
        let last_step = self.input.trace.last().map_or(0, |entry| entry.step);
        if !self.input.quiesced {
            self.violation(
                Invariant::I8,
                last_step,
                format!(
                    "the world did not quiesce within {} liveness steps",
                    self.input.liveness_steps
                ),
            );
            return;
        }
        let mut stopped: HashMap<TaskId, (Tp, u64)> = HashMap::new();
        for entry in self.input.trace {
            if let Event::TaskStopped { at, tp, offset, .. } = &entry.event {
                stopped.insert((*at.task).clone(), (tp.clone(), *offset));
            }
        }
        for task in self.input.assembly.task_ids() {
            let deliveries = committed_of(committed, &task);
            for tp in self.consumed_tps(&task) {
                let end = self.input.cluster.high_watermark(&tp).unwrap_or(0);
                let id = self.tps.id(&tp);
                let delivered = deliveries
                    .iter()
                    .filter(|delivery| delivery.id == id)
                    .count();
                let undelivered = self.tps.committed_offsets(id, 0, end).nth(delivered);
                let Some(undelivered) = undelivered else {
                    continue;
                };
                // I2: the committed position never passes a committed record
                // the committed history has not delivered (that record would
                // be lost: no restart goes back for it), stopped task or not.
                let group = self.input.app.group_of(&task.stage).unwrap_or_default();
                if let Some(position) = self.input.cluster.committed(group, &tp) {
                    if position.offset > undelivered {
                        self.violation(
                            Invariant::I2,
                            last_step,
                            format!("task {task}: the committed position of {tp} is {}, past {tp}@{undelivered}, which its committed history never delivered", position.offset),
                        )
                        .of_task(&task)
                        .about(&tp, undelivered);
                        continue;
                    }
                }
                match stopped.get(&task) {
                    Some((poison_tp, poison)) if *poison_tp == tp && *poison == undelivered => {}
                    Some(_) => {}
                    None => {
                        let records = self.tps.committed_offsets(id, 0, end).count();
                        self.violation(
                            Invariant::I8,
                            last_step,
                            format!("task {task} never delivered {tp}@{undelivered} ({delivered} of {records} committed records delivered)"),
                        )
                        .of_task(&task)
                        .about(&tp, undelivered);
                    }
                }
            }
        }
    }
}
