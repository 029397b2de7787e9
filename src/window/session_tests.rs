//! W5 and the session cases of W2–W4, through the stage's public replay.
//! Emissions print as `key[start,end)=total`; for a session, `end` is its
//! last record's timestamp.

use super::tests::{late, sales, totals, Sales};
use super::*;
use crate::record::{ConsumedRecord, RecordData};
use crate::stage::replaying::Replay;
use crate::tp::Tp;
use crate::{CompositionError, Emission, Parsley, Utf8, I64};

fn sessions(gap: u64, grace: u64) -> OperatorBuilder<WindowAggregation<String, i64, i64>> {
    Stage::named("totals")
        .windowed(
            SessionWindows::with_inactivity_gap(Duration::from_millis(gap))
                .grace(Duration::from_millis(grace)),
        )
        .aggregate(
            &sales(),
            I64,
            || 0i64,
            |total, sale| total + sale.value,
            |one, two| one + two,
        )
        .into(&totals())
}

/// W5: a record within the gap of a session joins it; one more than the
/// gap away starts its own; one within the gap of two sessions merges
/// them (their aggregates combined by the merge). W2: the merged session
/// closes once stream time passes its end + gap + grace, not at it.
#[test]
fn w5_records_within_the_gap_make_one_session_and_bridges_merge() {
    let mut replay = Replay::of(sessions(10, 100).build());
    assert!(replay.sale("k", 1, 0).is_empty());
    assert!(replay.sale("k", 2, 5).is_empty());
    // 20 - 5 > 10: a session of its own.
    assert!(replay.sale("k", 4, 20).is_empty());
    assert_eq!(replay.slots.len(), 2, "the clock and k's slot");
    // 12 is within 10 of 5 and of 20: [0, 5] and [20, 20] merge into [0, 20].
    assert!(replay.sale("k", 8, 12).is_empty());
    // 130 = 20 + 10 + 100: still open.
    assert!(replay.sale("other", 16, 130).is_empty());
    assert_eq!(replay.sale("other", 32, 131), ["k[0,20)=15"]);
}

/// W5: sessions of different keys never merge; W4: the sessions one
/// delivery closes are written in the order (end, key, start).
#[test]
fn w4_w5_keys_keep_their_own_sessions_and_close_in_end_key_order() {
    let mut replay = Replay::of(sessions(10, 0).build());
    assert!(replay.sale("b", 1, 0).is_empty());
    assert!(replay.sale("a", 2, 3).is_empty());
    assert!(replay.sale("b", 4, 3).is_empty());
    // 14 passes 3 + 10: both sessions end at 3 and close, a before b.
    assert_eq!(replay.sale("c", 8, 14), ["a[3,3)=2", "b[0,3)=5"]);
}

/// W4, W5: a session is written at its end, the highest timestamp among
/// its records, as Kafka Streams writes its sessions; a merge takes the
/// later end.
#[test]
fn w4_w5_a_session_is_written_at_its_end() {
    let mut replay = Replay::of(sessions(10, 20).build());
    for (amount, at) in [(1, 30), (2, 25), (4, 38)] {
        assert!(replay.try_sale(Some("k"), amount, at).unwrap().is_empty());
    }
    let closed = replay.try_sale(Some("other"), 8, 69).unwrap();
    assert_eq!(
        closed.iter().map(Emission::timestamp).collect::<Vec<_>>(),
        [Some(38)],
        "{closed:?}"
    );
}

/// W3: a record whose session would be closed already (its end + gap +
/// grace behind stream time) is late: written to the late topic as it
/// came, merged into nothing, the sessions it touches left as they were.
/// A record within the gap of a session that has closed and been written
/// starts a session of its own: a closed session is final (as in Kafka
/// Streams with its default store retention).
#[test]
fn w3_a_late_record_leaves_the_sessions_alone_and_a_closed_session_is_final() {
    let mut replay = Replay::of(sessions(10, 5).late_records_to(&late()).build());
    assert!(replay.sale("k", 1, 100).is_empty());
    assert!(replay.sale("other", 2, 110).is_empty());
    // [100, 100] closes once the frontier passes 100 + 10 + 5.
    assert!(replay.sale("other", 4, 115).is_empty());
    assert_eq!(replay.sale("other", 4, 116), ["k[100,100)=1"]);
    // 90 + 10 + 5 < 116: late, written as it came, merged into nothing.
    assert_eq!(replay.sale("k", 8, 90), ["late-sales:k=8"]);
    // 108 is within the gap of [100, 100], which closed: a session of its
    // own, on time (108 + 15 >= 116).
    assert!(replay.sale("k", 16, 108).is_empty());
    assert_eq!(replay.sale("other", 0, 124), ["k[108,108)=16"]);
}

/// W5: what a checker may run of a session aggregation is the user's
/// logic alone: the initial value, the fold, the merge and a session's
/// output record, over aggregates encoded with the aggregate's codec.
#[test]
fn w5_a_checker_runs_the_users_initial_fold_merge_and_output() {
    let stage = sessions(10, 0).build();
    let decl = stage
        .hooks()
        .operator::<crate::window::WindowDecl>()
        .unwrap();
    let tp = Tp::new("sales", 0);
    let record = |offset: u64, amount: i64, at: i64| ConsumedRecord {
        offset,
        data: RecordData {
            key: Some(bytes::Bytes::from_static(b"k")),
            value: Some(bytes::Bytes::copy_from_slice(&amount.to_be_bytes())),
            headers: Vec::new(),
            timestamp: at,
        },
    };
    let (first, second, bridge) = (record(0, 1, 0), record(1, 2, 20), record(2, 4, 10));
    let initial = decl.initial().unwrap();
    let one = decl.fold(&initial, &tp, &first).unwrap();
    let two = decl.fold(&initial, &tp, &second).unwrap();
    let merged = decl
        .merge(&decl.merge(&initial, &one).unwrap(), &two)
        .unwrap();
    let bridged = decl.fold(&merged, &tp, &bridge).unwrap();
    let (key, value) = decl.output(b"k", (0, 20), &bridged).unwrap();
    assert_eq!(
        WindowedCodec(Utf8).decode(&key).unwrap(),
        Windowed {
            key: "k".to_string(),
            start: 0,
            end: 20
        }
    );
    assert_eq!(I64.decode(&value).unwrap(), 7);
}

/// W5: a zero gap, and sessions emitting on update, are refused when the
/// application is built, naming the stage and what is wrong.
#[test]
fn w5_impossible_sessions_are_refused_at_build() {
    let build = |stage: Stage| Parsley::named("shop").stage(stage).build().map(|_| ());
    for (stage, reason) in [
        (sessions(0, 0).build(), "inactivity gap of zero"),
        (
            sessions(10, 0).emit(Emit::OnUpdate).build(),
            "emitting on update",
        ),
    ] {
        match build(stage) {
            Err(
                error @ CompositionError::ImpossibleOperator {
                    rules: "W1, W5", ..
                },
            ) => {
                let text = error.to_string();
                assert!(
                    text.contains("\"totals\"") && text.contains(reason),
                    "{text}"
                );
            }
            other => panic!("expected W1's ImpossibleOperator ({reason}), got {other:?}"),
        }
    }
}
