//! Aligned epochs (V3–V5): how a task on a path to a consistent view
//! delivers in epoch order, tells its readers how far it has got, and, as
//! a view, releases its outputs at epoch ends.
//!
//! - A record of a source of the application has the epoch of the highest
//!   timestamp of its partition up to it (V3), computed here from the log.
//! - A record a region task wrote carries its epoch and writer in the
//!   `parsley-epoch` header; a *progress record* (`parsley-progress`, no key,
//!   no value) carries a writer's frontier: it will write nothing below it.
//! - The task's *horizon* is the lowest epoch any lane may still fetch; the
//!   epochs below it are closed. It delivers the lowest epoch it holds once
//!   that epoch is closed (V4), and commits only between epochs, when all it
//!   delivered since its last commit is below its *frontier*, the lower of
//!   its horizon and its lowest held epoch (V5): after a restart, what it
//!   re-reads below the committed frontier was delivered already and is
//!   passed over.

use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;

use crate::record::{ConsumedRecord, Header, ProducedRecord, RecordData};
use crate::tp::{TopicName, Tp};

/// The header carrying a region record's epoch and writer:
/// `"<epoch> <partition> <stage>"`.
pub const EPOCH_HEADER: &str = "parsley-epoch";
/// The header of a progress record: `"<frontier> <partition> <stage>"`.
pub const PROGRESS_HEADER: &str = "parsley-progress";
/// The header of a consistent view's output: the cut it is the output at,
/// an epoch in decimal (V5).
pub const CUT_HEADER: &str = "parsley-cut";

/// Whether `record` is a progress record, which no Parsley reader delivers.
pub fn is_progress(record: &RecordData) -> bool {
    record.header(PROGRESS_HEADER).is_some()
}

/// The cut of a consistent view's output (V5), when it has one.
pub fn cut_of(record: &RecordData) -> Option<i64> {
    std::str::from_utf8(record.header(CUT_HEADER)?)
        .ok()?
        .parse()
        .ok()
}

/// What a fetched record is to the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tag {
    /// A record to deliver, of this epoch.
    Data { epoch: i64 },
    /// Passed over: a progress record, or one delivered before the last
    /// commit.
    Pass,
    /// Bad input: its epoch header does not say what it must.
    Bad(String),
}

/// A writer's epoch-carrying header, parsed.
fn parse(value: &[u8]) -> Option<(i64, u32, &str)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.splitn(3, ' ');
    let epoch = parts.next()?.parse().ok()?;
    let partition = parts.next()?.parse().ok()?;
    let stage = parts.next()?;
    Some((epoch, partition, stage))
}

struct Lane {
    /// The stages' tasks that write the lane's topic; empty for a source
    /// of the application.
    writers: Vec<(Arc<str>, u32)>,
    /// A source: the epoch of the last fetched record. Written: each
    /// writer's highest epoch fetched, from a record or its progress.
    bounds: Vec<i64>,
    /// A source: the epoch of the last record before the lane's position,
    /// from which a re-read after a rewind goes on.
    at_position: i64,
    /// After a rewind, how far the lane had fetched when `bounds` were
    /// seen: below it, a writer's bound is only the committed frontier.
    fetched_to: u64,
}

impl Lane {
    fn is_source(&self) -> bool {
        self.writers.is_empty()
    }
}

/// What a commit made durable, in the checkpoint (X1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCheckpoint {
    /// The frontier at the commit: every epoch below it was delivered.
    pub frontier: i64,
    /// Per consumed tp: its source epoch at the position, how far it had
    /// fetched, and its bounds.
    pub lanes: Vec<(i64, u64, Vec<i64>)>,
}

impl EpochCheckpoint {
    /// The checkpoint's text: `e<frontier>` then `/<at>,<fetched>,<b>.<b>…`
    /// per lane.
    pub fn encode_into(&self, out: &mut String) {
        let _ = write!(out, "e{}", self.frontier);
        for (at, fetched, bounds) in &self.lanes {
            let _ = write!(out, "/{at},{fetched},");
            for (index, bound) in bounds.iter().enumerate() {
                let _ = write!(out, "{}{bound}", if index == 0 { "" } else { "." });
            }
        }
    }

    /// Reads what [`EpochCheckpoint::encode_into`] wrote.
    pub fn decode(text: &str) -> Result<EpochCheckpoint, String> {
        let bad = || format!("epochs {text:?} do not parse");
        let mut parts = text.strip_prefix('e').ok_or_else(bad)?.split('/');
        let frontier = parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let lanes = parts
            .map(|lane| {
                let mut fields = lane.splitn(3, ',');
                let at = fields.next()?.parse().ok()?;
                let fetched = fields.next()?.parse().ok()?;
                let bounds = fields
                    .next()?
                    .split('.')
                    .map(|bound| bound.parse().ok())
                    .collect::<Option<Vec<i64>>>()?;
                Some((at, fetched, bounds))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?;
        Ok(EpochCheckpoint { frontier, lanes })
    }
}

/// One epoch of a view's held outputs: each with the key it is held
/// under (V5).
type Held = Vec<(Option<Bytes>, ProducedRecord)>;

/// A task's part in a consistent view's region.
pub(crate) struct Aligned {
    epoch_ms: i64,
    /// `" <partition> <stage>"`: this task as a writer, after an epoch.
    me: String,
    lanes: Vec<Lane>,
    /// The epoch of the last delivery since the last commit.
    pub delivered: Option<i64>,
    committed: EpochCheckpoint,
    /// Where the task writes progress records: every partition of its
    /// sinks that region stages read.
    progress: Vec<Tp>,
    /// The view's outputs held until their epoch ends (V5): per epoch, in
    /// epoch order, the last one per tp and key, in the order each was
    /// first held. `None` for a task that is not a view.
    held: Option<Vec<(i64, Held)>>,
}

impl Aligned {
    /// The task of `stage`'s partition `partition`, consuming one lane per
    /// entry of `writers` (a source's writers, empty for a source of the
    /// application), writing progress to `progress`.
    pub fn new(
        epoch_ms: i64,
        is_view: bool,
        stage: &str,
        partition: u32,
        writers: Vec<Vec<(Arc<str>, u32)>>,
        progress: Vec<Tp>,
    ) -> Aligned {
        let lanes = writers
            .into_iter()
            .map(|writers| Lane {
                bounds: vec![i64::MIN; writers.len().max(1)],
                writers,
                at_position: i64::MIN,
                fetched_to: 0,
            })
            .collect();
        Aligned {
            epoch_ms,
            me: format!(" {partition} {stage}"),
            lanes,
            delivered: None,
            committed: EpochCheckpoint {
                frontier: i64::MIN,
                lanes: Vec::new(),
            },
            progress,
            held: is_view.then(Vec::new),
        }
    }

    /// Whether the task is the consistent view itself.
    pub fn is_view(&self) -> bool {
        self.held.is_some()
    }

    /// What `record`, fetched on `lane`, is to the gate; learns the lane's
    /// bounds from it.
    pub fn tag(&mut self, lane: usize, record: &ConsumedRecord) -> Tag {
        let committed = self.committed.frontier;
        let state = &mut self.lanes[lane];
        if let Some(value) = record.data.header(PROGRESS_HEADER) {
            if state.is_source() {
                return Tag::Pass;
            }
            return match writer_of(state, value) {
                Ok((frontier, writer)) => {
                    let bound = &mut state.bounds[writer as usize];
                    *bound = (*bound).max(frontier);
                    Tag::Pass
                }
                Err(reason) => Tag::Bad(format!("its progress header {reason}")),
            };
        }
        if state.is_source() {
            let epoch = record.data.timestamp.div_euclid(self.epoch_ms);
            let epoch = state.bounds[0].max(epoch);
            state.bounds[0] = epoch;
            return Tag::Data { epoch };
        }
        let Some(value) = record.data.header(EPOCH_HEADER) else {
            return Tag::Bad(format!(
                "it has no {EPOCH_HEADER} header, though region stages write its topic (V4)"
            ));
        };
        match writer_of(state, value) {
            Ok((epoch, writer)) => {
                let bound = &mut state.bounds[writer as usize];
                *bound = (*bound).max(epoch);
                if epoch < committed {
                    // Delivered before the last commit (V5).
                    return Tag::Pass;
                }
                Tag::Data { epoch }
            }
            Err(reason) => Tag::Bad(format!("its {EPOCH_HEADER} header {reason}")),
        }
    }

    /// The lowest epoch lane `lane` may still fetch, given its fetch
    /// position: every epoch below it is *closed* there.
    fn lane_horizon(&self, lane: usize, fetched: u64) -> i64 {
        let state = &self.lanes[lane];
        if fetched < state.fetched_to {
            // Re-reading after a rewind: the bounds were seen further on.
            return self.committed.frontier;
        }
        state.bounds.iter().copied().min().unwrap_or(i64::MAX)
    }

    /// V4: the lowest epoch among the queued records, and the *horizon*:
    /// the lowest epoch any lane may still fetch. Epochs below the horizon
    /// are closed; the task delivers the lowest queued epoch when it is
    /// closed.
    pub fn epochs<Q>(&self, lanes: impl Iterator<Item = (Q, u64)>) -> (i64, i64)
    where
        Q: Iterator<Item = i64>,
    {
        // A planted bug leaves the last lane out of the horizon.
        let skip_last = crate::mutation::active(crate::mutation::Mutation::CutSkipsLane)
            && self.lanes.len() > 1;
        let mut lowest = i64::MAX;
        let mut horizon = i64::MAX;
        for (lane, (queued, fetched)) in lanes.enumerate() {
            lowest = lowest.min(queued.min().unwrap_or(i64::MAX));
            if !(skip_last && lane == self.lanes.len() - 1) {
                horizon = horizon.min(self.lane_horizon(lane, fetched));
            }
        }
        (lowest, horizon)
    }

    /// A record left lane `lane`'s queue (delivered, or dead-lettered),
    /// with `epoch`.
    pub fn taken(&mut self, lane: usize, epoch: i64) {
        let state = &mut self.lanes[lane];
        if state.is_source() {
            state.at_position = epoch;
        }
    }

    /// The frontier the last commit made durable.
    pub fn committed_frontier(&self) -> i64 {
        self.committed.frontier
    }

    /// V5: whether a commit now would cut between epochs: nothing
    /// delivered since the last commit is of the frontier's epoch or
    /// above.
    pub fn at_epoch_end(&self, frontier: i64) -> bool {
        self.delivered.is_none_or(|epoch| epoch < frontier)
    }

    /// The header a region task's emission carries, for a delivery of
    /// `epoch`.
    pub fn epoch_header(&self, epoch: i64) -> Header {
        Header {
            name: EPOCH_HEADER.into(),
            value: Bytes::from(format!("{epoch}{}", self.me)),
        }
    }

    /// V5: holds one of the view's outputs, emitted by a delivery of
    /// `epoch`, until that epoch ends, in place of an earlier one of its tp
    /// and `key` in the same epoch: the record's own key, or, for a copy a
    /// re-key within the stage made (R3), the key of the record it copies,
    /// so that each row's copy is kept.
    pub fn hold(&mut self, epoch: i64, key: Option<Bytes>, record: ProducedRecord) {
        let held = self.held.as_mut().expect("only a view holds");
        if held.last().is_none_or(|(last, _)| *last != epoch) {
            held.push((epoch, Vec::new()));
        }
        let (_, held) = held.last_mut().expect("pushed above");
        let earlier = held
            .iter()
            .position(|(earlier_key, earlier)| earlier.tp == record.tp && *earlier_key == key);
        match earlier {
            // A planted bug writes the earlier output out too, as if its
            // epoch had ended.
            Some(_) if crate::mutation::active(crate::mutation::Mutation::ViewReleasesEarly) => {
                held.push((key, record));
            }
            Some(at) => held[at] = (key, record),
            None => held.push((key, record)),
        }
    }

    /// What a commit at `frontier` sends before its offsets: the view's
    /// held outputs, each with the cut, and, when the frontier rose, a
    /// progress record to each partition region stages read.
    pub fn prepare_commit(&mut self, frontier: i64, produced: &mut Vec<ProducedRecord>) {
        if let Some(held) = &mut self.held {
            // Epoch by epoch: each output is the view's at the end of its
            // epoch, the cut just above it, so a reader of the view meets
            // every cut it went through, not only the commits'.
            for (epoch, records) in held.drain(..) {
                let cut = Bytes::from(epoch.saturating_add(1).to_string());
                for (_, mut record) in records {
                    record.data.headers.push(Header {
                        name: CUT_HEADER.into(),
                        value: cut.clone(),
                    });
                    produced.push(record);
                }
            }
        }
        if frontier > self.committed.frontier {
            let progress = Bytes::from(format!("{frontier}{}", self.me));
            produced.extend(self.progress.iter().map(|tp| ProducedRecord {
                tp: tp.clone(),
                data: RecordData {
                    key: None,
                    value: None,
                    headers: vec![Header {
                        name: PROGRESS_HEADER.into(),
                        value: progress.clone(),
                    }],
                    timestamp: frontier.saturating_mul(self.epoch_ms).max(0),
                },
            }));
        }
    }

    /// The checkpoint of a commit at `frontier`, with each lane's fetch
    /// position.
    pub fn checkpoint(&self, frontier: i64, fetched: impl Iterator<Item = u64>) -> EpochCheckpoint {
        EpochCheckpoint {
            frontier,
            lanes: self
                .lanes
                .iter()
                .zip(fetched)
                .map(|(lane, fetched)| (lane.at_position, fetched, lane.bounds.clone()))
                .collect(),
        }
    }

    /// The commit of `checkpoint` succeeded.
    pub fn committed(&mut self, checkpoint: EpochCheckpoint) {
        self.committed = checkpoint;
        self.delivered = None;
    }

    /// Back to the last commit (an abort, or a start from `checkpoint`):
    /// the gate re-reads from the committed positions.
    pub fn roll_back(&mut self, checkpoint: Option<EpochCheckpoint>) {
        if let Some(checkpoint) = checkpoint {
            self.committed = checkpoint;
        }
        self.delivered = None;
        if let Some(held) = &mut self.held {
            held.clear();
        }
        for (index, lane) in self.lanes.iter_mut().enumerate() {
            match self.committed.lanes.get(index) {
                Some((at, fetched, bounds)) if bounds.len() == lane.bounds.len() => {
                    lane.at_position = *at;
                    lane.fetched_to = *fetched;
                    lane.bounds.clone_from(bounds);
                    if lane.is_source() {
                        // Re-read from the position: epochs go on from there.
                        lane.bounds[0] = *at;
                    }
                }
                _ => {
                    lane.at_position = i64::MIN;
                    lane.fetched_to = 0;
                    lane.bounds.iter_mut().for_each(|bound| *bound = i64::MIN);
                }
            }
        }
    }
}

/// The epoch and writer a header names, or why it names none of the
/// lane's writers.
fn writer_of(lane: &Lane, value: &[u8]) -> Result<(i64, u32), String> {
    let Some((epoch, partition, stage)) = parse(value) else {
        return Err(format!(
            "{:?} is not \"<epoch> <partition> <stage>\"",
            String::from_utf8_lossy(value)
        ));
    };
    lane.writers
        .iter()
        .position(|(writer, at)| **writer == *stage && *at == partition)
        .map(|writer| (epoch, u32::try_from(writer).expect("few writers")))
        .ok_or_else(|| format!("names task {stage}-{partition}, which does not write this topic"))
}

/// The progress tps of a task: every partition of each of `sinks`.
pub(crate) fn progress_tps(sinks: &[(TopicName, u32)]) -> Vec<Tp> {
    sinks
        .iter()
        .flat_map(|(topic, partitions)| (0..*partitions).map(|p| Tp::new(topic.clone(), p)))
        .collect()
}
