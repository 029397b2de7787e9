//! J1–J4 through the stage's public replay: a stream–table join's logic run
//! over a table kept here, as a checker would keep it.

use super::*;
use crate::record::{ConsumedRecord, RecordData};
use crate::stage::replaying::{self, Replay};
use crate::stage::ReplayError;
use crate::tp::Tp;
use crate::{CompositionError, Emission, Json, Parsley, Utf8, I64};

fn orders() -> Topic<String, i64> {
    Topic::with_codecs("orders", Utf8, I64)
}

fn discounts() -> Topic<String, i64> {
    Topic::with_codecs("discounts", Utf8, I64)
}

fn priced() -> Topic<String, i64> {
    Topic::with_codecs("priced", Utf8, I64)
}

fn inner() -> Stage {
    Stage::named("pricing")
        .join(Join::stream_table(&orders(), &discounts()))
        .inner(|order, discount: &i64| order.value - discount)
        .into(&priced())
        .build()
}

fn left() -> Stage {
    Stage::named("pricing")
        .join(Join::stream_table(&orders(), &discounts()))
        .left(|order, discount: Option<&i64>| order.value - discount.copied().unwrap_or(0))
        .into(&priced())
        .build()
}

/// When every record is delivered.
const AT: i64 = 1_000;

/// The pricing join's records, delivered at [`AT`].
trait Pricing {
    fn order(&mut self, key: &str, amount: i64) -> Vec<Emission>;

    fn discount(&mut self, key: &str, discount: Option<i64>);
}

impl Pricing for Replay {
    fn order(&mut self, key: &str, amount: i64) -> Vec<Emission> {
        self.deliver("orders", Some(key), Some(amount), AT).unwrap()
    }

    fn discount(&mut self, key: &str, discount: Option<i64>) {
        let emitted = self.deliver("discounts", Some(key), discount, AT).unwrap();
        assert!(
            emitted.is_empty(),
            "a table record emits nothing: {emitted:?}"
        );
    }
}

fn priced_at(key: &str, amount: i64) -> Vec<Emission> {
    vec![priced().send(key.to_string(), amount)]
}

/// `app` assembled with 4 partitions for every topic, which must pass,
/// then with `topic` at `partitions`: the refusal, as text.
pub(super) fn refused_with(app: &crate::App, topic: &str, partitions: u32) -> String {
    let mut topics: std::collections::HashMap<String, u32> = crate::TopicContract::list(app)
        .into_iter()
        .map(|contract| (contract.name.to_string(), 4))
        .collect();
    assert!(crate::assemble(app, &topics).is_ok());
    topics.insert(topic.to_string(), partitions);
    crate::assemble(app, &topics).unwrap_err().to_string()
}

/// J1, J2: an order is joined with its key's latest row; an update replaces
/// the row; another key's row is not seen.
#[test]
fn j1_j2_a_stream_record_sees_its_keys_latest_row() {
    let mut join = Replay::of(inner());
    join.discount("alice", Some(10));
    assert_eq!(join.order("alice", 100), priced_at("alice", 90));
    join.discount("alice", Some(25));
    assert_eq!(join.order("alice", 100), priced_at("alice", 75));
    join.discount("bob", Some(50));
    assert_eq!(join.order("alice", 100), priced_at("alice", 75));
    assert_eq!(join.order("bob", 100), priced_at("bob", 50));
}

/// J2: an inner join writes nothing without a row; a left join calls the
/// joiner with `None`.
#[test]
fn j2_inner_writes_nothing_without_a_row_and_left_joins_none() {
    assert_eq!(Replay::of(inner()).order("carol", 100), vec![]);
    assert_eq!(
        Replay::of(left()).order("carol", 100),
        priced_at("carol", 100)
    );
}

/// J1: a tombstone deletes the row, for inner and left joins alike; one for
/// a key without a row changes nothing.
#[test]
fn j1_a_tombstone_deletes_the_row() {
    for (stage, after) in [(inner(), vec![]), (left(), priced_at("alice", 100))] {
        let mut join = Replay::of(stage);
        join.discount("alice", Some(10));
        join.discount("alice", None);
        assert_eq!(join.order("alice", 100), after);
        assert!(join.slots.is_empty());
        join.discount("bob", None);
        assert!(join.slots.is_empty());
    }
}

/// J1, J2: a stream record changes no row; the row is the table record's
/// timestamp, then the table's own bytes.
#[test]
fn j2_a_stream_record_changes_no_row_and_rows_keep_the_tables_bytes() {
    let mut join = Replay::of(inner());
    join.discount("alice", Some(7));
    let row = &join.slot("alice").expect("alice's row")[..];
    assert_eq!(row[..8], 1_000i64.to_be_bytes(), "the row's timestamp");
    assert_eq!(row[8..], 7i64.to_be_bytes(), "the table record's bytes");
    join.order("alice", 1);
    join.order("dave", 1);
    assert_eq!(join.slots.len(), 1);
}

/// J1, J2: a record without a key is refused, naming the rule and the
/// record; so is a value the codec refuses.
#[test]
fn j1_j2_records_without_a_key_are_refused_naming_the_record() {
    let mut join = Replay::of(inner());
    match join.deliver("discounts", None, Some(1), AT) {
        Err(ReplayError::Logic(message)) => {
            assert!(
                message.starts_with("J1 ") && message.contains("discounts-0@0"),
                "{message}"
            )
        }
        other => panic!("expected J1's refusal, got {other:?}"),
    }
    match join.deliver("orders", None, Some(1), AT) {
        Err(ReplayError::Logic(message)) => {
            assert!(
                message.starts_with("J2 ") && message.contains("orders-0@1"),
                "{message}"
            )
        }
        other => panic!("expected J2's refusal, got {other:?}"),
    }
    let tp = Tp::new("discounts", 0);
    let bad = ConsumedRecord {
        offset: 9,
        data: RecordData {
            key: Some(bytes::Bytes::from_static(b"alice")),
            value: Some(bytes::Bytes::from_static(b"xyz")),
            headers: Vec::new(),
            timestamp: 0,
        },
    };
    assert!(matches!(
        inner().hooks().replay_record(&tp.topic, None, &tp, &bad),
        Err(ReplayError::Record { .. })
    ));
}

/// J2: a joiner's error refuses the record (X5), with its message.
#[test]
fn j2_a_failing_joiner_refuses_the_record() {
    let stage = Stage::named("pricing")
        .join(Join::stream_table(&orders(), &discounts()))
        .inner(|order, discount: &i64| match *discount > order.value {
            true => Err(format!("discount {discount} above the order")),
            false => Ok(order.value - discount),
        })
        .into(&priced())
        .build();
    let mut join = Replay::of(stage);
    join.discount("alice", Some(500));
    match join.deliver("orders", Some("alice"), Some(100), AT) {
        Err(ReplayError::Logic(message)) => assert!(message.contains("discount 500"), "{message}"),
        other => panic!("expected the joiner's refusal, got {other:?}"),
    }
}

/// I13's view: `JoinDecl::joined` is the delivery's emission as bytes.
#[test]
fn join_output_is_what_the_delivery_emits() {
    let stage = left();
    let tp = Tp::new("orders", 0);
    let record = replaying::record(Some("alice"), Some(100), 0, 0);
    let row = 30i64.to_be_bytes();
    let (key, value) = stage
        .hooks()
        .operator::<crate::join::JoinDecl>()
        .unwrap()
        .joined(&tp, &record, Some(&row))
        .unwrap()
        .unwrap();
    assert_eq!(key.as_deref(), Some(&b"alice"[..]));
    assert_eq!(value[..], 70i64.to_be_bytes());
    let windows = Stage::named("w")
        .windowed(crate::window::Windows::tumbling(
            std::time::Duration::from_secs(1),
        ))
        .aggregate(&orders(), I64, || 0i64, |total, order| total + order.value)
        .build();
    assert!(windows
        .hooks()
        .operator::<crate::join::JoinDecl>()
        .is_none());
}

/// J4: the build refuses a join without an output, over one topic, or
/// whose keys are encoded differently on its two sides.
#[test]
fn j4_impossible_joins_are_refused_when_built() {
    let cases = [
        (
            Stage::named("pricing")
                .join(Join::stream_table(&orders(), &discounts()))
                .inner(|order, discount: &i64| order.value - discount)
                .build(),
            "no output topic",
        ),
        (
            Stage::named("pricing")
                .join(Join::stream_table(&orders(), &orders()))
                .inner(|order, other: &i64| order.value - other)
                .into(&priced())
                .build(),
            "one topic as both",
        ),
        (
            Stage::named("pricing")
                .join(Join::stream_table(
                    &orders(),
                    &Topic::<String, i64>::with_codecs("discounts", Json, I64),
                ))
                .inner(|order, discount: &i64| order.value - discount)
                .into(&priced())
                .build(),
            "different codecs",
        ),
    ];
    for (stage, reason) in cases {
        match Parsley::named("shop").stage(stage).build() {
            Err(error @ CompositionError::ImpossibleOperator { rules: "J4", .. }) => {
                let message = error.to_string();
                assert!(
                    message.starts_with("J4 ") && message.contains(reason),
                    "{message}"
                );
            }
            other => panic!("expected J4's ImpossibleOperator ({reason}), got {other:?}"),
        }
    }
}

/// J4, C3: assembly refuses a stream and a table with different partition
/// counts, naming both and the fix.
#[test]
fn j4_assembly_refuses_a_table_not_co_partitioned_with_its_stream() {
    let app = Parsley::named("shop").stage(inner()).build().unwrap();
    let error = refused_with(&app, "discounts", 3);
    assert!(
        error.contains("\"discounts\"")
            && error.contains("co-partitioned with its stream orders (J4)")
            && error.contains("has 3 partitions, expected 4")
            && error.contains("re-key"),
        "{error}"
    );
}
