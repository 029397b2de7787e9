//! I18's reference evaluator: what the stages of a consistent view's
//! *region* (every stage on a path from a source topic to the view, V1)
//! compute from source records, evaluated by the checker itself.
//!
//! The reference knows each operator's semantics on its own and calls only
//! the user's logic: a stage of the user's own logic, stateless or
//! stateful, is replayed through its hooks over the slot the reference
//! keeps for the record's key (S1, S2), as I6 replays it; a re-key stage
//! writes the source record's value bytes and timestamp under the key its
//! function selects (`RekeyDecl::key_of`, R2); a re-key within a stage
//! writes each record of its output again under its selected key
//! (`RekeyOutputDecl::key_of`, R3); a table–table join keeps both sides per
//! key itself and asks only the user's joiner for a result
//! (`TableJoinDecl::joined`, J8). A record lands on the partition Kafka's
//! default partitioner gives its key, and the task of that partition
//! delivers it. Every other operator is not evaluated: a region holding
//! one is reported as not judged, never passed.
//!
//! The reference delivers the records of each epoch, in epoch order, one
//! delivery at a time, each topic partition in the order it was written:
//! one order the region's tasks may deliver in. Two such orders
//! ([`Schedule`]) tell a result that depends on how the tasks interleave
//! their lanes within an epoch from one that does not.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use parsley::partition_for;
use parsley::{App, StagePlan};
use parsley::{ConsumedRecord, RecordData, SlotChange, TopicName, Tp};
use parsley::{
    ExpiryDecl, ForeignKeyJoinDecl, JoinDecl, RekeyDecl, RekeyOutputDecl, StreamJoinDecl,
    TableJoinDecl, TableJoinKind, TimerDecl, VersionedJoinDecl, WindowDecl,
};
use rustc_hash::FxHashMap;

/// A record key's bytes; `None` for a null key.
pub(super) type Key = Option<Bytes>;

/// How the reference evaluates one stage of a region.
enum Evaluated<'a> {
    /// The user's own logic, replayed through the stage's hooks.
    Logic,
    /// A re-key stage (R1, R2).
    Rekey(&'a RekeyDecl),
    /// A table–table join (J8).
    TableJoin(&'a TableJoinDecl),
}

struct RegionStage<'a> {
    plan: &'a StagePlan,
    how: Evaluated<'a>,
    /// The re-keys of its outputs within it (R3), done by the reference
    /// whatever the stage is.
    rekeys: Vec<&'a RekeyOutputDecl>,
    /// Whether it is a consistent view itself (one in the region of
    /// another): it writes its outputs at each epoch's end (V5).
    view: bool,
}

/// A consistent view's region, as the reference evaluates it.
pub(super) struct Region<'a> {
    /// The region's stages the reference does not evaluate: with any, the
    /// region is not evaluated.
    pub(super) unevaluated: Vec<Unevaluated>,
    /// The consistent view, when the reference evaluates it: its
    /// emissions are what the evaluation keeps.
    view: Option<usize>,
    stages: Vec<RegionStage<'a>>,
    /// The region's source topics (topics no stage of the application
    /// writes), sorted.
    pub(super) sources: Vec<TopicName>,
    /// Per topic a region stage consumes, the stages that do.
    consumers: FxHashMap<TopicName, Vec<usize>>,
}

/// Why a region is not judged: a stage the reference does not evaluate.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Unevaluated {
    /// The stage.
    pub(super) stage: String,
    /// What it is that the reference does not evaluate.
    pub(super) what: &'static str,
}

/// The stages of `app` on a path from a source topic to the stage `view`,
/// the view included, in the application's order, with the stages among
/// them the reference does not evaluate.
pub(super) fn region<'a>(app: &'a App, view: &str) -> Region<'a> {
    let mut writers: FxHashMap<&TopicName, Vec<&'a StagePlan>> = FxHashMap::default();
    for plan in app.stages() {
        for sink in plan.stage.sinks() {
            writers.entry(&sink.name).or_default().push(plan);
        }
    }
    let mut names: BTreeSet<&str> = BTreeSet::new();
    let mut waiting: Vec<&'a StagePlan> = app.stage(view).into_iter().collect();
    while let Some(plan) = waiting.pop() {
        if !names.insert(plan.name()) {
            continue;
        }
        for source in plan.stage.sources() {
            waiting.extend(writers.get(&source.name).into_iter().flatten().copied());
        }
    }
    let mut stages = Vec::new();
    let mut unevaluated = Vec::new();
    let mut view_index = None;
    for plan in app.stages() {
        if !names.contains(plan.name()) {
            continue;
        }
        match evaluated(plan) {
            Ok(how) => {
                if plan.name() == view {
                    view_index = Some(stages.len());
                }
                let rekeys = plan.stage.hooks().operators::<RekeyOutputDecl>().collect();
                let view = plan.stage.consistent_epoch().is_some();
                stages.push(RegionStage {
                    plan,
                    how,
                    rekeys,
                    view,
                });
            }
            Err(what) => unevaluated.push(Unevaluated {
                stage: plan.name().to_string(),
                what,
            }),
        }
    }
    let mut sources = BTreeSet::new();
    for plan in app.stages() {
        if names.contains(plan.name()) {
            for source in plan.stage.sources() {
                if !writers.contains_key(&source.name) {
                    sources.insert(source.name.clone());
                }
            }
        }
    }
    let mut consumers: FxHashMap<TopicName, Vec<usize>> = FxHashMap::default();
    for (index, stage) in stages.iter().enumerate() {
        for source in stage.plan.stage.sources() {
            consumers
                .entry(source.name.clone())
                .or_default()
                .push(index);
        }
    }
    Region {
        unevaluated,
        view: view_index,
        stages,
        sources: sources.into_iter().collect(),
        consumers,
    }
}

/// How the reference evaluates `plan`, or what it is when the reference
/// does not.
fn evaluated(plan: &StagePlan) -> Result<Evaluated<'_>, &'static str> {
    let hooks = plan.stage.hooks();
    if plan.stage.ticks().is_some() {
        return Err("a stage with ticks (its logic runs on the wall clock, not on the cut)");
    }
    if hooks.operator::<WindowDecl>().is_some() {
        return Err("a windowed aggregation");
    }
    if hooks.operator::<JoinDecl>().is_some() {
        return Err("a stream–table join");
    }
    if hooks.operator::<VersionedJoinDecl>().is_some() {
        return Err("a versioned (as-of) join");
    }
    if hooks.operator::<StreamJoinDecl>().is_some() {
        return Err("a stream–stream join");
    }
    if hooks.operator::<ForeignKeyJoinDecl>().is_some() {
        return Err("a stage of a foreign-key join");
    }
    if hooks.operator::<ExpiryDecl>().is_some() {
        return Err("an expiring fold");
    }
    if hooks.operator::<TimerDecl>().is_some() {
        return Err("a timer service");
    }
    if hooks.record_reads_every_slot() {
        return Err("an operator whose deliveries read every slot");
    }
    if let Some(decl) = hooks.operator::<RekeyDecl>() {
        return Ok(Evaluated::Rekey(decl));
    }
    if let Some(decl) = hooks.operator::<TableJoinDecl>() {
        return match decl.output {
            Some(_) => Ok(Evaluated::TableJoin(decl)),
            None => Err("a table–table join without an output"),
        };
    }
    Ok(Evaluated::Logic)
}

/// A committed record of a source partition and its epoch.
pub(super) struct SourceRecord<'l> {
    pub(super) tp: Tp,
    pub(super) offset: u64,
    pub(super) data: &'l RecordData,
    pub(super) epoch: i64,
}

/// One order the region's tasks may deliver in: each epoch's source
/// records, then everything they cause, before the next epoch's; each
/// topic partition in the order it was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Schedule {
    /// The source partitions in (topic, partition) order, and always the
    /// record written first among the lanes' heads: breadth first.
    OldestFirst,
    /// The source partitions in the reverse order, and always the record
    /// written last among the lanes' heads: each record's effects as deep
    /// as they go before its siblings'.
    NewestFirst,
}

/// A view's emissions for one (topic, key): each one's epoch and value
/// (`None`: a tombstone), in order.
type Emitted = Vec<(i64, Option<Bytes>)>;

/// What the view emitted under the reference, per (topic, key), task by
/// task: each task of a view holds and releases its own emissions (V5),
/// so a key two of its tasks write has an output per task.
#[derive(Default)]
pub(super) struct Outputs {
    emitted: FxHashMap<(TopicName, Key), BTreeMap<u32, Emitted>>,
    /// Deliveries the logic refused (X5: dead-lettered, or the task
    /// stopped): they have no effect.
    pub(super) refused: usize,
}

/// What the view emitted for one (topic, key) at a cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum AtCut {
    /// No emission of an epoch below the cut.
    Nothing,
    /// The value of the last emission of an epoch below the cut.
    Value(Option<Bytes>),
}

impl Outputs {
    /// The view's last emission for `key` on `topic` among those of the
    /// epochs below `cut`: the one of its task `task`, or, when the
    /// writing task is not known, of each task that emitted to the key
    /// (`Nothing` when none did).
    pub(super) fn at(
        &self,
        task: Option<u32>,
        topic: &TopicName,
        key: &Key,
        cut: i64,
    ) -> Vec<AtCut> {
        let last = |emitted: &Emitted| {
            let below = emitted.partition_point(|(epoch, _)| *epoch < cut);
            match below.checked_sub(1) {
                Some(last) => AtCut::Value(emitted[last].1.clone()),
                None => AtCut::Nothing,
            }
        };
        let tasks = self.emitted.get(&(topic.clone(), key.clone()));
        let values: Vec<AtCut> = match task {
            Some(task) => vec![tasks
                .and_then(|tasks| tasks.get(&task))
                .map_or(AtCut::Nothing, last)],
            None => tasks
                .into_iter()
                .flat_map(|tasks| tasks.values())
                .map(last)
                .filter(|value| *value != AtCut::Nothing)
                .collect(),
        };
        match values.is_empty() {
            true => vec![AtCut::Nothing],
            false => values,
        }
    }
}

/// A record in flight in the reference: where it was written, what it
/// holds and the epoch of the source record that caused it.
struct Flow {
    tp: Tp,
    record: ConsumedRecord,
    epoch: i64,
}

/// A key's two sides in a table–table join, each its table's latest value.
#[derive(Clone, Default, PartialEq, Eq)]
struct Sides {
    left: Option<Bytes>,
    right: Option<Bytes>,
}

/// What one delivery writes: (topic, key, value, timestamp) each.
type Written = Vec<(TopicName, Key, Option<Bytes>, i64)>;

/// The reference's state of the region's tasks.
#[derive(Default)]
struct Tasks {
    /// The slots of the stages of user logic: (stage, task, key).
    slots: FxHashMap<(usize, u32, Key), Bytes>,
    /// The sides of the table–table joins: (stage, task, key).
    sides: FxHashMap<(usize, u32, Bytes), Sides>,
    /// The records waiting on each topic partition, each with its place in
    /// the order they were written.
    lanes: BTreeMap<Tp, VecDeque<(u64, Flow)>>,
    written: u64,
    /// The next offset of each derived topic partition, as the reference
    /// numbers its records.
    offsets: FxHashMap<Tp, u64>,
    /// What each task of a view within the region holds until its epoch
    /// ends (V5): per (stage, task), in the order first held, the last
    /// record per (tp, key), a re-keyed copy (R3) under the key of the
    /// record it copies.
    held: BTreeMap<(usize, u32), Vec<Held>>,
}

/// A record a view within the region holds: (tp, the key it is held
/// under), and its key, value and timestamp.
type Held = ((Tp, Key), (Key, Option<Bytes>, i64));

impl Region<'_> {
    /// Evaluates the region over `sources` (sorted by epoch, then topic,
    /// partition and offset) of the epochs below `until`, in the order
    /// `schedule` takes; `partitions` gives each topic's partition count.
    pub(super) fn evaluate(
        &self,
        sources: &[SourceRecord<'_>],
        until: i64,
        partitions: &dyn Fn(&TopicName) -> Option<u32>,
        schedule: Schedule,
    ) -> Outputs {
        let mut outputs = Outputs::default();
        if !self.unevaluated.is_empty() {
            return outputs;
        }
        let mut tasks = Tasks::default();
        let mut at = 0;
        while at < sources.len() && sources[at].epoch < until {
            let epoch = sources[at].epoch;
            let end = at + sources[at..].partition_point(|source| source.epoch == epoch);
            let mut batch: Vec<&SourceRecord<'_>> = sources[at..end].iter().collect();
            if schedule == Schedule::NewestFirst {
                // Partitions in the reverse order, each still in offset order.
                batch.sort_by(|a, b| b.tp.cmp(&a.tp).then(a.offset.cmp(&b.offset)));
            }
            for source in batch {
                let flow = Flow {
                    tp: source.tp.clone(),
                    record: ConsumedRecord {
                        offset: source.offset,
                        data: source.data.clone(),
                    },
                    epoch,
                };
                tasks.enqueue(flow);
            }
            // The epoch's records and all they cause; then what the views
            // within the region held of it, written at its end, and all
            // that causes, until no view holds anything.
            loop {
                while let Some(flow) = tasks.next(schedule) {
                    self.deliver_everywhere(&flow, &mut tasks, &mut outputs, partitions);
                }
                if !tasks.release(epoch) {
                    break;
                }
            }
            at = end;
        }
        outputs
    }

    /// Delivers `flow` to the task of its partition of every region stage
    /// that consumes its topic, and sends on what each writes.
    fn deliver_everywhere(
        &self,
        flow: &Flow,
        tasks: &mut Tasks,
        outputs: &mut Outputs,
        partitions: &dyn Fn(&TopicName) -> Option<u32>,
    ) {
        let Some(consumers) = self.consumers.get(&flow.tp.topic) else {
            return;
        };
        for &index in consumers {
            let Some(written) = self.deliver(index, flow, tasks) else {
                outputs.refused += 1;
                continue;
            };
            let task = flow.tp.partition;
            let stage = &self.stages[index];
            let holds = stage.view && Some(index) != self.view;
            // The key of the record a re-keyed copy (R3) follows.
            let mut copied: Option<Key> = None;
            for (topic, key, value, timestamp) in written {
                if Some(index) == self.view {
                    outputs
                        .emitted
                        .entry((topic.clone(), key.clone()))
                        .or_default()
                        .entry(task)
                        .or_default()
                        .push((flow.epoch, value.clone()));
                }
                let identity = match stage.rekeys.iter().any(|rekey| rekey.repartition == topic) {
                    true => copied.take().unwrap_or_else(|| key.clone()),
                    false => {
                        copied = Some(key.clone());
                        key.clone()
                    }
                };
                if !self.consumers.contains_key(&topic) {
                    continue;
                }
                let Some(count) = partitions(&topic) else {
                    continue;
                };
                let partition = partition_for(key.as_deref(), count, task);
                let tp = Tp::new(topic, partition);
                if holds {
                    let held = tasks.held.entry((index, task)).or_default();
                    let record = (key, value, timestamp);
                    match held
                        .iter_mut()
                        .find(|(at, _)| at.0 == tp && at.1 == identity)
                    {
                        Some((_, earlier)) => *earlier = record,
                        None => held.push(((tp, identity), record)),
                    }
                    continue;
                }
                tasks.write(tp, key, value, timestamp, flow.epoch);
            }
        }
    }

    /// One delivery of `flow` by the task of its partition of stage
    /// `index`: what it writes, or `None` when the logic refuses it (X5).
    fn deliver(&self, index: usize, flow: &Flow, tasks: &mut Tasks) -> Option<Written> {
        let stage = &self.stages[index];
        let written = match &stage.how {
            Evaluated::Logic => self.deliver_logic(index, flow, tasks)?,
            Evaluated::Rekey(decl) => {
                let (tp, record) = (&flow.tp, &flow.record);
                // R2: the source record's value bytes and timestamp under the
                // selected key; a null value is refused.
                let value = record.data.value.clone()?;
                let key = decl.key_of(tp, record).ok()?;
                vec![(
                    decl.repartition.clone(),
                    Some(key),
                    Some(value),
                    record.data.timestamp,
                )]
            }
            Evaluated::TableJoin(decl) => self.deliver_table_join(index, decl, flow, tasks)?,
        };
        if stage.rekeys.is_empty() {
            return Some(written);
        }
        // R3: each record written to a re-keyed output is written again,
        // right after it, under its selected key; a tombstone has no value
        // to select a key from, and refuses the delivery.
        let mut copied = Written::with_capacity(written.len() * 2);
        for (topic, key, value, timestamp) in written {
            let copies = stage
                .rekeys
                .iter()
                .filter(|rekey| rekey.output == topic)
                .map(|rekey| {
                    let value = value.as_ref()?;
                    let selected = rekey.key_of(key.as_ref(), value).ok()?;
                    Some((
                        rekey.repartition.clone(),
                        selected,
                        Some(value.clone()),
                        timestamp,
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            copied.push((topic, key, value, timestamp));
            copied.extend(copies);
        }
        Some(copied)
    }

    /// A stage of the user's own logic: replayed through its hooks over
    /// the slot the reference keeps for the record's key (S1, S2).
    fn deliver_logic(&self, index: usize, flow: &Flow, tasks: &mut Tasks) -> Option<Written> {
        let stage = &self.stages[index];
        let (tp, record) = (&flow.tp, &flow.record);
        let slot = (index, tp.partition, record.data.key.clone());
        let state = tasks.slots.get(&slot).map(|bytes| &bytes[..]);
        let replayed = stage
            .plan
            .stage
            .hooks()
            .replay_record(&tp.topic, state, tp, record)
            .ok()?;
        let mut written = Written::new();
        for emission in &replayed.emissions {
            // The re-keys' copies are the reference's to make.
            if stage
                .rekeys
                .iter()
                .any(|rekey| rekey.repartition == *emission.topic())
            {
                continue;
            }
            let (key, value) = emission.encoded().ok()?;
            let at = emission.timestamp().unwrap_or(record.data.timestamp);
            written.push((emission.topic().clone(), key.cloned(), value.cloned(), at));
        }
        match replayed.slot {
            SlotChange::Set(bytes) => {
                tasks.slots.insert(slot, bytes);
            }
            SlotChange::Deleted => {
                tasks.slots.remove(&slot);
            }
            SlotChange::Unchanged => {}
        }
        Some(written)
    }

    /// A table–table join (J8): the key's sides kept by the reference,
    /// only the result's value from the user's joiner.
    fn deliver_table_join(
        &self,
        index: usize,
        decl: &TableJoinDecl,
        flow: &Flow,
        tasks: &mut Tasks,
    ) -> Option<Written> {
        let (tp, record) = (&flow.tp, &flow.record);
        let output = decl.output.clone()?;
        // J9: a record without a key is refused.
        let key = record.data.key.clone()?;
        let place = (index, tp.partition, key.clone());
        let before = tasks.sides.get(&place).cloned().unwrap_or_default();
        let mut after = before.clone();
        let value = record.data.value.clone();
        let tombstone = value.is_none();
        match tp.topic == decl.left {
            true => after.left = value,
            false => after.right = value,
        }
        // J8: a tombstone of a side without a value changes nothing.
        if after == before && tombstone {
            return Some(Written::new());
        }
        // The joiner decodes both sides: a value its codec refuses refuses
        // the record, the sides unchanged.
        let joined = decl
            .joined(&key, after.left.as_deref(), after.right.as_deref())
            .ok()?;
        let had = has_result(decl.kind, &before);
        let result = match has_result(decl.kind, &after) {
            true => joined,
            false => None,
        };
        let timestamp = record.data.timestamp;
        let written = match result {
            Some(value) => vec![(output, Some(key), Some(value), timestamp)],
            None if had => vec![(output, Some(key), None, timestamp)],
            None => Written::new(),
        };
        match after.left.is_none() && after.right.is_none() {
            true => tasks.sides.remove(&place),
            false => tasks.sides.insert(place, after),
        };
        Some(written)
    }
}

impl Tasks {
    /// A record written to `tp`, next in its partition.
    fn write(&mut self, tp: Tp, key: Key, value: Option<Bytes>, timestamp: i64, epoch: i64) {
        let offset = self.offsets.entry(tp.clone()).or_default();
        let record = ConsumedRecord {
            offset: *offset,
            data: RecordData {
                key,
                value,
                headers: Vec::new(),
                timestamp,
            },
        };
        *offset += 1;
        self.enqueue(Flow { tp, record, epoch });
    }

    /// V5: the views within the region write what they held of `epoch`
    /// at its end; false when none held anything.
    fn release(&mut self, epoch: i64) -> bool {
        let held = std::mem::take(&mut self.held);
        let any = held.values().any(|records| !records.is_empty());
        for records in held.into_values() {
            for ((tp, _), (key, value, timestamp)) in records {
                self.write(tp, key, value, timestamp, epoch);
            }
        }
        any
    }

    fn enqueue(&mut self, flow: Flow) {
        self.written += 1;
        self.lanes
            .entry(flow.tp.clone())
            .or_default()
            .push_back((self.written, flow));
    }

    /// The next record `schedule` delivers: the oldest or the newest head
    /// among the lanes.
    fn next(&mut self, schedule: Schedule) -> Option<Flow> {
        let heads = self
            .lanes
            .iter()
            .filter_map(|(tp, lane)| Some((lane.front()?.0, tp)));
        let tp = match schedule {
            Schedule::OldestFirst => heads.min_by_key(|(written, _)| *written),
            Schedule::NewestFirst => heads.max_by_key(|(written, _)| *written),
        }?
        .1
        .clone();
        let lane = self.lanes.get_mut(&tp)?;
        let (_, flow) = lane.pop_front()?;
        if lane.is_empty() {
            self.lanes.remove(&tp);
        }
        Some(flow)
    }
}

/// J8, as the reference reads it: whether a key with these sides has a
/// result (inner: both, left: a left side, outer: either).
fn has_result(kind: TableJoinKind, sides: &Sides) -> bool {
    let (left, right) = (sides.left.is_some(), sides.right.is_some());
    match kind {
        TableJoinKind::Inner => left && right,
        TableJoinKind::Left => left,
        TableJoinKind::Outer => left || right,
    }
}
