//! E1–E3 through the stage's public replay: an expiring fold's logic run
//! over slots kept here, as a checker would keep them.

use std::time::Duration;

use super::*;
use crate::record::{ConsumedRecord, RecordData};
use crate::stage::replaying::Replay;
use crate::stage::{ReplayError, SlotKey};
use crate::tp::Tp;
use crate::{CompositionError, Emission, Json, Parsley, Utf8, I64};

fn orders() -> Topic<String, i64> {
    Topic::with_codecs("orders", Utf8, I64)
}

fn counts() -> Topic<String, i64> {
    Topic::with_codecs("counts", Utf8, I64)
}

/// Counts each key's orders while its state lives, emitting the count.
fn counting(expiring: Expiring) -> Stage {
    let out = counts();
    Stage::named("count")
        .expiring(expiring)
        .fold(
            &orders(),
            Json,
            || 0i64,
            move |count: i64, order| {
                let count = count + 1;
                match *order.value() {
                    // A negative amount forgets the key (Step::delete).
                    amount if amount < 0 => Step::delete().emit(out.send(order.key().cloned(), 0)),
                    _ => Step::of(count).emit(out.send(order.key().cloned(), count)),
                }
            },
        )
        .into(&counts())
        .build()
}

/// Orders and ticks, replayed.
trait Orders {
    fn try_order(
        &mut self,
        key: Option<&str>,
        amount: i64,
        at: i64,
    ) -> Result<Vec<Emission>, ReplayError>;

    /// The count the order's delivery emits.
    fn order(&mut self, key: &str, amount: i64, at: i64) -> i64;

    /// A tick at `at`, which expires state and emits nothing.
    fn expire_at(&mut self, at: i64);

    fn live_keys(&self) -> Vec<String>;
}

impl Orders for Replay {
    fn try_order(
        &mut self,
        key: Option<&str>,
        amount: i64,
        at: i64,
    ) -> Result<Vec<Emission>, ReplayError> {
        self.deliver("orders", key, Some(amount), at)
    }

    fn order(&mut self, key: &str, amount: i64, at: i64) -> i64 {
        let emitted = self
            .try_order(Some(key), amount, at)
            .expect("a valid order");
        assert_eq!(emitted.len(), 1, "{emitted:?}");
        I64.decode(emitted[0].encoded().unwrap().1.unwrap())
            .unwrap()
    }

    fn expire_at(&mut self, at: i64) {
        let emitted = self.tick(at).unwrap();
        assert!(emitted.is_empty());
    }

    fn live_keys(&self) -> Vec<String> {
        self.slots
            .keys()
            .filter_map(|slot| match slot {
                SlotKey::Key(key) => Some(String::from_utf8(key.to_vec()).unwrap()),
                _ => None,
            })
            .collect()
    }
}

/// E1, E2: state lives `ttl` after its last write by stream time, and not a
/// millisecond less: at `written + ttl - 1` it is there, at `written + ttl`
/// it is gone.
#[test]
fn e1_e2_state_expires_ttl_after_its_last_write_not_before() {
    let mut count = Replay::of(counting(Expiring::after(Duration::from_millis(100))));
    assert_eq!(count.order("a", 1, 1_000), 1);
    assert_eq!(count.order("a", 1, 1_099), 2);
    // The last write was at 1_099: alive until 1_199.
    assert_eq!(count.order("a", 1, 1_198), 3);
    assert_eq!(
        count.order("a", 1, 1_298),
        1,
        "expired at 1_298 = 1_198 + ttl"
    );
}

/// E1: from the first write, rewrites keep the expiry time (a
/// deduplication window).
#[test]
fn e1_from_first_write_rewrites_keep_the_expiry_time() {
    let mut count = Replay::of(counting(
        Expiring::after(Duration::from_millis(100)).from_first_write(),
    ));
    assert_eq!(count.order("a", 1, 1_000), 1);
    assert_eq!(count.order("a", 1, 1_050), 2);
    assert_eq!(count.order("a", 1, 1_099), 3);
    assert_eq!(count.order("a", 1, 1_100), 1, "expired 100 ms after 1_000");
}

/// E2: the delivery that moves the frontier past a key's expiry deletes it,
/// whichever key it delivers; the clock lives in the tick slot.
#[test]
fn e2_any_records_delivery_expires_what_is_due() {
    let mut count = Replay::of(counting(Expiring::after(Duration::from_millis(100))));
    count.order("a", 1, 1_000);
    count.order("b", 1, 1_050);
    assert_eq!(count.live_keys(), ["a", "b"]);
    count.order("c", 1, 1_100);
    assert_eq!(count.live_keys(), ["b", "c"]);
    assert!(count.slots.contains_key(&SlotKey::Tick));
    count.order("c", 1, 1_150);
    assert_eq!(count.live_keys(), ["c"]);
}

/// E3: a record `ttl` or more behind stream time leaves no state; a fold's
/// delete removes the key at once.
#[test]
fn e3_a_record_too_far_behind_leaves_no_state_and_delete_deletes() {
    let mut count = Replay::of(counting(Expiring::after(Duration::from_millis(100))));
    count.order("a", 1, 5_000);
    assert_eq!(count.order("b", 1, 4_900), 1);
    assert_eq!(count.live_keys(), ["a"]);
    assert_eq!(
        count.order("b", 1, 4_950),
        1,
        "b's first state was never kept"
    );
    assert_eq!(count.order("a", -1, 5_001), 0);
    assert_eq!(count.live_keys(), ["b"]);
    assert_eq!(count.order("a", 1, 5_002), 1);
}

/// E2: with wall-clock expiry records leave the frontier alone; a tick
/// moves it and expires what it reaches.
#[test]
fn e2_wall_clock_expiry_is_moved_by_ticks_alone() {
    let mut count = Replay::of(counting(
        Expiring::after(Duration::from_millis(100)).expire_by(Expire::WallClock {
            resolution: Duration::from_millis(10),
        }),
    ));
    count.order("a", 1, 1_000);
    // A record far ahead does not expire `a`: only ticks move the frontier.
    count.order("b", 1, 9_000);
    assert_eq!(count.order("a", 1, 1_010), 2);
    count.expire_at(1_109);
    assert_eq!(count.live_keys(), ["a", "b"]);
    count.expire_at(1_110);
    assert_eq!(count.live_keys(), ["b"]);
    assert_eq!(count.order("a", 1, 1_111), 1);
}

/// E1: keyless records and negative timestamps are refused naming E1 and
/// the record; a zero time to live is refused at build.
#[test]
fn e1_bad_records_and_a_zero_ttl_are_refused() {
    let mut count = Replay::of(counting(Expiring::after(Duration::from_millis(100))));
    for (key, at, needle) in [(None, 5, "has no key"), (Some("a"), -1, "has no timestamp")] {
        match count.try_order(key, 1, at) {
            Err(ReplayError::Logic(message)) => {
                assert!(
                    message.starts_with("E1 ") && message.contains(needle),
                    "{message}"
                )
            }
            other => panic!("expected E1's refusal, got {other:?}"),
        }
    }
    match Parsley::named("shop")
        .stage(counting(Expiring::after(Duration::ZERO)))
        .build()
    {
        Err(error @ CompositionError::ImpossibleOperator { rules: "E1", .. }) => {
            assert!(
                error.to_string().contains("a time to live of zero"),
                "{error}"
            )
        }
        other => panic!("expected E1's ImpossibleOperator, got {other:?}"),
    }
}

/// I14's view: `ExpiryDecl::initial` and `ExpiryDecl::fold` run the
/// user's initial state and fold over encoded states, and tell a deletion.
#[test]
fn expiring_fold_runs_the_users_fold_over_encoded_states() {
    let stage = counting(Expiring::after(Duration::from_millis(100)));
    let decl = stage
        .hooks()
        .operator::<crate::expiry::ExpiryDecl>()
        .unwrap();
    let tp = Tp::new("orders", 0);
    let record = |amount: i64| ConsumedRecord {
        offset: 0,
        data: RecordData {
            key: Some(bytes::Bytes::from_static(b"a")),
            value: Some(bytes::Bytes::copy_from_slice(&amount.to_be_bytes())),
            headers: Vec::new(),
            timestamp: 0,
        },
    };
    let initial = decl.initial().unwrap();
    assert_eq!(Json.decode(&initial).map(|count: i64| count).unwrap(), 0);
    let (state, _) = decl.fold(&initial, &tp, &record(1)).unwrap();
    let (state, emitted) = decl.fold(&state.unwrap(), &tp, &record(1)).unwrap();
    let state = state.expect("a count is kept");
    assert_eq!(Json.decode(&state).map(|count: i64| count).unwrap(), 2);
    assert_eq!(
        I64.decode(emitted[0].encoded().unwrap().1.unwrap())
            .unwrap(),
        2
    );
    let (gone, _) = decl.fold(&state, &tp, &record(-1)).unwrap();
    assert!(gone.is_none(), "a negative amount deletes the state");
}
