//! J16–J18 through the stage's public replay, over slots kept here as a
//! task would keep them, and through the history's own operations.

use std::time::Duration;

use bytes::Bytes;

use super::super::tests::refused_with;
use super::history::{self, Clock, Put, Version};
use super::*;
use crate::stage::replaying::Replay;
use crate::{CompositionError, Json, Parsley, Utf8, I64};

fn orders() -> Topic<String, i64> {
    Topic::with_codecs("orders", Utf8, I64)
}

fn profiles() -> Topic<String, i64> {
    Topic::with_codecs("profiles", Utf8, I64)
}

fn joined() -> Topic<String, i64> {
    Topic::with_codecs("joined", Utf8, I64)
}

/// A left join writing the profile's value, or -1 without one; history
/// kept for `retention_ms`.
fn left(retention_ms: u64) -> Stage {
    Stage::named("as-of")
        .join(Join::stream_versioned_table(
            &orders(),
            &profiles(),
            Duration::from_millis(retention_ms),
        ))
        .left(|_order, profile: Option<&i64>| profile.copied().unwrap_or(-1))
        .into(&joined())
        .build()
}

fn inner(retention_ms: u64) -> Stage {
    Stage::named("as-of")
        .join(Join::stream_versioned_table(
            &orders(),
            &profiles(),
            Duration::from_millis(retention_ms),
        ))
        .inner(|order, profile: &i64| order.value * 1000 + profile)
        .into(&joined())
        .build()
}

/// Orders and profile versions, delivered.
trait AsOf {
    fn profile(&mut self, key: &str, value: Option<i64>, at: i64);

    /// What the order's delivery writes: each output's value.
    fn order(&mut self, key: &str, amount: i64, at: i64) -> Vec<i64>;

    /// The number of versions the key's slot holds.
    fn versions(&self, key: &str) -> usize;
}

impl AsOf for Replay {
    fn profile(&mut self, key: &str, value: Option<i64>, at: i64) {
        let emitted = self.deliver("profiles", Some(key), value, at).unwrap();
        assert!(
            emitted.is_empty(),
            "a table update emits nothing: {emitted:?}"
        );
    }

    fn order(&mut self, key: &str, amount: i64, at: i64) -> Vec<i64> {
        self.deliver("orders", Some(key), Some(amount), at)
            .unwrap()
            .iter()
            .map(|emission| {
                let (_, value) = emission.encoded().unwrap();
                I64.decode(value.unwrap()).unwrap()
            })
            .collect()
    }

    fn versions(&self, key: &str) -> usize {
        match self.slot(key) {
            None => 0,
            Some(bytes) => match slot::VersionedSlotCodec.decode(bytes).unwrap() {
                slot::VersionedSlot::History(history) => history.len(),
                other => panic!("a key's slot holds a history, not {other:?}"),
            },
        }
    }
}

use crate::codec::Codec;

const HOUR: u64 = 3_600_000;

/// J17: a record joins the latest version at or below its timestamp, a
/// version of its own millisecond included, whatever order the table's
/// updates came in (the example: 7 @200000, then 8 @50000; an
/// order @100000 joins 8).
#[test]
fn j17_a_record_joins_the_version_as_of_its_timestamp_equal_included() {
    let mut join = Replay::of(left(HOUR));
    join.profile("k", Some(7), 200_000);
    join.profile("k", Some(8), 50_000);
    assert_eq!(join.order("k", 1, 100_000), vec![8]);
    assert_eq!(join.order("k", 1, 199_999), vec![8]);
    assert_eq!(
        join.order("k", 1, 200_000),
        vec![7],
        "equal timestamps are included"
    );
    assert_eq!(join.order("k", 1, 900_000), vec![7]);
    assert_eq!(join.order("k", 1, 49_999), vec![-1], "no version yet");
    assert_eq!(
        join.order("other", 1, 900_000),
        vec![-1],
        "another key's versions are not seen"
    );
    // A record older than the table it meets still sees its own time.
    join.profile("k", Some(9), 150_000);
    assert_eq!(join.order("k", 1, 150_000), vec![9]);
    assert_eq!(join.order("k", 1, 149_999), vec![8]);
}

/// J17: records that come before a table update are joined with the table
/// their task has: a later update of an older timestamp does not change
/// them (no grace period), and a record after it sees it.
#[test]
fn j17_a_record_is_joined_with_the_versions_delivered_before_it() {
    let mut join = Replay::of(left(HOUR));
    assert_eq!(join.order("k", 1, 400_000), vec![-1]);
    assert_eq!(join.order("k", 2, 300_000), vec![-1]);
    join.profile("k", Some(9), 350_000);
    assert_eq!(join.order("k", 3, 300_000), vec![-1]);
    assert_eq!(join.order("k", 4, 400_000), vec![9]);
}

/// J16, J17: a tombstone is a version: a record at or after it has no row,
/// one before it sees the version before; an update of a timestamp already
/// there replaces that version.
#[test]
fn j16_j17_a_tombstone_is_a_version_and_equal_timestamps_replace() {
    let mut join = Replay::of(left(HOUR));
    join.profile("k", Some(1), 100);
    join.profile("k", None, 200);
    join.profile("k", Some(3), 300);
    assert_eq!(join.order("k", 0, 150), vec![1]);
    assert_eq!(join.order("k", 0, 200), vec![-1]);
    assert_eq!(join.order("k", 0, 299), vec![-1]);
    assert_eq!(join.order("k", 0, 300), vec![3]);
    join.profile("k", Some(2), 200);
    assert_eq!(
        join.order("k", 0, 250),
        vec![2],
        "the tombstone @200 was replaced"
    );
    join.profile("k", None, 300);
    assert_eq!(
        join.order("k", 0, 300),
        vec![-1],
        "the value @300 was replaced"
    );
    // A tombstone for a key without versions hides a later, older update.
    join.profile("j", None, 500);
    join.profile("j", Some(4), 400);
    assert_eq!(join.order("j", 0, 450), vec![4]);
    assert_eq!(join.order("j", 0, 500), vec![-1]);
}

/// J17: an inner join writes nothing without a version as of the record's
/// timestamp, and the joiner's result with one.
#[test]
fn j17_inner_writes_nothing_without_a_version() {
    let mut join = Replay::of(inner(HOUR));
    join.profile("k", Some(5), 1_000);
    assert_eq!(join.order("k", 2, 999), Vec::<i64>::new());
    assert_eq!(join.order("k", 2, 1_000), vec![2_005]);
    join.profile("k", None, 2_000);
    assert_eq!(join.order("k", 2, 2_000), Vec::<i64>::new());
}

/// J16: an update older than the observed stream time less the retention
/// is dropped; one exactly at that horizon is kept. The stream time is the
/// task's, moved by any key's update.
#[test]
fn j16_an_update_older_than_the_retention_is_dropped() {
    let mut join = Replay::of(left(1_000));
    join.profile("k", Some(1), 100);
    join.profile("other", Some(2), 5_000);
    // Horizon 4_000: @3_999 is dropped, @4_000 is kept.
    join.profile("k", Some(3), 3_999);
    assert_eq!(join.order("k", 0, 4_500), vec![1]);
    join.profile("k", Some(4), 4_000);
    assert_eq!(join.order("k", 0, 4_500), vec![4]);
}

/// J17: a record older than the horizon sees only the key's latest
/// version, when that is at or below its timestamp, and no row otherwise
/// (Kafka Streams keeps a key's latest version whatever its age).
#[test]
fn j17_a_record_older_than_the_retention_sees_only_the_latest_version() {
    let mut join = Replay::of(left(1_000));
    join.profile("k", Some(1), 100);
    join.profile("k", Some(2), 200);
    join.profile("j", Some(7), 300);
    join.profile("j", Some(8), 4_500);
    join.profile("other", Some(0), 5_000);
    // Horizon 4_000. k's latest (2 @200) is at or below 3_000: seen; its
    // older version (1 @100) is not, even at 150.
    assert_eq!(join.order("k", 0, 3_000), vec![2]);
    assert_eq!(join.order("k", 0, 150), vec![-1]);
    // j's latest is @4_500, above 3_000: no row, though 7 was in force.
    assert_eq!(join.order("j", 0, 3_000), vec![-1]);
    // Within the retention, the version in force.
    assert_eq!(join.order("j", 0, 4_000), vec![7]);
}

/// J16: a key's slot keeps only the versions a lookup within the retention
/// can reach: however many updates, the one in force at the horizon and
/// the later ones.
#[test]
fn j16_a_history_keeps_only_what_the_retention_reaches() {
    let mut join = Replay::of(left(1_000));
    for at in 0..100 {
        join.profile("k", Some(at), at * 100);
    }
    // Stream time 9_900, horizon 8_900: versions @8_900..=9_900.
    assert_eq!(join.versions("k"), 11);
    assert_eq!(join.order("k", 0, 8_950), vec![89]);
    // A tombstone beyond the retention leaves nothing to keep.
    join.profile("k", None, 10_000);
    join.profile("other", Some(1), 20_000);
    join.profile("k", None, 19_500);
    assert_eq!(join.versions("k"), 1);
    join.profile("other", Some(1), 30_000);
    join.profile("k", Some(5), 29_000);
    assert_eq!(join.order("k", 0, 29_500), vec![5]);
}

/// J16, J17: the history's own operations, without the stage: a put
/// reports a dropped update, and the clock moves only with puts.
#[test]
fn j16_j17_history_puts_and_lookups() {
    let value = |n: u8| Some(Bytes::from(vec![n]));
    let clock = Clock::default();
    let Put::Put { history, clock } = history::put(&[], clock, 10, 100, value(1)) else {
        panic!("the first put is kept");
    };
    let history = history.expect("a value is worth keeping");
    assert_eq!(clock.observed, Some(100));
    assert_eq!(
        history::put(&history, clock, 10, 89, value(2)),
        Put::Expired
    );
    let Put::Put { history, clock } = history::put(&history, clock, 10, 90, value(2)) else {
        panic!("an update at the horizon is kept");
    };
    let history = history.unwrap();
    assert_eq!(
        clock.observed,
        Some(100),
        "an older update leaves the clock"
    );
    assert_eq!(
        history,
        vec![
            Version {
                timestamp: 90,
                value: value(2)
            },
            Version {
                timestamp: 100,
                value: value(1)
            },
        ]
    );
    let at = |as_of| history::as_of(&history, clock, 10, as_of).map(|version| version.timestamp);
    assert_eq!(at(89), None);
    assert_eq!(at(90), Some(90));
    assert_eq!(at(99), Some(90));
    assert_eq!(at(100), Some(100));
    assert_eq!(at(i64::MAX), Some(100));
}

/// J18: a versioned join with different key codecs, one topic as both
/// sides, no output, or a retention that is not whole milliseconds is
/// refused when the application is built, naming J18 and the problem.
#[test]
fn j18_impossible_versioned_joins_are_refused_when_built() {
    let hour = Duration::from_millis(HOUR);
    let cases = [
        (
            Stage::named("as-of")
                .join(Join::stream_versioned_table(
                    &orders(),
                    &Topic::<String, i64>::with_codecs("profiles", Json, I64),
                    hour,
                ))
                .left(|_, _: Option<&i64>| 0i64)
                .into(&joined())
                .build(),
            "different codecs",
        ),
        (
            Stage::named("as-of")
                .join(Join::stream_versioned_table(&orders(), &orders(), hour))
                .left(|_, _: Option<&i64>| 0i64)
                .into(&joined())
                .build(),
            "one topic as both",
        ),
        (
            Stage::named("as-of")
                .join(Join::stream_versioned_table(&orders(), &profiles(), hour))
                .left(|_, _: Option<&i64>| 0i64)
                .build(),
            "no output topic",
        ),
        (
            Stage::named("as-of")
                .join(Join::stream_versioned_table(
                    &orders(),
                    &profiles(),
                    Duration::from_micros(1_500),
                ))
                .left(|_, _: Option<&i64>| 0i64)
                .into(&joined())
                .build(),
            "whole number of milliseconds",
        ),
        (
            Stage::named("as-of")
                .join(Join::stream_versioned_table(
                    &orders(),
                    &profiles(),
                    Duration::MAX,
                ))
                .left(|_, _: Option<&i64>| 0i64)
                .into(&joined())
                .build(),
            "up to i64::MAX",
        ),
    ];
    for (stage, reason) in cases {
        match Parsley::named("shop").stage(stage).build() {
            Err(error @ CompositionError::ImpossibleOperator { rules: "J18", .. }) => {
                let message = error.to_string();
                assert!(
                    message.contains(reason) && message.contains("as-of"),
                    "{reason}: {message}"
                );
            }
            other => panic!("expected J18's ImpossibleOperator ({reason}), got {other:?}"),
        }
    }
}

/// J18, C3: the table must have its stream's partition count.
#[test]
fn j18_assembly_refuses_a_table_not_co_partitioned_with_its_stream() {
    let app = Parsley::named("shop").stage(left(HOUR)).build().unwrap();
    let error = refused_with(&app, "profiles", 3);
    assert!(
        error.contains("\"profiles\"") && error.contains("(J4, J18)"),
        "{error}"
    );
}

/// J16, J17: a stream or table record without a key, or without a
/// timestamp, is refused naming its rule.
#[test]
fn j16_j17_records_without_a_key_or_timestamp_are_refused() {
    let mut join = Replay::of(left(HOUR));
    for (topic, rule) in [("profiles", "J16"), ("orders", "J17")] {
        let keyless = join.deliver(topic, None, Some(1), 5).unwrap_err();
        assert!(
            keyless.to_string().contains(rule) && keyless.to_string().contains("no key"),
            "{keyless}"
        );
        let untimed = join.deliver(topic, Some("k"), Some(1), -1).unwrap_err();
        assert!(
            untimed.to_string().contains(rule) && untimed.to_string().contains("no timestamp"),
            "{untimed}"
        );
    }
}

/// A left join with a grace period of `grace_ms`, history kept for an
/// hour, writing the profile's value or -1.
fn graced(grace_ms: u64) -> Stage {
    Stage::named("as-of")
        .join(Join::stream_versioned_table(
            &orders(),
            &profiles(),
            Duration::from_millis(HOUR),
        ))
        .left(|_order, profile: Option<&i64>| profile.copied().unwrap_or(-1))
        .into(&joined())
        .grace(Duration::from_millis(grace_ms))
        .build()
}

/// Orders delivered to a join that holds them.
trait Graced {
    /// What the order's delivery writes: each output's key, value and
    /// timestamp, in order.
    fn order_at(&mut self, key: &str, amount: i64, at: i64) -> Vec<(String, i64, i64)>;
}

impl Graced for Replay {
    fn order_at(&mut self, key: &str, amount: i64, at: i64) -> Vec<(String, i64, i64)> {
        self.deliver("orders", Some(key), Some(amount), at)
            .unwrap()
            .iter()
            .map(|emission| {
                let (key, value) = emission.encoded().unwrap();
                let key = String::from_utf8(key.unwrap().to_vec()).unwrap();
                let timestamp = emission.timestamp().expect("a held record's own timestamp");
                (key, I64.decode(value.unwrap()).unwrap(), timestamp)
            })
            .collect()
    }
}

fn out(key: &str, value: i64, timestamp: i64) -> (String, i64, i64) {
    (key.to_string(), value, timestamp)
}

/// J19: a stream record is held until the stream time reaches its
/// timestamp plus the grace, so a table update of an older timestamp
/// delivered after it is seen; its output carries its own timestamp. The
/// held record lives in the tick slot's bytes (the replay keeps nothing
/// else between deliveries), so a restart from the changelog keeps it.
#[test]
fn j19_a_held_record_sees_a_table_update_arriving_within_the_grace() {
    let mut join = Replay::of(graced(100));
    join.profile("k", Some(1), 0);
    assert_eq!(join.order_at("k", 1, 1_000), vec![], "held");
    join.profile("k", Some(2), 900);
    assert_eq!(
        join.order_at("k", 1, 1_099),
        vec![],
        "the stream time 1_099 is below 1_000 + 100"
    );
    assert_eq!(
        join.order_at("k", 1, 1_100),
        vec![out("k", 2, 1_000)],
        "released at 1_000 + 100, with the update @900 it came before"
    );
    // The same inputs without a grace period: the update is too late.
    let mut plain = Replay::of(left(HOUR));
    plain.profile("k", Some(1), 0);
    assert_eq!(plain.order("k", 1, 1_000), vec![1]);
}

/// J19: released records come in timestamp order, then key bytes, then
/// arrival; a record older than the stream time less the grace is joined
/// at once, and one whose grace the stream time already passed is
/// released in the delivery that holds it.
#[test]
fn j19_records_are_released_in_timestamp_order() {
    let mut join = Replay::of(graced(100));
    assert_eq!(join.order_at("k", 1, 500), vec![]);
    assert_eq!(join.order_at("j", 1, 450), vec![]);
    assert_eq!(join.order_at("b", 1, 480), vec![]);
    assert_eq!(join.order_at("a", 1, 480), vec![]);
    assert_eq!(
        join.order_at("k", 1, 600),
        vec![
            out("j", -1, 450),
            out("a", -1, 480),
            out("b", -1, 480),
            out("k", -1, 500)
        ]
    );
    assert_eq!(
        join.order_at("k", 1, 499),
        vec![out("k", -1, 499)],
        "600 - 100 > 499: too late to hold, joined at once"
    );
    assert_eq!(
        join.order_at("k", 1, 500),
        vec![out("k", -1, 500)],
        "held and released at once: the stream time 600 already reached 500 + 100"
    );
}

/// J19: only stream records move the join's stream time: a table update
/// however new releases nothing.
#[test]
fn j19_a_table_update_releases_nothing() {
    let mut join = Replay::of(graced(100));
    assert_eq!(join.order_at("k", 1, 1_000), vec![]);
    join.profile("k", Some(5), 10_000);
    join.profile("k", Some(4), 1_000);
    assert_eq!(join.order_at("j", 1, 1_100), vec![out("k", 4, 1_000)]);
}

/// J19: a grace longer than the history retention is refused when the
/// application is built, naming the stage, the grace and the retention; a
/// grace equal to it is not; one that is not whole milliseconds is refused
/// as J18 refuses such a retention.
#[test]
fn j19_a_grace_longer_than_the_retention_is_refused_when_built() {
    let join = |grace: Duration| {
        Stage::named("as-of")
            .join(Join::stream_versioned_table(
                &orders(),
                &profiles(),
                Duration::from_secs(60),
            ))
            .left(|_, _: Option<&i64>| 0i64)
            .into(&joined())
            .grace(grace)
            .build()
    };
    match Parsley::named("shop")
        .stage(join(Duration::from_secs(61)))
        .build()
    {
        Err(
            error @ CompositionError::VersionedGraceBeyondRetention {
                grace, retention, ..
            },
        ) => {
            assert_eq!(
                (grace, retention),
                (Duration::from_secs(61), Duration::from_secs(60))
            );
            let message = error.to_string();
            assert!(
                message.contains("J19") && message.contains("\"as-of\"") && message.contains("61s"),
                "{message}"
            );
        }
        other => panic!("expected VersionedGraceBeyondRetention, got {other:?}"),
    }
    let app = Parsley::named("shop")
        .stage(join(Duration::from_secs(60)))
        .build()
        .unwrap();
    let declared = app.stage("as-of").unwrap().stage.hooks();
    let declared = declared.operator::<VersionedJoinDecl>().unwrap();
    assert_eq!(declared.grace_ms(), Some(60_000));
    match Parsley::named("shop")
        .stage(join(Duration::from_micros(1_500)))
        .build()
    {
        Err(error @ CompositionError::ImpossibleOperator { rules: "J18", .. }) => {
            assert!(error.to_string().contains("grace period"), "{error}");
        }
        other => panic!("expected J18's ImpossibleOperator, got {other:?}"),
    }
}

/// J19, I13: the grace buffer's operations on their own: the stream time
/// is the highest held timestamp, and only a record below it less the
/// grace skips the buffer.
#[test]
fn j19_grace_buffer_arrivals() {
    use super::grace::{arrive, Buffer, Held};
    let held = |timestamp: i64, key: &'static str| Held {
        offset: 0,
        timestamp,
        key: Bytes::from_static(key.as_bytes()),
        value: None,
        headers: Vec::new(),
    };
    let first = arrive(&Buffer::default(), 10, held(100, "k"));
    assert_eq!(first.released, vec![]);
    assert_eq!(first.buffer.stream_time, Some(100));
    let late = arrive(&first.buffer, 10, held(89, "k"));
    assert_eq!(late.released, vec![held(89, "k")]);
    assert_eq!(
        late.buffer, first.buffer,
        "a record too late to hold changes nothing"
    );
    let edge = arrive(&first.buffer, 10, held(90, "k"));
    assert_eq!(
        edge.released,
        vec![held(90, "k")],
        "held at the edge, released at once"
    );
    let on = arrive(&first.buffer, 10, held(110, "j"));
    assert_eq!(on.released, vec![held(100, "k")]);
    assert_eq!(on.buffer.held, vec![held(110, "j")]);
}

#[test]
fn j19_a_grace_with_a_dead_letter_queue_is_refused_when_built() {
    let join = |dead_letters: bool| {
        let join = Stage::named("as-of")
            .join(Join::stream_versioned_table(
                &orders(),
                &profiles(),
                Duration::from_secs(60),
            ))
            .left(|_, _: Option<&i64>| 0i64)
            .into(&joined())
            .grace(Duration::from_secs(1));
        match dead_letters {
            true => join.dead_letter_queue().build(),
            false => join.build(),
        }
    };
    let message = Parsley::named("shop")
        .stage(join(true))
        .build()
        .expect_err("a grace with a dead-letter queue is refused")
        .to_string();
    assert!(
        message.contains("J19") && message.contains("dead-letter queue"),
        "{message}"
    );
    assert!(Parsley::named("shop").stage(join(false)).build().is_ok());
}
