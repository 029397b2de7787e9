//! J12–J14 through each stage's public replay: the three stages of a
//! foreign-key join run over slots kept here, with their records routed by
//! hand, so that a test picks the order of deliveries a task would see.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;
use crate::record::{ConsumedRecord, RecordData};
use crate::stage::SlotChange;
use crate::tp::Tp;
use crate::{Codec, Emission, Utf8};

fn bytes(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

/// Orders (left, value: the customer's id, or "-" for none) joined with
/// customers (right, value: the name).
fn stages() -> ForeignKeyJoinStages {
    joined_by(|order: &String, _: &String, name: &String| format!("{order} for {name}"))
}

/// The join of [`stages`], its results written by `joiner` (order key,
/// customer id, customer name).
fn joined_by(
    joiner: impl Fn(&String, &String, &String) -> String + Send + Sync + 'static,
) -> ForeignKeyJoinStages {
    let orders = Topic::<String, String>::with_codecs("orders", Utf8, Utf8);
    let customers = Topic::<String, String>::with_codecs("customers", Utf8, Utf8);
    let labelled = Topic::<String, String>::with_codecs("labelled", Utf8, Utf8);
    Stage::named("labels")
        .join(Join::foreign_key(
            &orders,
            &customers,
            |customer: &String| (customer != "-").then(|| customer.clone()),
        ))
        .inner(joiner)
        .into(&labelled)
        .build()
}

/// One stage's slots, by key bytes, and the offsets it has read per topic.
#[derive(Default)]
struct Slots(BTreeMap<Bytes, Bytes>);

impl Slots {
    fn deliver(
        &mut self,
        stage: &Stage,
        topic: &str,
        offset: u64,
        key: &Bytes,
        value: Option<Bytes>,
    ) -> Vec<Emission> {
        let record = ConsumedRecord {
            offset,
            data: RecordData {
                key: Some(key.clone()),
                value,
                headers: Vec::new(),
                timestamp: 1_000,
            },
        };
        let state = self.0.get(key).map(|bytes| &bytes[..]);
        let tp = Tp::new(topic, 0);
        let replayed = stage
            .hooks()
            .replay_record(&tp.topic, state, &tp, &record)
            .unwrap();
        match replayed.slot {
            SlotChange::Set(bytes) => {
                self.0.insert(key.clone(), bytes);
            }
            SlotChange::Deleted => {
                self.0.remove(key);
            }
            SlotChange::Unchanged => {}
        }
        replayed.emissions
    }
}

fn key_value(emission: &Emission) -> (Bytes, Option<Bytes>) {
    let (key, value) = emission.encoded().unwrap();
    (key.cloned().expect("keyed"), value.cloned())
}

/// J12, J13, J14: an order moves from Ada to Bob; Ada's update, answered
/// before the respond stage read the unsubscription, is delivered to the
/// resolve stage after the order's new version: it is stale and writes
/// nothing. The current response then writes Bob's label.
#[test]
fn j14_a_response_to_an_older_version_writes_nothing() {
    let join = stages();
    let (mut subscribe, mut respond, mut resolve) =
        (Slots::default(), Slots::default(), Slots::default());
    let order = bytes("o1");
    // The customers are known to the respond stage.
    assert!(respond
        .deliver(
            &join.respond,
            "customers",
            0,
            &bytes("ada"),
            Some(bytes("Ada"))
        )
        .is_empty());
    respond.deliver(
        &join.respond,
        "customers",
        1,
        &bytes("bob"),
        Some(bytes("Bob")),
    );
    // Left offset 0: the order is Ada's.
    let subscribed = subscribe.deliver(&join.subscribe, "orders", 0, &order, Some(bytes("ada")));
    assert_eq!(subscribed.len(), 1);
    let (foreign, subscription) = key_value(&subscribed[0]);
    assert_eq!(foreign, bytes("ada"));
    assert!(resolve
        .deliver(&join.resolve, "orders", 0, &order, Some(bytes("ada")))
        .is_empty());
    let subscription_topic = join.subscription.as_str().to_string();
    let response_topic = join.response.as_str().to_string();
    let answered = respond.deliver(
        &join.respond,
        &subscription_topic,
        0,
        &foreign,
        subscription,
    );
    let (_, response) = key_value(&answered[0]);
    let labelled = resolve.deliver(&join.resolve, &response_topic, 0, &order, response);
    assert_eq!(
        labelled.iter().map(key_value).collect::<Vec<_>>(),
        [(order.clone(), Some(bytes("o1 for Ada")))]
    );
    // Left offset 1: the order moves to Bob, an unsubscription from Ada
    // and a subscription to Bob.
    let moved = subscribe.deliver(&join.subscribe, "orders", 1, &order, Some(bytes("bob")));
    let moved: Vec<_> = moved.iter().map(key_value).collect();
    assert_eq!(moved[0].0, bytes("ada"));
    assert_eq!(moved[1].0, bytes("bob"));
    assert!(resolve
        .deliver(&join.resolve, "orders", 1, &order, Some(bytes("bob")))
        .is_empty());
    // Ada changes before the respond stage reads the unsubscription: its
    // response answers version 0.
    let stale = respond.deliver(
        &join.respond,
        "customers",
        2,
        &bytes("ada"),
        Some(bytes("Ada L.")),
    );
    let (_, stale) = key_value(&stale[0]);
    assert!(
        resolve
            .deliver(&join.resolve, &response_topic, 1, &order, stale)
            .is_empty(),
        "a response to version 0 after version 1 is stale"
    );
    respond.deliver(
        &join.respond,
        &subscription_topic,
        1,
        &bytes("ada"),
        moved[0].1.clone(),
    );
    let answered = respond.deliver(
        &join.respond,
        &subscription_topic,
        2,
        &bytes("bob"),
        moved[1].1.clone(),
    );
    let (_, current) = key_value(&answered[0]);
    let labelled = resolve.deliver(&join.resolve, &response_topic, 2, &order, current);
    assert_eq!(
        labelled.iter().map(key_value).collect::<Vec<_>>(),
        [(order, Some(bytes("o1 for Bob")))]
    );
}

/// J14: a response is joined with the key's latest left value, the one
/// its version names, not an earlier value the key had: an order moved
/// from Ada to Bob is labelled with Bob's id and name.
#[test]
fn j14_a_response_joins_the_latest_left_value() {
    let join = joined_by(|order: &String, customer: &String, name: &String| {
        format!("{order} ({customer}) for {name}")
    });
    let mut resolve = Slots::default();
    let order = bytes("o1");
    resolve.deliver(&join.resolve, "orders", 0, &order, Some(bytes("ada")));
    resolve.deliver(&join.resolve, "orders", 1, &order, Some(bytes("bob")));
    let response = ResponseCodec
        .encode(&Response {
            version: 1,
            partition: 0,
            right: Some(bytes("Bob")),
        })
        .unwrap();
    let labelled = resolve.deliver(
        &join.resolve,
        join.response.as_str(),
        0,
        &order,
        Some(response),
    );
    assert_eq!(
        labelled.iter().map(key_value).collect::<Vec<_>>(),
        [(order, Some(bytes("o1 (bob) for Bob")))]
    );
}

/// J12, J14: a left value that refers to no foreign key unsubscribes and
/// is resolved at once: the inner join's result goes, with a tombstone.
#[test]
fn j12_j14_no_foreign_key_unsubscribes_and_resolves_at_once() {
    let join = stages();
    let (mut subscribe, mut resolve) = (Slots::default(), Slots::default());
    let order = bytes("o1");
    subscribe.deliver(&join.subscribe, "orders", 0, &order, Some(bytes("ada")));
    let unsubscribed = subscribe.deliver(&join.subscribe, "orders", 1, &order, Some(bytes("-")));
    assert_eq!(unsubscribed.len(), 1);
    assert_eq!(key_value(&unsubscribed[0]).0, bytes("ada"));
    assert!(subscribe.0.is_empty(), "no foreign key, no slot");
    // The resolve stage had a result for the order.
    resolve.deliver(&join.resolve, "orders", 0, &order, Some(bytes("ada")));
    let response = ResponseCodec
        .encode(&Response {
            version: 0,
            partition: 0,
            right: Some(bytes("Ada")),
        })
        .unwrap();
    resolve.deliver(
        &join.resolve,
        join.response.as_str(),
        0,
        &order,
        Some(response),
    );
    let resolved = resolve.deliver(&join.resolve, "orders", 1, &order, Some(bytes("-")));
    assert_eq!(
        resolved.iter().map(key_value).collect::<Vec<_>>(),
        [(order, None)]
    );
}

/// J15: a left record whose key the left table's key codec refuses is
/// refused by the subscribe stage and by the resolve stage alike, as that
/// record's own key error: it is never subscribed, so no response names
/// the key and no later response is blamed for it.
#[test]
fn j15_a_left_key_the_codec_refuses_is_refused_by_both_left_stages() {
    let join = stages();
    let record = ConsumedRecord {
        offset: 0,
        data: RecordData {
            key: Some(Bytes::from_static(&[0xff, 0xfe])),
            value: Some(bytes("ada")),
            headers: Vec::new(),
            timestamp: 1_000,
        },
    };
    let tp = Tp::new("orders", 0);
    for stage in [&join.subscribe, &join.resolve] {
        let refused = stage
            .hooks()
            .replay_record(&tp.topic, None, &tp, &record)
            .expect_err("the key is not UTF-8");
        let text = refused.to_string();
        assert!(text.contains("key"), "{}: {text}", stage.name());
    }
}

/// J11: a response lands on the partition Kafka's default partitioner gives
/// its left key; one that answers a left record of another partition (the
/// left table written with another partitioner) is refused naming J11,
/// not dropped as stale: the task never delivered its key, and its result
/// would be lost without a word.
#[test]
fn j11_a_response_on_another_partition_than_its_left_record_is_refused() {
    let join = stages();
    let response = ResponseCodec
        .encode(&Response {
            version: 4,
            partition: 2,
            right: Some(bytes("Ada")),
        })
        .unwrap();
    let record = ConsumedRecord {
        offset: 0,
        data: RecordData {
            key: Some(bytes("o1")),
            value: Some(response),
            headers: Vec::new(),
            timestamp: 1_000,
        },
    };
    let tp = Tp::new(join.response.as_str(), 0);
    let refused = join
        .resolve
        .hooks()
        .replay_record(&tp.topic, None, &tp, &record)
        .expect_err("routed to partition 0, its left record is of partition 2");
    let text = refused.to_string();
    assert!(
        text.contains("J11") && text.contains("partition 2"),
        "{text}"
    );
    // On its own left record's partition, with no state for the key, it is
    // stale (the key's row was deleted): nothing is written.
    let tp = Tp::new(join.response.as_str(), 2);
    let replayed = join
        .resolve
        .hooks()
        .replay_record(&tp.topic, None, &tp, &record)
        .expect("a stale response");
    assert!(replayed.emissions.is_empty());
}

/// J13: a right record answers every subscribed left key, in key order,
/// each with its own version and the value the record brings, not the one
/// it replaces.
#[test]
fn j13_a_right_update_answers_every_subscriber_with_its_value() {
    let join = stages();
    let (mut subscribe, mut respond) = (Slots::default(), Slots::default());
    let ada = bytes("ada");
    respond.deliver(&join.respond, "customers", 0, &ada, Some(bytes("Ada")));
    let subscription_topic = join.subscription.as_str().to_string();
    for (offset, order) in [(0, "o2"), (1, "o1")] {
        let subscribed = subscribe.deliver(
            &join.subscribe,
            "orders",
            offset,
            &bytes(order),
            Some(bytes("ada")),
        );
        let (foreign, subscription) = key_value(&subscribed[0]);
        respond.deliver(
            &join.respond,
            &subscription_topic,
            offset,
            &foreign,
            subscription,
        );
    }
    let answered = respond.deliver(&join.respond, "customers", 1, &ada, Some(bytes("Ada L.")));
    let responses: Vec<(Bytes, Response)> = answered
        .iter()
        .map(|emission| {
            let (key, value) = key_value(emission);
            (
                key,
                ResponseCodec.decode(&value.expect("a response")).unwrap(),
            )
        })
        .collect();
    let answer = |version, right: &str| Response {
        version,
        partition: 0,
        right: Some(bytes(right)),
    };
    assert_eq!(
        responses,
        [
            (bytes("o1"), answer(1, "Ada L.")),
            (bytes("o2"), answer(0, "Ada L."))
        ],
        "each subscriber's response carries the right record's value"
    );
}
