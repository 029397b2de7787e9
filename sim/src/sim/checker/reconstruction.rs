//! The shared reconstruction of what happened and what was committed: the
//! tps and their logs ([`Tps`]), each task instance's gate ([`Lanes`],
//! [`Instance`]), each task's committed snapshot ([`Snapshot`]) and its
//! committed deliveries ([`Committed`]), rebuilt by one walk over the trace
//! ([`Checker::replay_trace`]) that asks the oracles of the moment (I1 to I5)
//! about each fetch, delivery and tick on the way.

use std::borrow::Cow;
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use parsley::header::{self, STAMP_HEADER};
use parsley::TaskId;
use parsley::{App, Claim, Stamp, TopicName, Tp};
use parsley::{ConsumedRecord, RecordData};

use crate::model::{Cluster, EntryStatus, LogView};
use crate::sim::world::trace::{Entry, Event, TaskAt, TxnRef};
use rustc_hash::FxHashMap;

use super::order::Waits;
use super::{Checker, Gate};

/// Every tp the checker looks at, numbered on first sight, with its log
/// (looked up once) and the stamps of its records (decoded once).
pub(super) struct Tps<'a> {
    pub(super) cluster: &'a Cluster,
    /// Per topic name, the numbers of its tps: (partition, number).
    pub(super) topics: Vec<(TopicName, Vec<(u32, usize)>)>,
    pub(super) logs: Vec<Option<LogView<'a>>>,
    /// Per tp, whether a stage consumes it: only then are its stamps looked
    /// up again after they are checked.
    pub(super) consumed: Vec<bool>,
    /// The topics the stages consume.
    pub(super) consumed_topics: Vec<TopicName>,
    /// Per tp, by offset: `None` until looked at, then the decoded stamp
    /// (`None` when the header does not decode).
    pub(super) stamps: Vec<Vec<Option<Option<Rc<Stamp>>>>>,
    pub(super) empty: Rc<Stamp>,
    /// Scratch space for canonical encodings of expected stamps.
    pub(super) encoded: Vec<u8>,
}

impl<'a> Tps<'a> {
    pub(super) fn new(cluster: &'a Cluster, app: &App) -> Self {
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

    pub(super) fn id(&mut self, tp: &Tp) -> usize {
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

    pub(super) fn log(&self, id: usize) -> Option<LogView<'a>> {
        self.logs[id]
    }

    pub(super) fn status(&self, id: usize, offset: u64) -> Option<EntryStatus> {
        self.logs[id]?.status(offset)
    }

    /// The data record at `offset`, whatever its status.
    pub(super) fn data(&self, id: usize, offset: u64) -> Option<&'a RecordData> {
        self.logs[id]?.record(offset)
    }

    /// The committed data records of the tp numbered `id` in `[from, to)`,
    /// progress records (V4) left out: no task delivers them.
    pub(super) fn committed_offsets(
        &self,
        id: usize,
        from: u64,
        to: u64,
    ) -> impl Iterator<Item = u64> + 'a {
        self.log(id).into_iter().flat_map(move |log| {
            log.committed_offsets(from, to)
                .filter(move |&offset| !log.record(offset).is_some_and(header::is_progress))
        })
    }

    /// How many committed records, progress records included, the tp
    /// numbered `id` holds in `[from, to)`: what a fetch there returns.
    pub(super) fn committed_count(&self, id: usize, from: u64, to: u64) -> usize {
        self.log(id)
            .map_or(0, |log| log.committed_offsets(from, to).count())
    }

    /// The task that wrote a record of a topic region stages write, from
    /// its `parsley-epoch` header (V3); `None` for a record without one.
    pub(super) fn writer(&self, id: usize, offset: u64) -> Option<(&'a str, u32)> {
        let value = self.data(id, offset)?.header(header::EPOCH_HEADER)?;
        written_epoch(value).map(|(_, writer)| writer)
    }

    /// V3, computed here: the epoch of each committed record of the tp
    /// numbered `id` as a source of the application, its partition's
    /// highest timestamp so far over `epoch_ms`, in offset order.
    pub(super) fn source_epochs(&self, id: usize, epoch_ms: i64) -> Vec<(u64, i64)> {
        let mut running = i64::MIN;
        self.log(id)
            .into_iter()
            .flat_map(|log| log.read_committed())
            .map(|(offset, data)| {
                running = running.max(data.timestamp.div_euclid(epoch_ms));
                (offset, running)
            })
            .collect()
    }

    /// The stamp a record carries in the log (empty without a header; `None`
    /// when the header does not decode or there is no such data record).
    pub(super) fn stamp(&mut self, id: usize, offset: u64) -> Option<Rc<Stamp>> {
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
    pub(super) fn carries(&mut self, id: usize, offset: u64, expected: &Stamp) -> bool {
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

/// A `parsley-epoch` or `parsley-progress` header's
/// `"<epoch> <partition> <stage>"` (V3, V4): the epoch, and the writing
/// task as stage and partition.
pub(super) fn written_epoch(value: &[u8]) -> Option<(i64, (&str, u32))> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.splitn(3, ' ');
    let epoch = parts.next()?.parse().ok()?;
    let partition = parts.next()?.parse().ok()?;
    let stage = parts.next()?;
    Some((epoch, (stage, partition)))
}

/// A task instance's gate as the checker rebuilds it.
#[derive(Clone, Default)]
pub(super) struct Lanes {
    pub(super) tps: Vec<Tp>,
    /// The tps' numbers in [`Tps`].
    pub(super) ids: Vec<usize>,
    pub(super) buffers: Vec<VecDeque<u64>>,
    pub(super) fetch_next: Vec<u64>,
    /// On a path to a consistent view: lanes are delivered per writer,
    /// out of offset order (V4), and per lane, the offsets past its
    /// position already delivered, which a re-read after a rewind does
    /// not deliver again.
    pub(super) by_writer: Option<Vec<std::collections::BTreeSet<u64>>>,
}

impl Lanes {
    pub(super) fn position(&self, lane: usize) -> u64 {
        self.buffers[lane]
            .front()
            .copied()
            .unwrap_or(self.fetch_next[lane])
    }

    pub(super) fn lane(&self, tp: &Tp) -> Option<usize> {
        self.tps.iter().position(|known| known == tp)
    }

    /// Whether a claim on `offset` of `lane` is resolved: the position is
    /// past it, or, delivering by writer (V4), the offset itself was
    /// delivered.
    pub(super) fn passed(&self, lane: usize, offset: u64) -> bool {
        offset < self.position(lane)
            || self
                .by_writer
                .as_ref()
                .is_some_and(|delivered| delivered[lane].contains(&offset))
    }

    /// `offset` of `lane` was delivered: off its buffer, and remembered
    /// while past the position.
    pub(super) fn take(&mut self, lane: usize, offset: u64) {
        let buffer = &mut self.buffers[lane];
        if let Some(at) = buffer.iter().position(|buffered| *buffered == offset) {
            buffer.remove(at);
        }
        let position = self.position(lane);
        if let Some(delivered) = &mut self.by_writer {
            let delivered = &mut delivered[lane];
            delivered.insert(offset);
            delivered.retain(|offset| *offset >= position);
        }
    }

    pub(super) fn positions_into(&self, positions: &mut Vec<u64>) {
        positions.clear();
        positions.extend((0..self.tps.len()).map(|lane| self.position(lane)));
    }

    /// What the gate had done with the record `claim` names, for a claim on
    /// one of its tps. `delivering` is the lane and offset being delivered:
    /// its lane has passed only the offsets before it.
    pub(super) fn gate(&self, claim: &Claim, delivering: Option<(usize, u64)>) -> Option<Gate> {
        let lane = self.lane(&claim.tp)?;
        let passed = match delivering {
            Some((delivering, offset)) if delivering == lane && self.by_writer.is_none() => {
                offset > claim.offset
            }
            _ => self.passed(lane, claim.offset),
        };
        Some(if passed {
            Gate::Delivered
        } else if self.fetch_next[lane] > claim.offset {
            Gate::Fetched
        } else {
            Gate::NotFetched
        })
    }

    pub(super) fn rewind(&mut self, positions: &[u64], delivered: Option<&[BTreeSet<u64>]>) {
        for buffer in &mut self.buffers {
            buffer.clear();
        }
        self.fetch_next.copy_from_slice(positions);
        if let Some(by_writer) = &mut self.by_writer {
            for (lane, ahead) in by_writer.iter_mut().enumerate() {
                ahead.clear();
                if let Some(delivered) = delivered {
                    ahead.clone_from(&delivered[lane]);
                }
            }
        }
    }
}

/// The committed snapshot of a task, as the checker recomputes it.
#[derive(Clone, Default)]
pub(super) struct Snapshot {
    pub(super) positions: Vec<u64>,
    pub(super) history: Stamp,
    pub(super) last_tick_at: Option<i64>,
    /// Delivering by writer (V4): per lane, the offsets past the position
    /// the committed history delivered.
    pub(super) delivered: Vec<BTreeSet<u64>>,
}

pub(super) struct Instance {
    pub(super) lanes: Lanes,
    pub(super) history: Stamp,
    pub(super) started_at: i64,
    /// The tick emitted in the open transaction, if any.
    pub(super) open_tick: Option<i64>,
    /// Delivering by writer (V4): per lane, the offsets past the position
    /// that this instance's last commit (or its start) had delivered. An
    /// abort returns the instance's task to its own last commit: a zombie's
    /// is not the one another instance made since.
    pub(super) committed_delivered: Vec<BTreeSet<u64>>,
    /// G9's waits, for a stage that delivers in timestamp order (I16).
    pub(super) waits: Option<Waits>,
}

impl Snapshot {
    /// The instance's transaction committed: its positions, history and
    /// open tick are the task's committed ones now.
    fn commit(&mut self, instance: &mut Instance) {
        instance.lanes.positions_into(&mut self.positions);
        self.history.clone_from(&instance.history);
        if let Some(delivered) = &instance.lanes.by_writer {
            self.delivered.clone_from(delivered);
            instance.committed_delivered.clone_from(delivered);
        }
        if let Some(tick) = instance.open_tick.take() {
            self.last_tick_at = Some(tick);
        }
    }
}

impl Instance {
    /// The instance's transaction aborted: it returns to the task's
    /// committed snapshot (the start of every tp and an empty history
    /// without one), its buffers emptied and its open tick forgotten.
    fn abort_to(&mut self, snapshot: Option<&Snapshot>) {
        match snapshot {
            Some(snapshot) => {
                let delivered =
                    (!self.committed_delivered.is_empty()).then_some(&self.committed_delivered[..]);
                self.lanes.rewind(&snapshot.positions, delivered);
                self.history.clone_from(&snapshot.history);
            }
            None => {
                let positions = vec![0; self.lanes.tps.len()];
                self.lanes.rewind(&positions, None);
                self.history = Stamp::empty();
            }
        }
        self.open_tick = None;
    }
}

/// A delivery in a transaction, waiting to learn whether it commits; it
/// points into the trace.
#[derive(Clone, Copy)]
pub(super) struct Delivery<'a> {
    pub(super) step: u64,
    pub(super) at: &'a TaskAt,
    pub(super) tp: &'a Tp,
    /// `tp`'s number in [`Tps`].
    pub(super) id: usize,
    pub(super) offset: u64,
    pub(super) sent: &'a [(Tp, u64)],
    /// On the last delivery of each committed transaction: the changelog
    /// records its commit sent, one per slot the transaction changed (S5).
    pub(super) commit: Option<&'a [(Tp, u64)]>,
}

impl Delivery<'_> {
    /// Whether the delivery dead-lettered its record (X5's opt-in): it
    /// wrote to `plan`'s dead-letter topic, and had no other effect.
    pub(super) fn dead_lettered(&self, plan: &parsley::StagePlan) -> bool {
        plan.dead_letter
            .as_ref()
            .is_some_and(|dlq| self.sent.iter().any(|(tp, _)| tp.topic == *dlq))
    }
}

/// Per task, its committed deliveries in committed order.
pub(super) type Committed<'a> = FxHashMap<Arc<TaskId>, Vec<Delivery<'a>>>;

/// Keeps an emptied list of deliveries for reuse.
pub(super) fn recycle<'a>(spare: &mut Vec<Vec<Delivery<'a>>>, mut deliveries: Vec<Delivery<'a>>) {
    if deliveries.capacity() > 0 {
        deliveries.clear();
        spare.push(deliveries);
    }
}

/// A task's committed deliveries.
pub(super) fn committed_of<'c, 'a>(
    committed: &'c Committed<'a>,
    task: &TaskId,
) -> &'c [Delivery<'a>] {
    committed.get(task).map_or(&[], Vec::as_slice)
}

impl<'a> Checker<'a> {
    /// An operator's model check, for every task of `stage`: a fresh model
    /// of the task (`model`), then `check` of each of its committed
    /// deliveries in committed order over it. A task is reported once:
    /// its deliveries stop at the first that `check` reports (returns
    /// false), as later ones follow from it.
    pub(super) fn check_each_task<M>(
        &mut self,
        committed: &Committed<'a>,
        stage: &str,
        mut model: impl FnMut() -> M,
        mut check: impl FnMut(&mut Self, &TaskId, &Delivery<'a>, &mut M) -> bool,
    ) {
        // A consistent view writes its outputs at its commits, the last of
        // each key per epoch (V5), not at each delivery: I7 checks them
        // against its logic and I18 against a cut of the sources, in place
        // of the operator's check of each delivery's outputs.
        let is_view = self
            .input
            .app
            .stage(stage)
            .and_then(|plan| plan.region.as_ref())
            .is_some_and(|region| region.is_view);
        if is_view {
            return;
        }
        for task in self.input.assembly.task_ids() {
            if &*task.stage != stage {
                continue;
            }
            let mut state = model();
            for delivery in committed_of(committed, &task) {
                if !check(self, &task, delivery, &mut state) {
                    break;
                }
            }
        }
    }

    /// The record at `offset` of the tp numbered `id` in the log, whatever
    /// its status.
    pub(super) fn record(&self, id: usize, offset: u64) -> Option<ConsumedRecord> {
        let data = self.tps.data(id, offset)?.clone();
        Some(ConsumedRecord { offset, data })
    }

    pub(super) fn consumed_tps(&self, task: &TaskId) -> Vec<Tp> {
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

    pub(super) fn tick_interval(&self, task: &TaskId) -> Option<i64> {
        let plan = self.input.app.stage(&task.stage)?;
        Some(plan.stage.ticks()?.interval.as_millis() as i64)
    }

    /// The held records of an instance's gate: buffered records with a claim
    /// on a consumed tp that the lane's position has not passed (G2).
    pub(super) fn held_stamp(&mut self, lanes: &Lanes) -> Stamp {
        let mut merged = Stamp::empty();
        for lane in 0..lanes.tps.len() {
            for &offset in &lanes.buffers[lane] {
                let Some(stamp) = self.tps.stamp(lanes.ids[lane], offset) else {
                    continue;
                };
                let held = stamp.claims().iter().any(|claim| {
                    lanes
                        .lane(&claim.tp)
                        .is_some_and(|index| !lanes.passed(index, claim.offset))
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
    pub(super) fn expected_stamp<'s>(
        &mut self,
        history: &'s Stamp,
        lanes: &Lanes,
    ) -> Cow<'s, Stamp> {
        let held = self.held_stamp(lanes);
        if held.is_empty() {
            return Cow::Borrowed(history);
        }
        let mut expected = history.clone();
        expected.merge(&held);
        Cow::Owned(expected)
    }

    /// A task instance started at `now`: its gate starts from the task's
    /// committed snapshot (the start of every consumed tp without one),
    /// its buffers empty.
    fn start_instance(
        &mut self,
        task: &Arc<TaskId>,
        now: i64,
        snapshots: &mut FxHashMap<Arc<TaskId>, Snapshot>,
    ) -> Instance {
        let tps = self.consumed_tps(task);
        let ids = tps.iter().map(|tp| self.tps.id(tp)).collect();
        let snapshot = snapshots
            .entry(Arc::clone(task))
            .or_insert_with(|| Snapshot {
                positions: vec![0; tps.len()],
                ..Snapshot::default()
            });
        let by_writer = self
            .input
            .app
            .stage(&task.stage)
            .is_some_and(|plan| plan.region.is_some())
            .then(|| match snapshot.delivered.len() == tps.len() {
                true => snapshot.delivered.clone(),
                false => vec![BTreeSet::new(); tps.len()],
            });
        let lanes = Lanes {
            buffers: vec![VecDeque::new(); tps.len()],
            fetch_next: snapshot.positions.clone(),
            tps,
            ids,
            by_writer,
        };
        let waits = self
            .input
            .app
            .stage(&task.stage)
            .and_then(|plan| Waits::of(plan, &lanes));
        Instance {
            committed_delivered: lanes.by_writer.clone().unwrap_or_default(),
            waits,
            lanes,
            history: snapshot.history.clone(),
            started_at: now,
            open_tick: None,
        }
    }

    /// Walks the trace, rebuilding every instance's gate, and checks what
    /// depends on the moment: I1, I3, I4 and I5. Returns the committed
    /// deliveries per task.
    pub(super) fn replay_trace(&mut self) -> Committed<'a> {
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
                    let instance = self.start_instance(&at.task, entry.now, &mut snapshots);
                    instances.insert(at.clone(), instance);
                }
                Event::Fetched {
                    at,
                    tp,
                    from,
                    next,
                    records,
                    log_end,
                    visible_end,
                } => {
                    let Some(instance) = instances.get_mut(at) else {
                        continue;
                    };
                    let Some(lane) = instance.lanes.lane(tp) else {
                        continue;
                    };
                    let id = instance.lanes.ids[lane];
                    let delivered = instance
                        .lanes
                        .by_writer
                        .as_ref()
                        .map(|delivered| &delivered[lane]);
                    let buffer = &mut instance.lanes.buffers[lane];
                    // What the committed history delivered already is not
                    // delivered again (V5).
                    buffer.extend(
                        self.tps
                            .committed_offsets(id, *from, *next)
                            .filter(|offset| delivered.is_none_or(|ahead| !ahead.contains(offset))),
                    );
                    let found = self.tps.committed_count(id, *from, *next);
                    self.check_fetched(step, at, tp, (*from, *next), *records, found);
                    instance.lanes.fetch_next[lane] = *next;
                    if let Some(waits) = &mut instance.waits {
                        waits.fetched(lane, *log_end, *visible_end);
                    }
                }
                Event::Withheld { at } => {
                    if let Some(instance) = instances.get_mut(at) {
                        if let Some(waits) = &mut instance.waits {
                            waits.asked(&instance.lanes, entry.now);
                        }
                    }
                }
                Event::Delivered {
                    at,
                    txn,
                    tp,
                    offset,
                    sent,
                } => {
                    let delivery =
                        self.on_delivered((step, entry.now), at, tp, *offset, sent, &mut instances);
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
                Event::Committed { at, txn, sent } => {
                    let mut deliveries = open.remove(txn).unwrap_or_default();
                    if let Some(last) = deliveries.last_mut() {
                        last.commit = Some(sent);
                    }
                    let Some(instance) = instances.get_mut(at) else {
                        recycle(&mut spare, deliveries);
                        continue;
                    };
                    let snapshot = snapshots.entry(Arc::clone(&at.task)).or_default();
                    snapshot.commit(instance);
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
                    instance.abort_to(snapshots.get(&at.task));
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

    /// The delivery at which the trace shows `tp@offset` being written.
    pub(super) fn writer_of(&self, tp: &Tp, offset: u64) -> Option<&'a Entry> {
        self.input.trace.iter().find(|entry| match &entry.event {
            Event::Delivered { sent, .. } => sent
                .iter()
                .any(|(sent_tp, sent_offset)| sent_tp == tp && *sent_offset == offset),
            _ => false,
        })
    }
}
