//! W1–W4 through the stage's public replay: a windowed aggregation's logic
//! run over slots kept here, as a checker would keep them.

use super::*;
use crate::record::{ConsumedRecord, RecordData};
use crate::stage::replaying::Replay;
use crate::stage::ReplayError;
use crate::tp::Tp;
use crate::{CompositionError, Emission, Parsley, Utf8, I64};

pub(super) fn sales() -> Topic<String, i64> {
    Topic::with_codecs("sales", Utf8, I64)
}

pub(super) fn totals() -> Topic<Windowed<String>, i64> {
    Topic::with_codecs("totals", WindowedCodec(Utf8), I64)
}

pub(super) fn late() -> Topic<String, i64> {
    Topic::with_codecs("late-sales", Utf8, I64)
}

fn summing(windows: Windows) -> OperatorBuilder<WindowAggregation<String, i64, i64>> {
    Stage::named("totals")
        .windowed(windows)
        .aggregate(&sales(), I64, || 0i64, |total, sale| total + sale.value)
        .into(&totals())
}

/// Sales and ticks, replayed.
pub(super) trait Sales {
    fn try_sale(
        &mut self,
        key: Option<&str>,
        amount: i64,
        at: i64,
    ) -> Result<Vec<Emission>, ReplayError>;

    /// A sale's emissions, as (topic, key, start, end, total) for the
    /// output and (topic, key, amount) for late records.
    fn sale(&mut self, key: &str, amount: i64, at: i64) -> Vec<String>;

    /// What a tick at `at` emits, described as a sale's emissions are.
    fn closed_at(&mut self, at: i64) -> Vec<String>;
}

impl Sales for Replay {
    fn try_sale(
        &mut self,
        key: Option<&str>,
        amount: i64,
        at: i64,
    ) -> Result<Vec<Emission>, ReplayError> {
        self.deliver("sales", key, Some(amount), at)
    }

    fn sale(&mut self, key: &str, amount: i64, at: i64) -> Vec<String> {
        let emitted = self.try_sale(Some(key), amount, at).expect("a valid sale");
        emitted.iter().map(describe).collect()
    }

    fn closed_at(&mut self, at: i64) -> Vec<String> {
        let emitted = self.tick(at).expect("a windowed stage's tick");
        emitted.iter().map(describe).collect()
    }
}

fn describe(emission: &Emission) -> String {
    let (key, value) = emission.encoded().expect("encoded");
    match emission.topic().as_str() {
        "totals" => {
            let key = WindowedCodec(Utf8)
                .decode(key.expect("a key"))
                .expect("a windowed key");
            let total = I64.decode(value.expect("a value")).expect("a total");
            format!("{}[{},{})={total}", key.key, key.start, key.end)
        }
        topic => {
            let key = String::from_utf8(key.expect("a key").to_vec()).unwrap();
            format!(
                "{topic}:{key}={}",
                I64.decode(value.expect("a value")).unwrap()
            )
        }
    }
}

/// W1, W4: a tumbling window sums each key's records of `[start, end)` and
/// writes the sum once, when a later record closes it (stream time, no
/// grace): the closes of one delivery in the order (end, start, key).
#[test]
fn w1_w4_tumbling_windows_emit_each_key_once_on_close() {
    let mut replay = Replay::of(summing(Windows::tumbling(Duration::from_millis(60))).build());
    assert!(replay.sale("b", 1, 0).is_empty());
    assert!(replay.sale("a", 2, 10).is_empty());
    assert!(replay.sale("a", 3, 59).is_empty());
    // At 60 the first window closes; a's second window opens.
    assert_eq!(replay.sale("a", 4, 60), ["a[0,60)=5", "b[0,60)=1"]);
    assert!(replay.sale("b", 5, 119).is_empty());
    assert_eq!(replay.sale("c", 6, 185), ["a[60,120)=4", "b[60,120)=5"]);
    // A closed window's slot is removed; c's window stays open.
    assert_eq!(
        replay.slots.len(),
        2,
        "the clock and c's window: {:?}",
        replay.slots.keys()
    );
}

/// W1: a hopping window's record is folded into every window that holds
/// it; W4 on update writes each window's new aggregate, and nothing on
/// close.
#[test]
fn w1_w4_hopping_windows_on_update_write_every_window_a_record_changes() {
    let mut replay = Replay::of(
        summing(Windows::hopping(
            Duration::from_millis(100),
            Duration::from_millis(50),
        ))
        .emit(Emit::OnUpdate)
        .build(),
    );
    assert_eq!(replay.sale("k", 1, 10), ["k[0,100)=1"]);
    assert_eq!(replay.sale("k", 2, 60), ["k[0,100)=3", "k[50,150)=2"]);
    // 149 closes [0, 100): on update, that writes nothing.
    assert_eq!(replay.sale("k", 4, 149), ["k[50,150)=6", "k[100,200)=4"]);
    assert_eq!(replay.sale("k", 8, 250), ["k[200,300)=8", "k[250,350)=8"]);
}

/// W2: a window closes when stream time reaches its end plus grace, not a
/// millisecond earlier; W3: a record whose window closed is late: counted,
/// written as it came to the late topic, and folded into nothing.
#[test]
fn w2_w3_grace_holds_a_window_open_to_its_last_millisecond() {
    let mut replay = Replay::of(
        summing(Windows::tumbling(Duration::from_millis(60)).grace(Duration::from_millis(10)))
            .late_records_to(&late())
            .build(),
    );
    assert!(replay.sale("k", 1, 30).is_empty());
    // 69 is end + grace - 1: the window still takes a record of 59.
    assert!(replay.sale("k", 2, 69).is_empty());
    assert!(replay.sale("k", 4, 59).is_empty());
    // 70 = end + grace closes it.
    assert_eq!(replay.sale("k", 8, 70), ["k[0,60)=5"]);
    assert_eq!(replay.sale("k", 16, 59), ["late-sales:k=16"]);
    assert_eq!(replay.sale("k", 32, 200), ["k[60,120)=10"]);
}

/// W4: a window's records carry the highest timestamp among the records
/// folded into it, as Kafka Streams' windowed aggregates do: on update,
/// and on close (not the timestamp of the record that closed it).
#[test]
fn w4_a_window_is_written_at_its_highest_record_timestamp() {
    let timestamps = |emitted: Vec<Emission>| -> Vec<Option<i64>> {
        emitted.iter().map(Emission::timestamp).collect()
    };
    let mut on_close = Replay::of(
        summing(Windows::tumbling(Duration::from_millis(60)).grace(Duration::from_millis(30)))
            .build(),
    );
    for (amount, at) in [(1, 10), (2, 50), (4, 30)] {
        assert!(on_close.try_sale(Some("k"), amount, at).unwrap().is_empty());
    }
    // 90 closes [0, 60): written at 50, its latest record, not at 90.
    assert_eq!(
        timestamps(on_close.try_sale(Some("j"), 8, 90).unwrap()),
        [Some(50)]
    );

    let mut on_update = Replay::of(
        summing(Windows::tumbling(Duration::from_millis(60)))
            .emit(Emit::OnUpdate)
            .build(),
    );
    assert_eq!(
        timestamps(on_update.try_sale(Some("k"), 1, 40).unwrap()),
        [Some(40)]
    );
    // A record back in time rewrites the window at its latest timestamp.
    assert_eq!(
        timestamps(on_update.try_sale(Some("k"), 2, 20).unwrap()),
        [Some(40)]
    );
    assert_eq!(
        timestamps(on_update.try_sale(Some("k"), 4, 45).unwrap()),
        [Some(45)]
    );
}

/// W2: with wall-clock closing, records do not move the frontier (a record
/// far ahead closes nothing); a tick closes what its time reaches.
#[test]
fn w2_wall_clock_windows_close_on_ticks_alone() {
    let mut replay = Replay::of(
        summing(Windows::tumbling(Duration::from_millis(60)))
            .close_by(Close::WallClock {
                resolution: Duration::from_millis(10),
            })
            .build(),
    );
    assert!(replay.sale("k", 1, 30).is_empty());
    assert!(replay.sale("k", 2, 500).is_empty());
    assert!(replay.closed_at(59).is_empty());
    assert_eq!(replay.closed_at(60), ["k[0,60)=1"]);
    // A record for a window the clock closed is late.
    assert!(replay.sale("k", 4, 40).is_empty());
    assert_eq!(replay.closed_at(560), ["k[480,540)=2"]);
}

/// W1: a record without a key or without a timestamp is refused, naming the
/// rule and the record; so is one the source's codec rejects.
#[test]
fn w1_records_without_key_or_timestamp_are_refused() {
    let mut replay = Replay::of(summing(Windows::tumbling(Duration::from_millis(60))).build());
    let no_key = replay.try_sale(None, 1, 5).unwrap_err();
    assert!(
        matches!(&no_key, ReplayError::Logic(message) if message.contains("W1") && message.contains("sales-0@0") && message.contains("no key")),
        "{no_key}"
    );
    let no_time = replay.try_sale(Some("k"), 1, -1).unwrap_err();
    assert!(
        matches!(&no_time, ReplayError::Logic(message) if message.contains("W1") && message.contains("sales-0@1")),
        "{no_time}"
    );
    assert!(replay.slots.is_empty(), "a refused record changes nothing");
}

/// W4: windowed keys read back as written; bytes too short for the window
/// bounds are refused, naming what was short (§8).
#[test]
fn w4_windowed_keys_round_trip_and_short_bytes_are_refused() {
    let codec = WindowedCodec(Utf8);
    let key = Windowed {
        key: "product-7".to_string(),
        start: 60_000,
        end: 120_000,
    };
    assert_eq!(codec.decode(&codec.encode(&key).unwrap()).unwrap(), key);
    let error = codec.decode(b"short").unwrap_err();
    assert!(
        error.message.contains("16 bytes of window bounds, got 5"),
        "{error}"
    );
}

/// W1: impossible windows and a missing output are refused when the
/// application is built, naming the stage and what is wrong.
#[test]
fn w1_impossible_windows_are_refused_at_build() {
    let build = |stage: Stage| Parsley::named("shop").stage(stage).build().map(|_| ());
    let zero = summing(Windows::tumbling(Duration::ZERO)).build();
    let wide = summing(Windows::hopping(
        Duration::from_secs(1),
        Duration::from_secs(2),
    ))
    .build();
    let no_output = Stage::named("totals")
        .windowed(Windows::tumbling(Duration::from_secs(1)))
        .aggregate(&sales(), I64, || 0i64, |total, sale| total + sale.value)
        .build();
    for (stage, reason) in [
        (zero, "a window size of zero"),
        (wide, "larger than the window size"),
        (no_output, "no output topic"),
    ] {
        match build(stage) {
            Err(
                error @ CompositionError::ImpossibleOperator {
                    rules: "W1, W5", ..
                },
            ) => {
                let text = error.to_string();
                assert!(
                    text.contains("W1") && text.contains("\"totals\"") && text.contains(reason),
                    "{text}"
                );
            }
            other => panic!("expected W1's ImpossibleOperator ({reason}), got {other:?}"),
        }
    }
    let zero_resolution = summing(Windows::tumbling(Duration::from_secs(1)))
        .close_by(Close::WallClock {
            resolution: Duration::ZERO,
        })
        .build();
    assert!(matches!(
        build(zero_resolution),
        Err(CompositionError::ZeroTickInterval { .. })
    ));
}

/// A windowed stage's deliveries read every slot: the one-slot replays are
/// refused with the way to replay them.
#[test]
fn a_windowed_stage_is_replayed_over_its_slots() {
    let stage = summing(Windows::tumbling(Duration::from_secs(1))).build();
    assert!(stage.hooks().record_reads_every_slot());
    let record = ConsumedRecord {
        offset: 0,
        data: RecordData {
            key: Some(bytes::Bytes::from_static(b"k")),
            value: Some(bytes::Bytes::copy_from_slice(&1i64.to_be_bytes())),
            headers: Vec::new(),
            timestamp: 0,
        },
    };
    let refused = stage
        .hooks()
        .replay_record(sales().name(), None, &Tp::new("sales", 0), &record)
        .unwrap_err();
    assert!(
        matches!(refused, ReplayError::ReadsEverySlot { .. }),
        "{refused}"
    );
    let tp = Tp::new("sales", 0);
    let decl = stage
        .hooks()
        .operator::<crate::window::WindowDecl>()
        .unwrap();
    let once = decl.fold(&decl.initial().unwrap(), &tp, &record).unwrap();
    let twice = decl.fold(&once, &tp, &record).unwrap();
    let refused = decl.merge(&once, &twice).unwrap_err();
    assert!(
        matches!(&refused, ReplayError::Logic(message) if message.contains("W5")),
        "time windows have no merge: {refused}"
    );
    let (key, value) = decl.output(b"k", (0, 1000), &twice).unwrap();
    assert_eq!(
        WindowedCodec(Utf8).decode(&key).unwrap(),
        Windowed {
            key: "k".to_string(),
            start: 0,
            end: 1000
        }
    );
    assert_eq!(I64.decode(&value).unwrap(), 2);
}
