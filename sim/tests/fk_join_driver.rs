//! Foreign-key table–table joins (J10–J15) under the `TestDriver`, the way
//! a Kafka Streams user tests `orders.join(customers, Order::customer, …)`:
//! pipe updates and tombstones to both tables, read the output as changes
//! and as a table. The application is not an example: a shop labels each
//! order with its customer's name (inner), and lists each order with its
//! customer's tier when it has one (left).

use std::collections::BTreeMap;

use bytes::Bytes;
use parsley::Role;
use parsley::{
    assemble, App, Codec, CompositionError, Join, Json, Parsley, Stage, TaskError, Topic, Utf8,
};
use parsley::{ForeignKeyJoinStages, Subscription, SubscriptionCodec};
use parsley_sim::{DriverError, TestDriver, TestInputTopic, TestOutputTopic};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Order {
    customer: Option<String>,
    item: String,
}

fn order(customer: Option<&str>, item: &str) -> Order {
    Order {
        customer: customer.map(str::to_string),
        item: item.to_string(),
    }
}

struct Shop {
    orders: Topic<String, Order>,
    customers: Topic<String, String>,
    labelled: Topic<String, String>,
    app: App,
}

/// `labels`: each order with its customer's name, inner or left.
fn shop_with(kind: &str, dead_letters: bool) -> Shop {
    let orders = Topic::<String, Order>::with_codecs("orders", Utf8, Json);
    let customers = Topic::<String, String>::with_codecs("customers", Utf8, Utf8);
    let labelled = Topic::<String, String>::with_codecs("labelled", Utf8, Utf8);
    let join =
        Stage::named("labels").join(Join::foreign_key(&orders, &customers, |order: &Order| {
            order.customer.clone()
        }));
    let builder = match kind {
        "inner" => join.inner(|id: &String, order: &Order, name: &String| {
            format!("{id}: {} for {name}", order.item)
        }),
        _ => join.left(|id: &String, order: &Order, name: Option<&String>| {
            format!(
                "{id}: {} for {}",
                order.item,
                name.map_or("nobody", String::as_str)
            )
        }),
    };
    let builder = builder.into(&labelled);
    let builder = if dead_letters {
        builder.dead_letter_queue()
    } else {
        builder
    };
    let app = Parsley::named("shop")
        .stages(builder.build())
        .build()
        .unwrap();
    Shop {
        orders,
        customers,
        labelled,
        app,
    }
}

fn shop(kind: &str) -> Shop {
    shop_with(kind, false)
}

/// Orders on three partitions, customers on two: the derived topics
/// follow each side (J11).
fn driver_of(shop: &Shop) -> TestDriver {
    TestDriver::builder(&shop.app)
        .partitions("orders", 3)
        .partitions("customers", 2)
        .default_partitions(1)
        .build()
        .unwrap()
}

/// A driver of the shop, its orders and customers to pipe and its labels
/// to read.
type Labelling = (
    TestDriver,
    TestInputTopic<String, Order>,
    TestInputTopic<String, String>,
    TestOutputTopic<String, String>,
);

/// The shop (`kind`) under `driver_of`, with its inputs and its output.
fn labelling(kind: &str) -> Labelling {
    let shop = shop(kind);
    let driver = driver_of(&shop);
    let orders = driver.input(&shop.orders).unwrap();
    let customers = driver.input(&shop.customers).unwrap();
    let labelled = driver.output(&shop.labelled).unwrap();
    (driver, orders, customers, labelled)
}

fn changes(output: &TestOutputTopic<String, String>) -> Vec<(String, Option<String>)> {
    output
        .read_changes()
        .unwrap()
        .into_iter()
        .map(|record| (record.key.expect("keyed"), record.value))
        .collect()
}

fn result(key: &str, value: &str) -> (String, Option<String>) {
    (key.to_string(), Some(value.to_string()))
}

fn tombstone(key: &str) -> (String, Option<String>) {
    (key.to_string(), None)
}

/// J10, J11, C4: the three stages and the two derived topics, named after
/// the application and the join; the topic contracts list each topic with the table
/// it is co-partitioned with, and the driver creates it with that table's
/// partition count.
#[test]
fn j10_j11_the_stages_and_derived_topics_follow_their_tables() {
    let shop = shop("inner");
    let stages: Vec<&str> = shop.app.stages().iter().map(|plan| plan.name()).collect();
    assert_eq!(
        stages,
        ["labels-subscribe", "labels-respond", "labels-resolve"]
    );
    let driver = driver_of(&shop);
    let contracts = driver.topic_contracts();
    let roles = |topic: &str| {
        contracts
            .iter()
            .find(|contract| contract.name.as_str() == topic)
            .unwrap_or_else(|| panic!("{topic} is among the topic contracts"))
            .roles
            .clone()
    };
    assert!(
        roles("shop-labels-subscription").contains(&Role::Subscription {
            stage: "labels-subscribe".into(),
            right: "customers".into(),
        })
    );
    assert!(roles("shop-labels-response").contains(&Role::Response {
        stage: "labels-respond".into(),
        left: "orders".into(),
    }));
    let partitions = |topic: &str| driver.cluster().partitions(topic);
    assert_eq!(partitions("shop-labels-subscription"), Some(2));
    assert_eq!(partitions("shop-labels-response"), Some(3));
    // Each stage's own derived topics follow its task count.
    assert_eq!(partitions("shop-labels-subscribe-state-changelog"), Some(3));
    assert_eq!(partitions("shop-labels-respond-state-changelog"), Some(2));
    assert_eq!(partitions("shop-labels-resolve-state-changelog"), Some(3));
}

/// J11, C3: assembly refuses a subscription topic without the right
/// table's partition count and a response topic without the left's,
/// naming the rule, the table and the fix.
#[test]
fn j11_assembly_refuses_derived_topics_not_co_partitioned() {
    let shop = shop("inner");
    let mut metadata: BTreeMap<String, u32> = [
        ("orders", 3),
        ("customers", 2),
        ("labelled", 1),
        ("shop-labels-subscription", 3),
        ("shop-labels-response", 2),
        ("shop-labels-subscribe-state-changelog", 3),
        ("shop-labels-respond-state-changelog", 2),
        ("shop-labels-resolve-state-changelog", 3),
    ]
    .into_iter()
    .map(|(topic, partitions)| (topic.to_string(), partitions))
    .collect();
    let error = assemble(&shop.app, &metadata).unwrap_err().to_string();
    assert!(
        error.contains("\"shop-labels-subscription\"")
            && error.contains("co-partitioned with its right table customers (J11)")
            && error.contains("has 3 partitions, expected 2"),
        "{error}"
    );
    assert!(
        error.contains("\"shop-labels-response\"")
            && error.contains("co-partitioned with its left table orders (J11)")
            && error.contains("has 2 partitions, expected 3"),
        "{error}"
    );
    metadata.insert("shop-labels-subscription".into(), 2);
    metadata.insert("shop-labels-response".into(), 3);
    assemble(&shop.app, &metadata).unwrap();
    metadata.remove("shop-labels-response");
    let error = assemble(&shop.app, &metadata).unwrap_err().to_string();
    assert!(
        error.contains("\"shop-labels-response\"")
            && error.contains("does not exist; expected 3 partitions"),
        "{error}"
    );
}

/// J10: joins that cannot be are refused when the application is built,
/// each naming J10 and what is wrong.
#[test]
fn j10_impossible_foreign_key_joins_are_refused_by_name() {
    let orders = Topic::<String, Order>::with_codecs("orders", Utf8, Json);
    let customers = Topic::<String, String>::with_codecs("customers", Utf8, Utf8);
    let labelled = Topic::<String, String>::with_codecs("labelled", Utf8, Utf8);
    let join = || {
        Stage::named("labels").join(Join::foreign_key(&orders, &customers, |order: &Order| {
            order.customer.clone()
        }))
    };
    let joiner = |_: &String, order: &Order, name: &String| format!("{} {name}", order.item);
    // What building an application "shop" of the join's stages says.
    let refused_in_shop =
        |stages: ForeignKeyJoinStages| Parsley::named("shop").stages(stages).build().unwrap_err();

    let no_output = join().inner(joiner).build();
    let error = refused_in_shop(no_output);
    assert!(
        matches!(&error, CompositionError::ImpossibleOperator { rules: "J10", reason, .. } if reason.contains("no output topic")),
        "{error}"
    );
    assert!(error.to_string().starts_with("J10 (docs/RULES.md#j10)"));

    let names = Topic::<String, String>::with_codecs("customers", Utf8, Utf8);
    let feeding_back = join()
        .inner(|_: &String, _: &Order, name: &String| name.clone())
        .into(&names)
        .build();
    let error = refused_in_shop(feeding_back);
    assert!(
        matches!(&error, CompositionError::ImpossibleOperator { rules: "J10", reason, .. } if reason.contains("one of its tables")),
        "{error}"
    );

    let ForeignKeyJoinStages {
        subscribe, respond, ..
    } = join().inner(joiner).into(&labelled).build();
    let error = Parsley::named("shop")
        .stage(subscribe)
        .stage(respond)
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        CompositionError::IncompleteForeignKeyJoin {
            join: "labels".into(),
            missing: "labels-resolve".into(),
        }
    );

    // Built into another application first, the join's topics are that
    // one's.
    let elsewhere: Vec<Stage> = join()
        .inner(joiner)
        .into(&labelled)
        .build()
        .into_iter()
        .collect();
    Parsley::named("other")
        .stages(elsewhere.clone())
        .build()
        .unwrap();
    let error = Parsley::named("shop")
        .stages(elsewhere)
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, CompositionError::ForeignKeyJoinOfAnotherApp { topic, other, .. } if topic == "other-labels-subscription" && other == "other"),
        "{error}"
    );

    // Only the subscribe stage writes the subscription topic.
    let subscription = Topic::<Bytes, Subscription>::with_codecs(
        "shop-labels-subscription",
        parsley::RawBytes,
        SubscriptionCodec,
    );
    let intruder = Stage::named("intruder")
        .on(&labelled, |_| Vec::new())
        .into(&subscription)
        .build();
    let error = Parsley::named("shop")
        .stages(join().inner(joiner).into(&labelled).build())
        .stage(intruder)
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, CompositionError::ForeignKeyJoinTopicAsSink { stage, owner, .. } if stage == "intruder" && owner == "labels-subscribe"),
        "{error}"
    );
}

/// J12–J14: an inner join writes an order's label once its customer is
/// known, rewrites it when either changes, and writes a tombstone when the
/// customer goes; an order whose customer is unknown never appears.
#[test]
fn j14_an_inner_join_follows_both_tables() {
    let (_, orders, customers, labelled) = labelling("inner");
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    orders.pipe("o2", order(Some("bob"), "jam")).unwrap();
    assert!(changes(&labelled).is_empty(), "no customer known yet");
    customers.pipe("ada", "Ada").unwrap();
    orders.pipe("o3", order(Some("ada"), "bun")).unwrap();
    customers.pipe("ada", "Ada L.").unwrap();
    orders.pipe("o1", order(Some("ada"), "coffee")).unwrap();
    customers.pipe_tombstone("ada").unwrap();
    customers.pipe_tombstone("ada").unwrap();
    let mut seen = changes(&labelled);
    // The two orders of one right update are written in key order.
    assert_eq!(
        seen.drain(..4).collect::<Vec<_>>(),
        [
            result("o1", "o1: tea for Ada"),
            result("o3", "o3: bun for Ada"),
            result("o1", "o1: tea for Ada L."),
            result("o3", "o3: bun for Ada L."),
        ]
    );
    assert_eq!(seen.remove(0), result("o1", "o1: coffee for Ada L."));
    seen.sort();
    assert_eq!(seen, [tombstone("o1"), tombstone("o3")]);
    assert!(labelled.read_table().unwrap().is_empty());
}

/// J14: a left join writes every order, with `None` for a customer that
/// is unknown, and for an order that names no customer (a foreign key of
/// `None`): as Kafka Streams' `leftJoin`.
#[test]
fn j14_a_left_join_writes_orders_without_customers() {
    let (_, orders, customers, labelled) = labelling("left");
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    orders.pipe("o2", order(None, "jam")).unwrap();
    customers.pipe("ada", "Ada").unwrap();
    customers.pipe_tombstone("ada").unwrap();
    assert_eq!(
        changes(&labelled),
        [
            result("o1", "o1: tea for nobody"),
            result("o2", "o2: jam for nobody"),
            result("o1", "o1: tea for Ada"),
            result("o1", "o1: tea for nobody"),
        ]
    );
}

/// J12, J14: a foreign key of `None`: the inner join deletes the order's
/// label (a tombstone, once: the order had one) and writes nothing for an
/// order that never had one; the left join writes it with no customer.
#[test]
fn j14_a_foreign_key_of_none() {
    let (_, orders, customers, labelled) = labelling("inner");
    customers.pipe("ada", "Ada").unwrap();
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    orders.pipe("o1", order(None, "tea")).unwrap();
    orders.pipe("o1", order(None, "mint tea")).unwrap();
    orders.pipe("o2", order(None, "jam")).unwrap();
    assert_eq!(
        changes(&labelled),
        [result("o1", "o1: tea for Ada"), tombstone("o1")]
    );

    let (_, orders, customers, labelled) = labelling("left");
    customers.pipe("ada", "Ada").unwrap();
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    orders.pipe("o1", order(None, "tea")).unwrap();
    assert_eq!(
        changes(&labelled),
        [
            result("o1", "o1: tea for Ada"),
            result("o1", "o1: tea for nobody")
        ]
    );
}

/// J14: a deleted order deletes its label: one tombstone; deleting it
/// again, or deleting an order never seen, writes nothing; and a later
/// customer update does not bring it back (its subscription is gone, J12).
#[test]
fn j14_a_left_tombstone_deletes_the_result_once() {
    for kind in ["inner", "left"] {
        let (_, orders, customers, labelled) = labelling(kind);
        customers.pipe("ada", "Ada").unwrap();
        orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
        orders.pipe_tombstone("o1").unwrap();
        orders.pipe_tombstone("o1").unwrap();
        orders.pipe_tombstone("o9").unwrap();
        customers.pipe("ada", "Ada L.").unwrap();
        assert_eq!(
            changes(&labelled),
            [result("o1", "o1: tea for Ada"), tombstone("o1")],
            "{kind}"
        );
        assert!(labelled.read_table().unwrap().is_empty(), "{kind}");
    }
}

/// J13, J14: a deleted customer: the inner join deletes the labels of
/// its orders, the left join rewrites them with nobody; a customer
/// deleted twice, or never known, writes nothing more.
#[test]
fn j13_a_right_tombstone_reaches_every_subscriber() {
    let expected = [
        ("inner", [tombstone("o1"), tombstone("o2")]),
        (
            "left",
            [
                result("o1", "o1: tea for nobody"),
                result("o2", "o2: jam for nobody"),
            ],
        ),
    ];
    for (kind, after) in expected {
        let (_, orders, customers, labelled) = labelling(kind);
        customers.pipe("ada", "Ada").unwrap();
        orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
        orders.pipe("o2", order(Some("ada"), "jam")).unwrap();
        let before = changes(&labelled).len();
        customers.pipe_tombstone("ada").unwrap();
        customers.pipe_tombstone("ada").unwrap();
        customers.pipe_tombstone("zed").unwrap();
        assert_eq!(changes(&labelled)[before..], after, "{kind}");
    }
}

/// J12, J14: an order moves from customer A to B and back to A, with an
/// update of A while it is B's: every label names the order's customer at
/// the time, and the update of A, which the order no longer refers to,
/// writes no label.
#[test]
fn j14_a_foreign_key_change_a_b_a_writes_no_stale_result() {
    let (_, orders, customers, labelled) = labelling("inner");
    customers.pipe("ada", "Ada").unwrap();
    customers.pipe("bob", "Bob").unwrap();
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    orders.pipe("o1", order(Some("bob"), "tea")).unwrap();
    customers.pipe("ada", "Ada L.").unwrap();
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    customers.pipe("bob", "Bob M.").unwrap();
    assert_eq!(
        changes(&labelled),
        [
            result("o1", "o1: tea for Ada"),
            result("o1", "o1: tea for Bob"),
            result("o1", "o1: tea for Ada L."),
        ]
    );
}

/// The respond stage held behind on the subscriptions (their topic
/// paused), so that it still counts the order among Ada's subscribers when
/// Ada changes, after the order moved to Bob: Ada's response answers the
/// order's older version. The output before and after the respond stage
/// catches up.
fn stale_response_story() -> [Vec<(String, Option<String>)>; 2] {
    let (driver, orders, customers, labelled) = labelling("inner");
    customers.pipe("ada", "Ada").unwrap();
    customers.pipe("bob", "Bob").unwrap();
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    driver.pause("shop-labels-subscription");
    orders.pipe("o1", order(Some("bob"), "coffee")).unwrap();
    customers.pipe("ada", "Ada L.").unwrap();
    let held = changes(&labelled);
    driver.resume("shop-labels-subscription").unwrap();
    [held, changes(&labelled)]
}

/// J14, the staleness rule: a response to an older left record is dropped,
/// so the order is never labelled with a customer it no longer refers to.
#[test]
fn j14_a_response_to_an_older_left_record_is_dropped_as_stale() {
    let [held, caught_up] = stale_response_story();
    assert_eq!(
        held,
        [result("o1", "o1: tea for Ada")],
        "Ada's update answers the order's older version: stale"
    );
    assert_eq!(
        caught_up,
        [
            result("o1", "o1: tea for Ada"),
            result("o1", "o1: coffee for Bob")
        ]
    );
}

/// J14: without the version check (`fk-join-keeps-stale-response`
/// planted) the same story writes the stale result the test above refuses:
/// the test reaches the check it guards.
#[test]
fn j14_without_the_version_check_the_stale_result_is_written() {
    parsley::mutation::set(Some(
        parsley::mutation::Mutation::ForeignKeyJoinKeepsStaleResponse,
    ));
    let [held, _] = stale_response_story();
    parsley::mutation::set(None);
    assert_eq!(
        held,
        [
            result("o1", "o1: tea for Ada"),
            result("o1", "o1: coffee for Ada L.")
        ]
    );
}

/// The resolve stage alone held behind on the orders while the order
/// moves from Ada to Bob: the response to the new version (read from the
/// response topic) and the output while held and after.
struct GateStory {
    response_version: u64,
    claimed: Option<u64>,
    left_offset: u64,
    held: Vec<(String, Option<String>)>,
    caught_up: Vec<(String, Option<String>)>,
}

fn gate_story() -> GateStory {
    let (driver, orders, customers, labelled) = labelling("inner");
    customers.pipe("ada", "Ada").unwrap();
    customers.pipe("bob", "Bob").unwrap();
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    driver.pause_stage("labels-resolve", "orders");
    let (tp, offset) = orders
        .pipe_record(parsley_sim::TestRecord::new(
            "o1",
            order(Some("bob"), "coffee"),
        ))
        .unwrap();
    let responses = driver
        .output(&Topic::<Bytes, parsley::Response>::with_codecs(
            "shop-labels-response",
            parsley::RawBytes,
            parsley::ResponseCodec,
        ))
        .unwrap()
        .read_all()
        .unwrap();
    let answer = responses.last().expect("Bob's subscription is answered");
    let held = changes(&labelled);
    driver.resume_stage("labels-resolve", "orders").unwrap();
    GateStory {
        response_version: answer.value.version,
        claimed: answer.stamp.offset(&tp),
        left_offset: offset,
        held,
        caught_up: changes(&labelled),
    }
}

/// J14, G2, G5: a response claims the left record it answers (through its
/// subscription), so the resolve stage's gate holds it until that task has
/// delivered the record itself, and then joins it as current.
#[test]
fn j14_the_gate_holds_a_response_until_its_left_record() {
    let story = gate_story();
    assert_eq!(story.response_version, story.left_offset);
    assert_eq!(
        story.claimed,
        Some(story.left_offset),
        "the response claims the left record it answers"
    );
    let first = result("o1", "o1: tea for Ada");
    assert_eq!(
        story.held,
        std::slice::from_ref(&first),
        "held behind its left record"
    );
    assert_eq!(story.caught_up, [first, result("o1", "o1: coffee for Bob")]);
}

/// J14, G2: with a gate that ignores claims (`gate-ignores-claims`
/// planted), the response is delivered before its left record, is not
/// current then, and is dropped: the label is never written. The gate is
/// what makes the version check exact.
#[test]
fn j14_without_the_gate_the_response_is_lost() {
    parsley::mutation::set(Some(parsley::mutation::Mutation::GateIgnoresClaims));
    let story = gate_story();
    parsley::mutation::set(None);
    assert_eq!(story.caught_up, [result("o1", "o1: tea for Ada")]);
}

/// X1, S5: the three stages' states are on their changelogs: a restarted
/// application goes on joining as before.
#[test]
fn x1_a_restart_keeps_the_subscriptions_and_versions() {
    let (driver, orders, customers, labelled) = labelling("inner");
    customers.pipe("ada", "Ada").unwrap();
    orders.pipe("o1", order(Some("ada"), "tea")).unwrap();
    driver.restart().unwrap();
    customers.pipe("ada", "Ada L.").unwrap();
    orders.pipe("o1", order(None, "tea")).unwrap();
    assert_eq!(
        changes(&labelled),
        [
            result("o1", "o1: tea for Ada"),
            result("o1", "o1: tea for Ada L."),
            tombstone("o1"),
        ]
    );
}

/// The inner shop's refusal of a record of raw `key` and `value` piped
/// to `topic`.
fn refused(topic: &str, key: Option<Bytes>, value: Bytes) -> DriverError {
    driver_of(&shop("inner"))
        .input_raw(topic)
        .unwrap()
        .pipe_raw(0, key, Some(value), Vec::new())
        .unwrap_err()
}

/// J15, X5: bad bytes on the subscription topic are a typed codec error
/// naming the topic and offset, never a panic; with the dead-letter
/// opt-in the respond stage dead-letters the record and goes on.
#[test]
fn j15_bad_bytes_on_a_derived_topic_are_refused() {
    let error = refused(
        "shop-labels-subscription",
        Some(Bytes::from_static(b"ada")),
        Bytes::from_static(&[7, 1, 2]),
    );
    let DriverError::Task(TaskError::Codec { tp, offset, .. }) = &error else {
        panic!("expected a codec error, got {error}");
    };
    assert_eq!(
        (tp.to_string().as_str(), *offset),
        ("shop-labels-subscription-0", 0)
    );
    assert!(error.to_string().contains("instruction 7"), "{error}");

    let shop = shop_with("inner", true);
    let driver = driver_of(&shop);
    driver
        .input_raw("shop-labels-response")
        .unwrap()
        .pipe_raw(0, Some(Bytes::from_static(b"o1")), None, Vec::new())
        .unwrap();
    let letters = driver.dead_letters("labels-resolve").unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].kind, parsley::DeadLetterKind::Codec);
    // A subscription encodes as its codec documents.
    let bytes = SubscriptionCodec
        .encode(&Subscription::Unsubscribe {
            key: Bytes::from_static(b"o1"),
        })
        .unwrap();
    assert_eq!(&bytes[..], &[2, 0, 0, 0, 2, b'o', b'1']);
}

/// J15: a left record without a key is refused naming J15.
#[test]
fn j15_a_left_record_without_a_key_is_refused() {
    let error = refused(
        "orders",
        None,
        Bytes::from_static(b"{\"customer\":\"ada\",\"item\":\"tea\"}"),
    );
    assert!(
        error.to_string().contains("J15 (docs/RULES.md#j15)"),
        "{error}"
    );
}

/// I13: the hooks the foreign-key oracle computes its expected result
/// with run the user's extractor and joiner with the tables' and the
/// output's codecs: the foreign key's bytes (none for an order of no
/// customer), the joined value's bytes, `None` when an inner joiner takes
/// no right row; bytes a codec refuses are refused.
#[test]
fn i13_the_foreign_key_hooks_run_the_users_extractor_and_joiner() {
    for kind in ["inner", "left"] {
        let shop = shop(kind);
        let plan = shop.app.stage("labels-resolve").unwrap();
        let decl = plan
            .stage
            .hooks()
            .operator::<parsley::ForeignKeyJoinDecl>()
            .unwrap();
        let ada = Json.encode(&order(Some("ada"), "tea")).unwrap();
        let nobody = Json.encode(&order(None, "tea")).unwrap();
        assert_eq!(decl.extracted(&ada).unwrap(), Some(Bytes::from("ada")));
        assert_eq!(decl.extracted(&nobody).unwrap(), None);
        assert!(decl.extracted(b"not json").is_err());
        let joined = decl.joined(b"o1", &ada, Some(b"Ada")).unwrap();
        assert_eq!(joined, Some(Bytes::from("o1: tea for Ada")));
        let alone = decl.joined(b"o1", &nobody, None).unwrap();
        match kind {
            "inner" => assert_eq!(alone, None),
            _ => assert_eq!(alone, Some(Bytes::from("o1: tea for nobody"))),
        }
        assert!(decl.joined(b"o1", b"not json", None).is_err());
    }
}
