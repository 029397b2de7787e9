//! I14: expiring state (E1–E3), from each task's committed deliveries alone.
//!
//! The checker keeps its own model of every expiring fold's task: where
//! the expiry frontier stands, which keys are live, when each expires and
//! its state (encoded with the state's codec). It uses none of the
//! operator's state, expiry arithmetic or replay: it decides which keys
//! are live itself and folds each record into its key's live state, or
//! into the initial state, itself. Only the user's logic comes from the
//! stage, with its codecs: the initial state and the fold
//! (`ExpiryDecl::initial`, `fold`). A delivery that disagrees has those
//! calls made again (S4, [`super::purity`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::ReplayError;
use parsley::SlotKey;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::Tp;
use parsley::{Expire, ExpiryDecl, Since};

use super::operated::describe;
use super::purity::{Answer, UserCalls};
use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// A live key of the model: when it expires, its state (encoded) and how
/// many records were folded into it since it was created.
struct Live {
    expires_at: i64,
    state: Bytes,
    records: usize,
}

/// A key the open transaction expired: the delivery that moved the
/// frontier to its expiry, and the expiry.
struct Expired {
    key: Bytes,
    expires_at: i64,
    /// The delivery, as the report names it.
    what: String,
    step: u64,
}

/// One task's expiring state, as the checker has it.
struct Model {
    frontier: i64,
    live: BTreeMap<Bytes, Live>,
    /// The keys the deliveries of the open transaction expired.
    expired: Vec<Expired>,
}

impl<'a> Checker<'a> {
    /// I14 (E1–E3) for every expiring fold: each task's committed
    /// deliveries, in committed order, through the checker's own model;
    /// each delivery must emit what the user's fold of the record into the
    /// key's live state (or the initial state) emits, and each transaction's changelog records must delete exactly
    /// the keys its deliveries expired (no earlier, no later). A task is
    /// reported once, at its first wrong delivery or commit.
    pub(super) fn check_expiry(&mut self, committed: &Committed<'a>) {
        let model = || Model {
            frontier: i64::MIN,
            live: BTreeMap::new(),
            expired: Vec::new(),
        };
        self.check_each_operator(
            committed,
            model,
            |checker, plan, decl: &ExpiryDecl, task, delivery, model| {
                let ttl = i64::try_from(decl.ttl.as_millis()).unwrap_or(i64::MAX);
                checker.check_expiry_delivery(plan, decl, ttl, task, delivery, model)
                    && delivery.commit.is_none_or(|sent| {
                        checker.check_expiry_commit(plan, task, delivery, sent, model)
                    })
            },
        );
    }

    /// One committed delivery; false once it is reported.
    fn check_expiry_delivery(
        &mut self,
        plan: &StagePlan,
        decl: &ExpiryDecl,
        ttl: i64,
        task: &TaskId,
        delivery: &Delivery<'a>,
        model: &mut Model,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        if delivery.dead_lettered(plan) {
            return true;
        }
        let is_tick = plan.tick_topic.as_ref() == Some(&delivery.tp.topic);
        let own = match is_tick {
            true => {
                let Some(tick) = parsley::tick_of(&record) else {
                    return true;
                };
                if matches!(decl.expire, Expire::WallClock { .. }) {
                    model.frontier = model.frontier.max(tick.timestamp);
                }
                None
            }
            false => {
                let (Some(key), timestamp) = (record.data.key.clone(), record.data.timestamp)
                else {
                    return true;
                };
                if timestamp < 0 {
                    return true;
                }
                // A record the fold refuses (a codec, a failing fold)
                // changes nothing; I6 and I10 judge its delivery.
                let Ok(initial) = decl.initial() else {
                    return true;
                };
                if decl.fold(&initial, delivery.tp, &record).is_err() {
                    return true;
                }
                if decl.expire == Expire::StreamTime {
                    model.frontier = model.frontier.max(timestamp);
                }
                Some((key, timestamp))
            }
        };
        let what = match &own {
            None => format!("tick {}@{}", delivery.tp, delivery.offset),
            Some((key, timestamp)) => format!(
                "{}@{} (key {}, timestamp {timestamp})",
                delivery.tp,
                delivery.offset,
                bytes_for_humans(key)
            ),
        };
        // E2: every live key the frontier reaches expires now.
        let frontier = model.frontier;
        let expired: Vec<(Bytes, i64)> = model
            .live
            .iter()
            .filter(|(_, live)| live.expires_at <= frontier)
            .map(|(key, live)| (key.clone(), live.expires_at))
            .collect();
        for (key, _) in &expired {
            model.live.remove(key);
        }
        // What the delivery wrote to the sinks (its state changes go to the
        // changelog at the commit, S5).
        let mut wrote = Vec::new();
        for (tp, offset) in delivery.sent {
            let id = self.tps.id(tp);
            let Some(data) = self.tps.data(id, *offset) else {
                continue;
            };
            // Re-keyed copies of what the fold wrote are R3's, checked by
            // I17 on their own.
            let rekeyed = plan
                .stage
                .hooks()
                .repartitions()
                .any(|topic| *topic == tp.topic);
            if plan.changelog.as_ref() != Some(&tp.topic) && !rekeyed {
                wrote.push((
                    tp.topic.clone(),
                    data.key.clone(),
                    data.value.clone(),
                    format!("{tp}@{offset}"),
                ));
            }
        }
        let frontier_told = told(frontier);
        // E2: the keys it expired are deleted by the transaction's commit,
        // unless a later delivery of it brings them back.
        if !expired.is_empty() {
            let at_frontier = format!(
                "the delivery of {what}, which moves the expiry frontier to {frontier_told}"
            );
            model
                .expired
                .extend(expired.into_iter().map(|(key, expires_at)| Expired {
                    key,
                    expires_at,
                    what: at_frontier.clone(),
                    step: delivery.step,
                }));
        }
        let Some((key, timestamp)) = own else {
            return true;
        };
        // E3: the record folded into the key's live state, or into the
        // initial state when it has none.
        let previous = model.live.remove(&key);
        let mut calls = UserCalls::default();
        let from = match &previous {
            Some(live) => live.state.clone(),
            None => {
                let initial = decl.initial();
                calls.note("initial state", Answer::bytes(&initial), |plan, _, _| {
                    Some(Answer::bytes(&expiry_of(plan)?.initial()))
                });
                let Ok(initial) = initial else {
                    return true;
                };
                initial
            }
        };
        let folded = decl.fold(&from, delivery.tp, &record);
        calls.note("fold", answer_of(&folded), move |plan, tp, record| {
            Some(answer_of(&expiry_of(plan)?.fold(&from, tp, record)))
        });
        let Ok((state, emissions)) = folded else {
            // Refused in this company: I6 judges the delivery.
            return true;
        };
        let expected: Vec<(parsley::TopicName, Option<Bytes>, Option<Bytes>)> = emissions
            .iter()
            .filter_map(|emission| {
                let (key, value) = emission.encoded().ok()?;
                Some((emission.topic().clone(), key.cloned(), value.cloned()))
            })
            .collect();
        let same = expected.len() == wrote.len()
            && expected
                .iter()
                .zip(&wrote)
                .all(|(expected, (topic, key, value, _))| {
                    (&expected.0, &expected.1, &expected.2) == (topic, key, value)
                });
        if !same {
            let state = match &previous {
                Some(live) => format!(
                    "its state live until {}, made by {} record(s)",
                    live.expires_at, live.records
                ),
                None => "no live state (it starts from the initial state)".to_string(),
            };
            let mut message = format!(
                "task {task} committed the delivery of {what}, after which the expiry frontier is {frontier_told}, with {state}: the fold should emit {} record(s)",
                expected.len()
            );
            for (topic, key, value) in &expected {
                let _ = write!(
                    message,
                    "; {topic}: key {} value {}",
                    describe(key),
                    describe(value)
                );
            }
            let _ = write!(message, " — it wrote {}", wrote.len());
            for (_, key, value, at) in &wrote {
                let _ = write!(
                    message,
                    "; {at}: key {} value {}",
                    describe(key),
                    describe(value)
                );
            }
            let found = self.violations.len();
            self.violation(Invariant::I14, delivery.step, message)
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
            self.name_impure_operator_logic(task, delivery, &record, &calls, found);
            return false;
        }
        if let Some(state) = state {
            let expires_at = match (decl.since, &previous) {
                (Since::FirstWrite, Some(live)) => live.expires_at,
                _ => timestamp.saturating_add(ttl),
            };
            if expires_at > frontier {
                let records = previous.as_ref().map_or(0, |live| live.records) + 1;
                model.live.insert(
                    key,
                    Live {
                        expires_at,
                        state,
                        records,
                    },
                );
            }
        }
        true
    }
}

impl<'a> Checker<'a> {
    /// E2 at the commit of a transaction, `delivery` its last: its
    /// changelog records (`sent`) delete every key its deliveries expired
    /// that none of them brought back, and no live key.
    fn check_expiry_commit(
        &mut self,
        plan: &StagePlan,
        task: &TaskId,
        delivery: &Delivery<'a>,
        sent: &[(Tp, u64)],
        model: &mut Model,
    ) -> bool {
        let mut deleted: Vec<Bytes> = Vec::new();
        for (tp, offset) in sent {
            let id = self.tps.id(tp);
            let Some(data) = self.tps.data(id, *offset) else {
                continue;
            };
            if let (Some(key), None) = (&data.key, &data.value) {
                if let Ok(SlotKey::Key(key)) = SlotKey::from_changelog_bytes(key) {
                    deleted.push(key);
                }
            }
        }
        let changelog = plan
            .changelog
            .as_ref()
            .map_or("the changelog", |topic| topic.as_str());
        let expired = std::mem::take(&mut model.expired);
        for gone in &expired {
            if !model.live.contains_key(&gone.key) && !deleted.contains(&gone.key) {
                let message = format!(
                    "task {task} committed {}, at or past key {}'s expiry at {}: the transaction should delete the key's state, and its commit wrote no tombstone for it on {changelog}",
                    gone.what,
                    bytes_for_humans(&gone.key),
                    gone.expires_at
                );
                self.violation(Invariant::I14, gone.step, message)
                    .on(delivery.at)
                    .about(delivery.tp, delivery.offset);
                return false;
            }
        }
        for key in &deleted {
            if let Some(live) = model.live.get(key) {
                let message = format!(
                    "task {task} committed a transaction, ending with the delivery of {}@{}, after which the expiry frontier is {}: its commit deleted key {}'s state on {changelog}, which lives until {} (E2: not a millisecond before)",
                    delivery.tp,
                    delivery.offset,
                    told(model.frontier),
                    bytes_for_humans(key),
                    live.expires_at
                );
                self.violation(Invariant::I14, delivery.step, message)
                    .on(delivery.at)
                    .about(delivery.tp, delivery.offset);
                return false;
            }
        }
        true
    }
}

/// An expiry frontier as a report tells it.
fn told(frontier: i64) -> String {
    match frontier {
        i64::MIN => "none yet".to_string(),
        frontier => frontier.to_string(),
    }
}

/// The expiring fold of `plan`, if it is one.
fn expiry_of(plan: &StagePlan) -> Option<&ExpiryDecl> {
    plan.stage.hooks().operator::<ExpiryDecl>()
}

/// A fold's answer as the S4 probe compares it: the state after it and
/// each emission's key and value.
fn answer_of(folded: &Result<(Option<Bytes>, Vec<parsley::Emission>), ReplayError>) -> Answer {
    Answer::of(folded, |(state, emissions)| {
        let mut parts = vec![state.clone()];
        for emission in emissions {
            match emission.encoded() {
                Ok((key, value)) => parts.extend([key.cloned(), value.cloned()]),
                Err(error) => parts.push(Some(Bytes::from(error.to_string()))),
            }
        }
        parts
    })
}
