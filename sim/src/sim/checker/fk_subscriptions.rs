//! I13: the foreign-key join's subscribe (J12) and respond (J13) stages,
//! from each task's committed deliveries alone.
//!
//! The resolve stage's check (`fk_joins.rs`) takes a response's right
//! value as given; these checks judge what the two stages before it wrote.
//! The checker keeps its own model of each task: for a subscribe task, per
//! left key, the foreign key it subscribed to; for a respond task, per
//! foreign key, the right table's latest value and the subscribed left keys
//! with their versions and partitions, all read from what the task
//! delivered. It uses none of the join's state and none of its code but the
//! derived topics' codecs; the user's extractor
//! (`ForeignKeyJoinDecl::extracted`) gives a left value's foreign key.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::{Codec, TaskId};
use parsley::{ForeignKeyJoinDecl, ForeignKeyJoinPart};
use parsley::{Response, ResponseCodec, Subscription, SubscriptionCodec};
use rustc_hash::FxHashMap;

use super::fk_joins::answer_of;
use super::purity::UserCalls;
use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// A respond task's foreign key as the checker has it.
#[derive(Default)]
struct Foreign {
    /// The right table's latest value delivered, none after a tombstone.
    right: Option<Bytes>,
    /// Each subscribed left key: the version and left partition it
    /// subscribed with, in key order.
    subscribers: BTreeMap<Bytes, (u64, u32)>,
}

/// One record a delivery should write, or wrote, to a derived topic: its
/// key, its decoded value (none: a value its codec refuses) and, for a
/// response, the partition it lands on (J11).
type Written<T> = (Option<Bytes>, Option<T>, Option<u32>);

impl<'a> Checker<'a> {
    /// I13 (J12, J13) for every foreign-key join's subscribe and respond
    /// stages: each task's committed deliveries, in committed order,
    /// through the checker's own model. A task is reported once, at its
    /// first wrong delivery.
    pub(super) fn check_foreign_key_requests(&mut self, committed: &Committed<'a>) {
        for plan in self.input.app.stages() {
            let Some(decl) = plan.stage.hooks().operator::<ForeignKeyJoinDecl>() else {
                continue;
            };
            match decl.part {
                ForeignKeyJoinPart::Subscribe => self.check_each_task(
                    committed,
                    plan.name(),
                    FxHashMap::<Bytes, Bytes>::default,
                    |checker, task, delivery, subscribed| {
                        checker.check_subscribe_delivery(plan, decl, task, delivery, subscribed)
                    },
                ),
                ForeignKeyJoinPart::Respond => self.check_each_task(
                    committed,
                    plan.name(),
                    FxHashMap::<Bytes, Foreign>::default,
                    |checker, task, delivery, foreign| {
                        checker.check_respond_delivery(plan, decl, task, delivery, foreign)
                    },
                ),
                ForeignKeyJoinPart::Resolve => {}
            }
        }
    }

    /// J12: a left record writes the unsubscription of its key under the
    /// foreign key it had when that changes, then its subscription, as of
    /// its offset and partition, under the foreign key it refers to.
    fn check_subscribe_delivery(
        &mut self,
        plan: &parsley::StagePlan,
        decl: &ForeignKeyJoinDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        subscribed: &mut FxHashMap<Bytes, Bytes>,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        let Some(key) = record.data.key.clone() else {
            // Refused (J15): I6 and I10 judge the delivery.
            return true;
        };
        if delivery.dead_lettered(plan) {
            return true;
        }
        let mut calls = UserCalls::default();
        let foreign = match &record.data.value {
            None => None,
            Some(left) => {
                let extracted = decl.extracted(left);
                let bytes = left.clone();
                calls.note("extractor", answer_of(&extracted), move |plan, _, _| {
                    let decl = plan.stage.hooks().operator::<ForeignKeyJoinDecl>()?;
                    Some(answer_of(&decl.extracted(&bytes)))
                });
                match extracted {
                    Ok(foreign) => foreign,
                    // Refused by the extractor or a codec: I6 and I10.
                    Err(_) => return true,
                }
            }
        };
        let mut expected = Vec::new();
        if let Some(previous) = subscribed
            .get(&key)
            .filter(|&previous| Some(previous) != foreign.as_ref())
        {
            let unsubscribe = Subscription::Unsubscribe { key: key.clone() };
            expected.push((Some(previous.clone()), Some(unsubscribe), None));
        }
        if let Some(foreign) = &foreign {
            let subscribe = Subscription::Subscribe {
                key: key.clone(),
                version: delivery.offset,
                partition: delivery.tp.partition,
            };
            expected.push((Some(foreign.clone()), Some(subscribe), None));
        }
        match &foreign {
            Some(foreign) => subscribed.insert(key.clone(), foreign.clone()),
            None => subscribed.remove(&key),
        };
        let wrote = self.written(delivery, &decl.subscription, false, |bytes| {
            SubscriptionCodec.decode(bytes).ok()
        });
        if wrote == expected {
            return true;
        }
        let found = self.violations.len();
        let message = format!(
            "task {task} committed the delivery of left record {}@{} (key {}, foreign key {}): J12 says it writes {} to {} — it wrote {}",
            delivery.tp,
            delivery.offset,
            bytes_for_humans(&key),
            foreign.as_ref().map_or("none".to_string(), |foreign| bytes_for_humans(foreign)),
            describe(&expected, describe_subscription),
            decl.subscription,
            describe(&wrote, describe_subscription),
        );
        self.violation(Invariant::I13, delivery.step, message)
            .on(delivery.at)
            .about(delivery.tp, delivery.offset);
        self.name_impure_operator_logic(task, delivery, &record, &calls, found);
        false
    }

    /// J13: a subscription records its key and writes a response with the
    /// foreign key's right value (none without one) to the left record's
    /// partition; an unsubscription writes nothing; a right record writes a
    /// response with its value to every subscribed key, in key order (a
    /// tombstone for a key without a value writes nothing).
    fn check_respond_delivery(
        &mut self,
        plan: &parsley::StagePlan,
        decl: &ForeignKeyJoinDecl,
        task: &TaskId,
        delivery: &Delivery<'a>,
        model: &mut FxHashMap<Bytes, Foreign>,
    ) -> bool {
        let Some(record) = self.record(delivery.id, delivery.offset) else {
            return true;
        };
        let Some(foreign_key) = record.data.key.clone() else {
            return true;
        };
        if delivery.dead_lettered(plan) {
            return true;
        }
        let foreign = model.entry(foreign_key.clone()).or_default();
        let response = |(key, &(version, partition)): (&Bytes, &(u64, u32)),
                        right: &Option<Bytes>| {
            let response = Response {
                version,
                partition,
                right: right.clone(),
            };
            (Some(key.clone()), Some(response), Some(partition))
        };
        let (expected, what) = if delivery.tp.topic == decl.right {
            let value = record.data.value.clone();
            let expected = match (&value, &foreign.right) {
                (None, None) => Vec::new(),
                _ => {
                    foreign.right = value;
                    foreign
                        .subscribers
                        .iter()
                        .map(|subscriber| response(subscriber, &foreign.right))
                        .collect()
                }
            };
            (expected, "right record")
        } else {
            let Some(subscription) = record
                .data
                .value
                .as_ref()
                .and_then(|bytes| SubscriptionCodec.decode(bytes).ok())
            else {
                // Refused (J15): I6 and I10 judge the delivery.
                return true;
            };
            let expected = match subscription {
                Subscription::Subscribe {
                    key,
                    version,
                    partition,
                } => {
                    let at = (version, partition);
                    foreign.subscribers.insert(key.clone(), at);
                    vec![response((&key, &at), &foreign.right)]
                }
                Subscription::Unsubscribe { key } => {
                    foreign.subscribers.remove(&key);
                    Vec::new()
                }
            };
            (expected, "subscription")
        };
        if foreign.right.is_none() && foreign.subscribers.is_empty() {
            model.remove(&foreign_key);
        }
        let wrote = self.written(delivery, &decl.response, true, |bytes| {
            ResponseCodec.decode(bytes).ok()
        });
        if wrote == expected {
            return true;
        }
        let message = format!(
            "task {task} committed the delivery of {what} {}@{} (foreign key {}): J13 says it writes {} to {} — it wrote {}",
            delivery.tp,
            delivery.offset,
            bytes_for_humans(&foreign_key),
            describe(&expected, describe_response),
            decl.response,
            describe(&wrote, describe_response),
        );
        self.violation(Invariant::I13, delivery.step, message)
            .on(delivery.at)
            .about(delivery.tp, delivery.offset);
        false
    }

    /// What `delivery` wrote to `topic`, in order, decoded with `decode`,
    /// with the partition each landed on when `partitioned`.
    fn written<T>(
        &mut self,
        delivery: &Delivery<'a>,
        topic: &parsley::TopicName,
        partitioned: bool,
        decode: impl Fn(&Bytes) -> Option<T>,
    ) -> Vec<Written<T>> {
        let mut wrote = Vec::new();
        for (tp, offset) in delivery.sent {
            if tp.topic != *topic {
                continue;
            }
            let id = self.tps.id(tp);
            let Some(data) = self.tps.data(id, *offset) else {
                continue;
            };
            let value = data.value.as_ref().and_then(&decode);
            wrote.push((data.key.clone(), value, partitioned.then_some(tp.partition)));
        }
        wrote
    }
}

/// Records for a violation's message: `[key → value (partition p)]…`.
fn describe<T>(records: &[Written<T>], value: fn(&T) -> String) -> String {
    if records.is_empty() {
        return "nothing".to_string();
    }
    let mut out = String::new();
    for (index, (key, decoded, partition)) in records.iter().enumerate() {
        let key = key
            .as_ref()
            .map_or("no key".to_string(), |key| bytes_for_humans(key));
        let decoded = decoded
            .as_ref()
            .map_or("a value that does not decode".to_string(), value);
        let _ = write!(
            out,
            "{}[{key} → {decoded}",
            if index == 0 { "" } else { ", " }
        );
        if let Some(partition) = partition {
            let _ = write!(out, " on partition {partition}");
        }
        out.push(']');
    }
    out
}

fn describe_subscription(subscription: &Subscription) -> String {
    match subscription {
        Subscription::Subscribe {
            key,
            version,
            partition,
        } => format!(
            "subscribe {}, version {version} of left partition {partition}",
            bytes_for_humans(key)
        ),
        Subscription::Unsubscribe { key } => format!("unsubscribe {}", bytes_for_humans(key)),
    }
}

fn describe_response(response: &Response) -> String {
    format!(
        "version {} of left partition {}, right {}",
        response.version,
        response.partition,
        response
            .right
            .as_ref()
            .map_or("none".to_string(), |right| bytes_for_humans(right))
    )
}
