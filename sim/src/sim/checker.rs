//! The independent checker: recomputes every guarantee (I1–I8) from the
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
use parsley::{App, Stamp, TopicName, Tp};

use crate::model::{Cluster, EntryStatus, LogView};
use crate::sim::trace::{Entry, Event, TaskAt, TxnRef};
use rustc_hash::FxHashMap;

/// The invariants the checker verifies on every simulated run, and the audit
/// on committed logs. Each is defined, with the rules it rests on, in
/// `docs/RULES.md` under its id (`docs/RULES.md#i1` … `#i9`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// Causal delivery: every committed delivery came after the task had
    /// delivered each claim the record makes on its tps (G2;
    /// docs/RULES.md#i1).
    I1,
    /// Exactly once, in order: every committed record of a consumed tp is
    /// delivered once in the committed history, in offset order (G3, X3;
    /// docs/RULES.md#i2).
    I2,
    /// No aborted reads: nothing from an aborted transaction is delivered or
    /// claimed (docs/RULES.md#i3).
    I3,
    /// Tick durability and cadence: every committed tick is delivered once,
    /// no due tick is skipped and no check emits two (T3, T6;
    /// docs/RULES.md#i4).
    I4,
    /// Stamp inheritance: an emission's stamp dominates the delivered
    /// record's stamp plus a claim on it; a tick's dominates the history
    /// (G5, T4; docs/RULES.md#i5).
    I5,
    /// State: committed key slots and tick slots equal the pure fold of the
    /// committed deliveries (S1, S2, T7; docs/RULES.md#i6).
    I6,
    /// Exactly-once outputs: committed outputs are exactly the emissions of
    /// committed deliveries (X1; docs/RULES.md#i7).
    I7,
    /// Liveness: once faults and inputs stop, the world quiesces with nothing
    /// held and every committed input delivered (G6; docs/RULES.md#i8).
    I8,
    /// Determinism: the same seed or tape gives the same trace, byte for byte
    /// (docs/RULES.md#i9).
    I9,
    /// A property of the simulation's own (its index among the properties,
    /// then the "sometimes" marks): the violation's message names it.
    Property(u16),
}

impl Invariant {
    /// The invariant's short title, as reports print it.
    pub fn title(self) -> &'static str {
        match self {
            Invariant::I1 => "causal delivery",
            Invariant::I2 => "exactly-once, in order",
            Invariant::I3 => "no aborted reads",
            Invariant::I4 => "tick durability and cadence",
            Invariant::I5 => "stamp inheritance",
            Invariant::I6 => "state",
            Invariant::I7 => "exactly-once outputs",
            Invariant::I8 => "liveness",
            Invariant::I9 => "determinism",
            Invariant::Property(_) => "user property",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Invariant::Property(index) = self {
            return write!(f, "user property #{}", index + 1);
        }
        let id = format!("{self:?}");
        write!(
            f,
            "{id} {} (docs/RULES.md#{})",
            self.title(),
            id.to_lowercase()
        )
    }
}

/// One broken guarantee: which, when, and the records involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant.
    pub invariant: Invariant,
    /// The step of the run at which it broke (for the audit, see its docs).
    pub step: u64,
    /// What happened, naming the records involved.
    pub message: String,
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
    checker.check_outputs_and_state(&committed);
    checker.check_liveness(&committed);
    checker.violations.sort_by_key(|violation| violation.step);
    checker.violations
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
    fn violation(&mut self, invariant: Invariant, step: u64, message: String) {
        self.violations.push(Violation {
            invariant,
            step,
            message,
        });
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
                        );
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
        at: &TaskAt,
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
            );
        }
        let Some(stamp) = self.tps.stamp(id, offset) else {
            self.violation(
                Invariant::I1,
                step,
                format!("{at} delivered {tp}@{offset}, whose stamp header does not decode"),
            );
            return None;
        };
        let (instance, lane) = (instance?, lane?);
        // G3: the delivered record is the head of its lane.
        let head = instance.lanes.buffers[lane].front().copied();
        if head != Some(offset) {
            self.violation(
                Invariant::I2,
                step,
                format!("{at} delivered {tp}@{offset}, but the head of {tp} was {head:?}"),
            );
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
                self.violation(
                    Invariant::I1,
                    step,
                    format!("{at} delivered {tp}@{offset} before its claim {claim} was delivered (position of {} was {position})", claim.tp),
                );
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
            if !actual.dominates(&inherited) {
                self.violation(
                    Invariant::I5,
                    step,
                    format!("{at} emitted {sent_tp}@{sent_offset} while delivering {tp}@{offset} with stamp {actual}, which does not claim the delivered record and its causes {inherited}"),
                );
            } else if *actual != **expected {
                self.violation(
                    Invariant::I5,
                    step,
                    format!("{at} emitted {sent_tp}@{sent_offset} while delivering {tp}@{offset} with stamp {actual}; the history merged with the held records is {expected}"),
                );
            }
        }
        Some(Delivery {
            step,
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
            (true, None) => self.violation(
                Invariant::I4,
                step,
                format!("{at} emitted no tick at {now}, though the last tick (or start) was at {since} and the interval is {interval} ms: an interval was lost"),
            ),
            (false, Some((tp, offset))) => self.violation(
                Invariant::I4,
                step,
                format!("{at} emitted tick {tp}@{offset} at {now}, only {} ms after the last at {since} (interval {interval} ms)", now - since),
            ),
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
        if !actual.dominates(&instance.history) {
            self.violation(
                Invariant::I5,
                step,
                format!("{at} emitted tick {tp}@{offset} with stamp {actual}, which does not claim the task's history {}", instance.history),
            );
        } else if *actual != *expected {
            self.violation(
                Invariant::I5,
                step,
                format!("{at} emitted tick {tp}@{offset} with stamp {actual}; the history merged with the held records is {expected}"),
            );
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
            );
        }
        let id = self.tps.id(tp);
        let Some(data) = self.tps.data(id, offset) else {
            self.violation(
                Invariant::I4,
                step,
                format!("{at} emitted a tick to {tp}@{offset}, where the log holds no record"),
            );
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
            );
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
                        self.violation(Invariant::I2, delivery.step, message);
                        break;
                    }
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
                let replayed = if is_tick {
                    let Some(tick) = parsley::task::tick_of(&record) else {
                        continue;
                    };
                    plan.stage.replay_tick(state, tick)
                } else {
                    plan.stage
                        .replay_record(&delivery.tp.topic, state, delivery.tp, &record)
                };
                let replayed = match replayed {
                    Ok(replayed) => replayed,
                    Err(error) => {
                        self.violation(Invariant::I6, delivery.step, format!("task {task} committed the delivery of {}@{}, whose logic fails: {error}", delivery.tp, delivery.offset));
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
            })
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
                for offset in unaccounted {
                    let step = self.step_of_write(&tp, offset);
                    self.violation(
                        Invariant::I7,
                        step,
                        format!("{tp}@{offset} is committed but no committed delivery wrote it"),
                    );
                }
            }
        }
    }

    /// The step at which the trace shows `tp@offset` being written.
    fn step_of_write(&self, tp: &Tp, offset: u64) -> u64 {
        self.input
            .trace
            .iter()
            .find(|entry| match &entry.event {
                Event::Delivered { sent, .. } => sent
                    .iter()
                    .any(|(sent_tp, sent_offset)| sent_tp == tp && *sent_offset == offset),
                _ => false,
            })
            .map_or(0, |entry| entry.step)
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
            self.violation(Invariant::I7, delivery.step, message);
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
                );
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
                            crate::text::bytes_for_humans(bytes)
                        })
                    };
                    let message = format!(
                        "task {task}: committed slot {slot:?} is {} on {tp}, but the fold of its committed deliveries gives {}",
                        render(actual),
                        render(expected)
                    );
                    self.violation(Invariant::I6, step, message);
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
        );
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
                        );
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
                        );
                    }
                }
            }
        }
    }
}
