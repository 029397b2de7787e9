//! J4–J7 through the stage's public replay: a stream–stream join's logic
//! run over slots kept here, as a checker would keep them.

use std::time::Duration;

use bytes::Bytes;

use super::tests::refused_with;
use super::*;
use crate::stage::replaying::{self, Replay};
use crate::tp::Tp;
use crate::{CompositionError, Emission, Json, Parsley, Utf8, I64};

fn orders() -> Topic<String, i64> {
    Topic::with_codecs("orders", Utf8, I64)
}

fn payments() -> Topic<String, i64> {
    Topic::with_codecs("payments", Utf8, I64)
}

fn matched() -> Topic<String, String> {
    Topic::with_codecs("matched", Utf8, Utf8)
}

/// Orders and payments at most 100 ms apart, 50 ms of grace.
fn window() -> JoinWindows {
    JoinWindows::time_difference(Duration::from_millis(100)).grace(Duration::from_millis(50))
}

fn show(order: Option<&i64>, payment: Option<&i64>) -> String {
    let side = |value: Option<&i64>| value.map_or("-".to_string(), i64::to_string);
    format!("{}/{}", side(order), side(payment))
}

fn inner_with(windows: JoinWindows) -> Stage {
    Stage::named("match")
        .join(Join::stream_stream(&orders(), &payments(), windows))
        .inner(|_, order, payment| show(Some(order), Some(payment)))
        .into(&matched())
        .build()
}

fn left() -> Stage {
    Stage::named("match")
        .join(Join::stream_stream(&orders(), &payments(), window()))
        .left(|_, order, payment| show(Some(order), payment))
        .into(&matched())
        .build()
}

fn outer() -> Stage {
    Stage::named("match")
        .join(Join::stream_stream(&orders(), &payments(), window()))
        .outer(|_, order, payment| show(order, payment))
        .into(&matched())
        .build()
}

/// Orders and payments, delivered.
trait Matching {
    fn order(&mut self, key: &str, amount: i64, timestamp: i64) -> Vec<Emission>;

    fn payment(&mut self, key: &str, amount: i64, timestamp: i64) -> Vec<Emission>;
}

impl Matching for Replay {
    fn order(&mut self, key: &str, amount: i64, timestamp: i64) -> Vec<Emission> {
        self.deliver("orders", Some(key), Some(amount), timestamp)
            .unwrap()
    }

    fn payment(&mut self, key: &str, amount: i64, timestamp: i64) -> Vec<Emission> {
        self.deliver("payments", Some(key), Some(amount), timestamp)
            .unwrap()
    }
}

fn out(pairs: &[(&str, &str)]) -> Vec<Emission> {
    pairs
        .iter()
        .map(|(key, value)| matched().send(key.to_string(), value.to_string()))
        .collect()
}

/// J5: a pair within the window is joined once, when its second record is
/// delivered, whichever side that is; records of other keys or further
/// apart than the window do not join.
#[test]
fn j5_records_of_one_key_within_the_window_join_once() {
    let mut join = Replay::of(inner_with(window()));
    assert_eq!(join.order("a", 1, 1_000), out(&[]));
    assert_eq!(join.payment("b", 2, 1_000), out(&[]), "another key");
    assert_eq!(
        join.payment("a", 5, 900),
        out(&[("a", "1/5")]),
        "100 ms before"
    );
    assert_eq!(join.payment("a", 6, 899), out(&[]), "101 ms before");
    assert_eq!(
        join.payment("a", 4, 1_100),
        out(&[("a", "1/4")]),
        "100 ms after"
    );
    assert_eq!(join.payment("a", 3, 1_101), out(&[]), "101 ms after");
    // A later order joins every held payment in its window, earliest first.
    assert_eq!(
        join.order("a", 7, 1_050),
        out(&[("a", "7/4"), ("a", "7/3")])
    );
}

/// J5: `before` and `after` bound a left record's window on each side;
/// a right record's window is the mirror image.
#[test]
fn j5_an_asymmetric_window_bounds_each_side() {
    let windows = JoinWindows::time_difference(Duration::ZERO)
        .before(Duration::from_millis(100))
        .grace(Duration::from_secs(10));
    let mut join = Replay::of(inner_with(windows));
    assert_eq!(join.order("a", 1, 1_000), out(&[]));
    assert_eq!(join.payment("a", 2, 1_001), out(&[]), "after the order");
    assert_eq!(join.payment("a", 3, 1_000), out(&[("a", "1/3")]));
    assert_eq!(join.payment("a", 4, 900), out(&[("a", "1/4")]));
    assert_eq!(join.payment("a", 5, 899), out(&[]));
    // A payment at 1,001 looks 100 ms ahead for orders.
    assert_eq!(join.order("a", 6, 1_101), out(&[("a", "6/2")]));
}

/// J6: a record is held until the frontier passes its timestamp plus the
/// window plus the grace (1,150 for an order at 1,000), not a millisecond
/// earlier; after that a record in its window finds nothing to join.
#[test]
fn j6_a_record_is_held_until_the_frontier_passes_window_plus_grace() {
    let mut join = Replay::of(inner_with(window()));
    assert_eq!(join.order("a", 1, 1_000), out(&[]));
    assert_eq!(
        join.order("z", 9, 1_150),
        out(&[]),
        "frontier at the close point"
    );
    assert_eq!(
        join.payment("a", 2, 1_090),
        out(&[("a", "1/2")]),
        "still held at 1,150"
    );
    assert_eq!(join.order("z", 9, 1_151), out(&[]), "frontier past it");
    assert_eq!(join.payment("a", 3, 1_095), out(&[]), "gone at 1,151");
}

/// J7: a left join writes an order that joined nothing once, when the
/// frontier passes its window and grace, and never before.
#[test]
fn j7_an_unmatched_left_record_is_written_once_its_window_closes() {
    let mut join = Replay::of(left());
    assert_eq!(join.order("a", 1, 1_000), out(&[]));
    assert_eq!(join.payment("b", 2, 1_150), out(&[]), "not yet closed");
    assert_eq!(join.payment("b", 3, 1_151), out(&[("a", "1/-")]));
    assert_eq!(join.payment("b", 4, 5_000), out(&[]), "once");
    assert_eq!(
        join.order("c", 5, 9_000),
        out(&[]),
        "a left join never writes a payment alone"
    );
}

/// J7: a match that arrives out of order but within the grace is joined,
/// and the order is then never written unmatched.
#[test]
fn j7_a_match_within_the_grace_prevents_the_unmatched_result() {
    let mut join = Replay::of(left());
    assert_eq!(join.order("a", 1, 1_000), out(&[]));
    assert_eq!(join.order("z", 9, 1_140), out(&[]));
    assert_eq!(join.payment("a", 2, 1_060), out(&[("a", "1/2")]));
    assert_eq!(join.order("z", 9, 9_000), out(&[("z", "9/-")]), "only z's");
}

/// J7: an outer join writes the unmatched records of both sides, those one
/// delivery closes in the order (timestamp, right before left, key), before
/// the delivery's own pairs.
#[test]
fn j7_outer_writes_both_sides_unmatched_in_close_order_before_pairs() {
    let mut join = Replay::of(outer());
    assert_eq!(join.order("b", 1, 1_000), out(&[]));
    assert_eq!(join.payment("a", 2, 1_000), out(&[]));
    assert_eq!(join.order("a", 3, 990), out(&[("a", "3/2")]));
    assert_eq!(join.payment("e", 4, 1_005), out(&[]));
    assert_eq!(join.payment("f", 8, 1_000), out(&[]));
    assert_eq!(join.order("c", 5, 1_100), out(&[]));
    assert_eq!(
        join.payment("c", 6, 1_200),
        out(&[("f", "-/8"), ("b", "1/-"), ("e", "-/4"), ("c", "5/6")]),
        "closes first (payment f and order b at 1,000, payment e at 1,005), then the pair"
    );
}

/// J7: a record whose window had closed before it came can be joined only
/// by what is still held; unmatched, it is written at once.
#[test]
fn j7_a_record_later_than_its_window_is_written_at_once_when_unmatched() {
    let mut join = Replay::of(left());
    assert_eq!(join.payment("a", 1, 1_000), out(&[]));
    assert_eq!(join.order("z", 9, 1_400), out(&[]));
    assert_eq!(
        join.order("a", 2, 1_100),
        out(&[("a", "2/-")]),
        "past 1,250"
    );
    assert_eq!(join.order("z", 9, 9_000), out(&[("z", "9/-")]));
    // A late payment still joins an order held for it.
    assert_eq!(join.order("k", 5, 9_000), out(&[]));
    assert_eq!(join.order("z", 10, 9_100), out(&[]));
    assert_eq!(
        join.payment("k", 6, 8_940),
        out(&[("k", "5/6")]),
        "closed at 9,090"
    );
    assert_eq!(
        join.order("q", 1, 20_000),
        out(&[("z", "9/-"), ("z", "10/-")]),
        "k was joined"
    );
}

/// J5: records without a key, tombstones and negative timestamps are
/// refused, naming the record; a failing joiner refuses its record.
#[test]
fn j5_bad_records_are_refused_naming_the_record() {
    let mut join = Replay::of(left());
    let error = join
        .deliver("orders", None, Some(1), 1_000)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("J5") && error.contains("orders-0@0") && error.contains("no key"),
        "{error}"
    );
    let error = join
        .deliver("payments", Some("a"), None, 1_000)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("payments-0@1") || error.contains("null"),
        "{error}"
    );
    let error = join
        .deliver("orders", Some("a"), Some(1), -1)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("J5") && error.contains("no timestamp"),
        "{error}"
    );
    let failing = Stage::named("match")
        .join(Join::stream_stream(&orders(), &payments(), window()))
        .inner(|_, order: &i64, payment: &i64| {
            if order == payment {
                Err(format!("order and payment both {order}"))
            } else {
                Ok(show(Some(order), Some(payment)))
            }
        })
        .into(&matched())
        .build();
    let mut join = Replay::of(failing);
    join.order("a", 5, 1_000);
    let error = join
        .deliver("payments", Some("a"), Some(5), 1_000)
        .unwrap_err()
        .to_string();
    assert!(error.contains("both 5"), "{error}");
}

/// The checker's view of a pair or an unmatched record
/// (`StreamJoinDecl::joined`) is what the delivery writes.
#[test]
fn join_output_is_what_the_delivery_writes() {
    let stage = outer();
    let order = replaying::record(Some("a"), Some(7), 1_000, 1);
    let payment = 3i64.to_be_bytes();
    let pair = stage
        .hooks()
        .operator::<crate::join::StreamJoinDecl>()
        .unwrap()
        .joined(&Tp::new("orders", 0), &order, Some(&payment))
        .unwrap();
    assert_eq!(pair, Some((Some(Bytes::from("a")), Bytes::from("7/3"))));
    let alone = replaying::record(Some("a"), Some(3), 1_000, 1);
    let unmatched = stage
        .hooks()
        .operator::<crate::join::StreamJoinDecl>()
        .unwrap()
        .joined(&Tp::new("payments", 0), &alone, None)
        .unwrap();
    assert_eq!(
        unmatched,
        Some((Some(Bytes::from("a")), Bytes::from("-/3")))
    );
    // A left join writes no payment alone.
    assert_eq!(
        left()
            .hooks()
            .operator::<crate::join::StreamJoinDecl>()
            .unwrap()
            .joined(&Tp::new("payments", 0), &alone, None)
            .unwrap(),
        None
    );
}

/// J5: the build refuses a join without an output, over one topic, whose
/// keys are encoded differently on its two sides, or with a window of zero.
#[test]
fn j5_impossible_joins_are_refused_when_built() {
    let cases = [
        (
            Stage::named("match")
                .join(Join::stream_stream(&orders(), &payments(), window()))
                .inner(|_, order, payment| show(Some(order), Some(payment)))
                .build(),
            "no output topic",
        ),
        (
            Stage::named("match")
                .join(Join::stream_stream(&orders(), &orders(), window()))
                .inner(|_, order, other| show(Some(order), Some(other)))
                .into(&matched())
                .build(),
            "one topic as both",
        ),
        (
            Stage::named("match")
                .join(Join::stream_stream(
                    &orders(),
                    &Topic::<String, i64>::with_codecs("payments", Json, I64),
                    window(),
                ))
                .inner(|_, order, payment| show(Some(order), Some(payment)))
                .into(&matched())
                .build(),
            "different codecs",
        ),
        (
            inner_with(JoinWindows::time_difference(Duration::ZERO).grace(Duration::from_secs(1))),
            "a join window of zero",
        ),
    ];
    for (stage, reason) in cases {
        match Parsley::named("shop").stage(stage).build() {
            Err(error @ CompositionError::ImpossibleOperator { rules: "J5", .. }) => {
                let message = error.to_string();
                assert!(
                    message.starts_with("J5 ") && message.contains(reason),
                    "{message}"
                );
            }
            other => panic!("expected J5's ImpossibleOperator ({reason}), got {other:?}"),
        }
    }
}

/// J4, C3: assembly refuses two streams with different partition counts,
/// naming both and the fix.
#[test]
fn j4_assembly_refuses_streams_not_co_partitioned() {
    let app = Parsley::named("shop").stage(left()).build().unwrap();
    let error = refused_with(&app, "payments", 3);
    assert!(
        error.contains("\"payments\"")
            && error.contains("co-partitioned with its left stream orders (J4)")
            && error.contains("has 3 partitions, expected 4")
            && error.contains("re-key"),
        "{error}"
    );
}

/// J6: a restarted task holds what it held: the slots on the changelog
/// read back as they were written, and bytes that are not a slot are
/// refused, naming what was wrong.
#[test]
fn j6_slots_round_trip_and_bad_bytes_are_refused() {
    use super::stream_logic::{Clock, Held, JoinSlot, JoinSlotCodec};
    use crate::codec::Codec;
    for slot in [
        JoinSlot::Clock(Clock::default()),
        JoinSlot::Clock(Clock {
            frontier: 7,
            next_close: Some(60),
        }),
        JoinSlot::Held(vec![
            Held {
                left: true,
                timestamp: 5,
                matched: false,
                value: Bytes::from_static(b"xy"),
            },
            Held {
                left: false,
                timestamp: 3,
                matched: true,
                value: Bytes::new(),
            },
        ]),
    ] {
        let bytes = JoinSlotCodec.encode(&slot).unwrap();
        assert_eq!(JoinSlotCodec.decode(&bytes).unwrap(), slot);
    }
    assert!(JoinSlotCodec.decode(&[]).is_err());
    let error = JoinSlotCodec.decode(&[1, 9]).unwrap_err();
    assert!(error.message.contains("flags byte 9"), "{error}");
    let error = JoinSlotCodec.decode(&[1, 1, 0, 0]).unwrap_err();
    assert!(error.message.contains("timestamp"), "{error}");
}
