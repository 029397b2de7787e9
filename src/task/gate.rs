//! The causal gate (G2, G3, G6): one lane per consumed tp, each a queue of
//! fetched, undelivered records in offset order.
//!
//! A lane's *position* is the offset of its first undelivered record, or, when
//! its queue is empty, the consumer's fetch position. Every offset below the
//! position was delivered or was not data (a control marker or an aborted
//! record, which a `read_committed` consumer skips). A claim `(tp, o)` on a
//! consumed tp is therefore resolved exactly when that lane's position is past
//! `o`. Only a lane's head may be delivered (G3): a held head blocks its lane.
//! On a path to a consistent view, a lane is delivered by epoch across the
//! tasks that write it, each writer in offset order (V4): there the gate
//! delivers from within the queue, and a claim resolves once its own offset
//! is delivered.

use std::collections::VecDeque;

use crate::header::{self, HeaderError, STAMP_HEADER};
use crate::record::ConsumedRecord;
use crate::stamp::{Claim, Stamp};
use crate::tp::Tp;

use super::aligned::Tag;

pub(crate) struct Queued {
    pub record: ConsumedRecord,
    /// Decoded when fetched; a decode error makes the record poison when it
    /// reaches the head of its lane.
    pub stamp: Result<Stamp, HeaderError>,
    /// Which fetch brought the record, to tell stale log ends from fresh ones.
    pub fetched_seq: u64,
    /// Whether the stamp claims a tp this task consumes: only such a record
    /// can ever be held (claims elsewhere are carried forward, G2).
    pub claims_consumed: bool,
    /// Its epoch, on a path to a consistent view (V3, V4); 0 elsewhere.
    pub epoch: i64,
    /// Why its epoch header is bad input, when it is (V4).
    pub bad_epoch: Option<Box<str>>,
}

pub(crate) struct Lane {
    pub tp: Tp,
    pub queue: VecDeque<Queued>,
    pub fetch_position: u64,
    /// The tp's log end offset (high watermark) as of fetch `log_end_seq`.
    pub log_end: u64,
    pub log_end_seq: u64,
    /// The end of what a `read_committed` fetch could return, as a driver
    /// last said ([`crate::Task::handle_visible_end`]): G9 waits for a lane
    /// only while its position is short of it.
    pub visible_end: Option<u64>,
    /// The largest offset ever delivered, kept across aborts so that
    /// redeliveries can be counted (T8).
    pub delivered_max: Option<u64>,
}

impl Lane {
    /// The first undelivered offset (see the module doc).
    pub fn position(&self) -> u64 {
        self.queue
            .front()
            .map_or(self.fetch_position, |queued| queued.record.offset)
    }

    /// Whether a claim on `offset` is resolved: the lane's position is
    /// past it (G2: the claim covers every earlier offset too). A task on a
    /// path to a consistent view delivers a lane's writers out of offset
    /// order (V4): there, the claimed offset itself being fetched and no
    /// longer queued resolves it, as the offsets before it may be another
    /// writer's records of a later epoch, no cause of the claim.
    pub fn is_passed(&self, offset: u64, by_writer: bool) -> bool {
        offset < self.position()
            || (by_writer
                && offset < self.fetch_position
                && self
                    .queue
                    .binary_search_by_key(&offset, |queued| queued.record.offset)
                    .is_err())
    }
}

/// Why a lane's head cannot be delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadStatus {
    /// It may be delivered now.
    Deliverable,
    /// Waiting on this claim (G2).
    Held(Claim),
    /// Bad input: it can never be delivered (docs/RULES.md#bad-input).
    Poison(Poison),
}

/// Why a record can never be delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Poison {
    /// Its stamp header does not decode.
    BadStamp(HeaderError),
    /// On a path to a consistent view, its epoch header does not say what
    /// it must (V4).
    BadEpoch(String),
    /// G6: the claim names an offset that cannot ever be delivered here.
    Unresolvable {
        /// The claim.
        claim: Claim,
        /// Why it cannot resolve (G6).
        reason: String,
    },
}

pub(crate) struct Gate {
    pub lanes: Vec<Lane>,
    fetch_seq: u64,
    /// How many queued records claim a consumed tp, so that the stamping
    /// site (G5) looks for held records only when there can be any, instead
    /// of scanning every queued record on every delivery.
    claiming: usize,
    /// Whether lanes are delivered by writer, out of offset order (V4).
    pub by_writer: bool,
}

impl Gate {
    pub fn new(tps: Vec<Tp>) -> Self {
        Gate {
            lanes: tps
                .into_iter()
                .map(|tp| Lane {
                    tp,
                    queue: VecDeque::new(),
                    fetch_position: 0,
                    log_end: 0,
                    log_end_seq: 0,
                    visible_end: None,
                    delivered_max: None,
                })
                .collect(),
            fetch_seq: 0,
            claiming: 0,
            by_writer: false,
        }
    }

    pub fn lane_index(&self, tp: &Tp) -> Option<usize> {
        self.lanes.iter().position(|lane| lane.tp.same(tp))
    }

    /// Queues fetched records. Records must continue the lane's fetch
    /// position in offset order: a driver that hands the gate the same record
    /// twice, or out of order, has a bug that would break G3.
    pub fn push_fetched(
        &mut self,
        index: usize,
        records: impl ExactSizeIterator<Item = ConsumedRecord>,
        next_offset: u64,
        log_end: u64,
        mut tag: impl FnMut(&ConsumedRecord) -> Tag,
    ) {
        self.fetch_seq += 1;
        let seq = self.fetch_seq;
        self.lanes[index].queue.reserve(records.len());
        for record in records {
            let lane = &self.lanes[index];
            assert!(
                record.offset >= lane.fetch_position,
                "{}: fetched offset {} is behind the fetch position {}; the driver must fetch from the position",
                lane.tp,
                record.offset,
                lane.fetch_position
            );
            let (epoch, bad_epoch) = match tag(&record) {
                Tag::Data { epoch } => (epoch, None),
                Tag::Pass => {
                    self.lanes[index].fetch_position = record.offset + 1;
                    continue;
                }
                Tag::Bad(reason) => (i64::MIN, Some(reason.into_boxed_str())),
            };
            let stamp = match record.data.header(STAMP_HEADER) {
                Some(bytes) => header::decode(bytes),
                None => Ok(Stamp::empty()),
            };
            let claims_consumed = stamp.as_ref().is_ok_and(|stamp| {
                stamp
                    .claims()
                    .iter()
                    .any(|claim| self.lane_index(&claim.tp).is_some())
            });
            self.claiming += usize::from(claims_consumed);
            let lane = &mut self.lanes[index];
            lane.fetch_position = record.offset + 1;
            lane.queue.push_back(Queued {
                record,
                stamp,
                fetched_seq: seq,
                claims_consumed,
                epoch,
                bad_epoch,
            });
        }
        let lane = &mut self.lanes[index];
        assert!(
            next_offset >= lane.fetch_position,
            "{}: the consumer's next offset {} is behind the records it returned",
            lane.tp,
            next_offset
        );
        lane.fetch_position = next_offset;
        lane.log_end = log_end;
        lane.log_end_seq = seq;
    }

    /// G2 and G6 for the head of `lane`.
    pub fn head_status(&self, lane: usize) -> Option<HeadStatus> {
        self.status_at(lane, 0)
    }

    /// G2 and G6 for the record queued at `index` of `lane`: its head, or,
    /// on a path to a consistent view, the first record of the lane's
    /// epoch (V4).
    pub fn status_at(&self, lane: usize, index: usize) -> Option<HeadStatus> {
        let own = &self.lanes[lane];
        let head = own.queue.get(index)?;
        if let Some(reason) = &head.bad_epoch {
            return Some(HeadStatus::Poison(Poison::BadEpoch(reason.to_string())));
        }
        let stamp = match &head.stamp {
            Ok(stamp) => stamp,
            Err(error) => return Some(HeadStatus::Poison(Poison::BadStamp(error.clone()))),
        };
        let mut held = None;
        for claim in stamp.claims() {
            let Some(index) = self.lane_index(&claim.tp).or_else(|| {
                // A planted bug may look a claim up by its topic alone.
                crate::mutation::active(crate::mutation::Mutation::GateMatchesTopicOnly)
                    .then(|| {
                        self.lanes
                            .iter()
                            .position(|lane| lane.tp.topic == claim.tp.topic)
                    })
                    .flatten()
            }) else {
                // Not consumed here: carried forward, not waited on (G2).
                continue;
            };
            if crate::mutation::active(crate::mutation::Mutation::GateIgnoresClaims) {
                continue;
            }
            let other = &self.lanes[index];
            if index == lane && claim.offset >= head.record.offset {
                return Some(HeadStatus::Poison(Poison::Unresolvable {
                    claim: claim.clone(),
                    reason: format!(
                        "it is at or beyond the record's own offset {}",
                        head.record.offset
                    ),
                }));
            }
            if other.is_passed(claim.offset, self.by_writer) {
                continue;
            }
            // The claimed record was appended before this one was written, so a
            // log end read after this record was fetched must lie beyond it.
            if claim.offset >= other.log_end && other.log_end_seq > head.fetched_seq {
                return Some(HeadStatus::Poison(Poison::Unresolvable {
                    claim: claim.clone(),
                    reason: format!(
                        "it is at or beyond the log end {} of {}",
                        other.log_end, other.tp
                    ),
                }));
            }
            held.get_or_insert_with(|| claim.clone());
        }
        Some(held.map_or(HeadStatus::Deliverable, HeadStatus::Held))
    }

    /// The first claim of a queued record that is not yet resolved here: the
    /// record is *held* (G2), wherever it sits in its lane.
    pub fn unresolved_claim<'a>(&self, queued: &'a Queued) -> Option<&'a Claim> {
        let stamp = queued.stamp.as_ref().ok()?;
        stamp.claims().iter().find(|claim| {
            self.lane_index(&claim.tp)
                .is_some_and(|index| !self.lanes[index].is_passed(claim.offset, self.by_writer))
        })
    }

    /// Every queued record that is held, in lane order. A record that
    /// claims its own tp at or beyond its own offset is not held but poison
    /// on sight (G6): it can never be delivered, so its claims are not
    /// causes anything waits for, and the stamping site (G5) must not carry
    /// them into emissions made before the task reaches it.
    pub fn held(&self) -> impl Iterator<Item = &Queued> {
        let lanes = match self.claiming {
            0 => &self.lanes[..0],
            _ => &self.lanes[..],
        };
        lanes
            .iter()
            .flat_map(|lane| lane.queue.iter().map(move |queued| (lane, queued)))
            .filter(|(lane, queued)| {
                queued.claims_consumed
                    && self.unresolved_claim(queued).is_some()
                    && !claims_itself_forward(lane, queued)
            })
            .map(|(_, queued)| queued)
    }

    /// Whether no lane holds a record.
    pub fn is_empty(&self) -> bool {
        self.lanes.iter().all(|lane| lane.queue.is_empty())
    }

    /// Takes the record at `index` of `lane` off its queue, once it is
    /// delivered.
    pub fn take(&mut self, lane: usize, index: usize) -> Option<Queued> {
        let queued = self.lanes[lane].queue.remove(index)?;
        self.claiming -= usize::from(queued.claims_consumed);
        Some(queued)
    }

    /// Heads that wait on each other in a cycle can never be delivered (only
    /// forged stamps make one). Follows each held head's claim to the head it
    /// waits for; returns the lane where a cycle closes, the claim, and the
    /// cycle written out.
    pub fn find_cycle(&self) -> Option<(usize, Claim, String)> {
        for start in 0..self.lanes.len() {
            let mut path: Vec<(usize, Claim)> = Vec::new();
            let mut lane = start;
            while path.len() <= self.lanes.len() {
                let Some(HeadStatus::Held(claim)) = self.head_status(lane) else {
                    break;
                };
                let Some(waited) = self.lane_index(&claim.tp) else {
                    break;
                };
                // The claim needs the waited lane's head (or later) delivered.
                if self.lanes[waited]
                    .queue
                    .front()
                    .is_none_or(|head| head.record.offset > claim.offset)
                {
                    break;
                }
                path.push((lane, claim));
                if waited == start {
                    let cycle: Vec<String> = path
                        .iter()
                        .map(|(lane, claim)| {
                            let head = self.lanes[*lane]
                                .queue
                                .front()
                                .expect("a held lane has a head");
                            format!(
                                "{}@{} claims {claim}",
                                self.lanes[*lane].tp, head.record.offset
                            )
                        })
                        .collect();
                    let (_, claim) = path.swap_remove(0);
                    return Some((
                        start,
                        claim,
                        format!("it waits in a cycle: {}", cycle.join(", ")),
                    ));
                }
                lane = waited;
            }
        }
        None
    }

    /// Forgets everything fetched and rewinds every lane to `positions`
    /// (G7: after an abort the task re-consumes from its committed positions).
    pub fn rewind(&mut self, positions: &[u64]) {
        for (lane, &position) in self.lanes.iter_mut().zip(positions) {
            lane.queue.clear();
            lane.fetch_position = position;
        }
        self.claiming = self
            .lanes
            .iter()
            .flat_map(|lane| lane.queue.iter())
            .filter(|queued| queued.claims_consumed)
            .count();
    }
}

/// G6 on sight: `queued`, on `lane`, claims its own tp at or beyond its
/// own offset, which no delivery order can satisfy.
fn claims_itself_forward(lane: &Lane, queued: &Queued) -> bool {
    queued.stamp.as_ref().is_ok_and(|stamp| {
        stamp
            .claims()
            .iter()
            .any(|claim| claim.tp == lane.tp && claim.offset >= queued.record.offset)
    })
}
