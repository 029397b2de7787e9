//! Expiring state (E1–E3) under the `TestDriver`: pipe records with
//! timestamps or advance the wall clock, and watch state expire. The
//! application is not an example: API calls keyed by client, rate-limited
//! to three per second from a client's first call (event time), and each
//! client's session of calls, which ends after five minutes of wall-clock
//! quiet; a third stage totals the allowed calls per client.

use std::time::Duration;

use crate::support::{one_partition_driver, START};
use parsley::{App, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley::{Expire, Expiring};
use parsley_sim::{DriverError, TestDriver, TestRecord};

struct Api {
    calls: Topic<String, i64>,
    allowed: Topic<String, i64>,
    session_calls: Topic<String, i64>,
    totals: Topic<String, i64>,
    app: App,
}

fn api() -> Api {
    let long = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let (calls, allowed, session_calls, totals) = (
        long("api-calls"),
        long("allowed-calls"),
        long("session-calls"),
        long("allowed-totals"),
    );
    let limiter = Stage::named("rate-limit")
        .expiring(Expiring::after(Duration::from_secs(1)).from_first_write())
        .fold(&calls, Json, || 0i64, {
            let allowed = allowed.clone();
            move |count: i64, call| match count < 3 {
                true => Step::of(count + 1).emit(allowed.send(call.key().cloned(), *call.value())),
                false => Step::of(count),
            }
        })
        .into(&allowed)
        .build();
    let sessions = Stage::named("sessions")
        .expiring(
            Expiring::after(Duration::from_secs(300)).expire_by(Expire::WallClock {
                resolution: Duration::from_secs(10),
            }),
        )
        .fold(&calls, Json, || 0i64, {
            let session_calls = session_calls.clone();
            move |count: i64, call| {
                Step::of(count + 1).emit(session_calls.send(call.key().cloned(), count + 1))
            }
        })
        .into(&session_calls)
        .build();
    let totalling = Stage::named("totals")
        .state(Json, || 0i64)
        .on(&allowed, {
            let totals = totals.clone();
            move |total: i64, call| {
                Step::of(total + call.value())
                    .emit(totals.send(call.key().cloned(), total + call.value()))
            }
        })
        .into(&totals)
        .build();
    let app = Parsley::named("api")
        .stage(limiter)
        .stage(sessions)
        .stage(totalling)
        .build()
        .unwrap();
    Api {
        calls,
        allowed,
        session_calls,
        totals,
        app,
    }
}

fn driver(api: &Api) -> TestDriver {
    one_partition_driver(&api.app, START)
}

/// E1, E2: three calls a second per client from its first call; the
/// fourth within the second is dropped, and a call at exactly one second
/// after the first starts a new second. The downstream fold sees only the
/// allowed ones.
#[test]
fn e1_e2_a_rate_limit_window_runs_from_the_first_call() {
    let api = api();
    let driver = driver(&api);
    let calls = driver.input(&api.calls).unwrap();
    for (client, at) in [
        ("ann", 0),
        ("ann", 10),
        ("bob", 20),
        ("ann", 30),
        ("ann", 40),
        ("ann", 999),
    ] {
        calls
            .pipe_record(TestRecord::new(client, 1).at(START + at))
            .unwrap();
    }
    assert_eq!(
        driver
            .live_state::<i64, _, _>("rate-limit", &api.calls)
            .unwrap(),
        [
            ("ann".to_string(), 3, START + 1_000),
            ("bob".to_string(), 1, START + 1_020)
        ]
    );
    calls
        .pipe_record(TestRecord::new("ann", 5).at(START + 1_000))
        .unwrap();
    let allowed = driver.output(&api.allowed).unwrap();
    assert_eq!(
        allowed.read_key_values_to_list().unwrap(),
        [
            (Some("ann".to_string()), 1),
            (Some("ann".to_string()), 1),
            (Some("bob".to_string()), 1),
            (Some("ann".to_string()), 1),
            (Some("ann".to_string()), 5),
        ]
    );
    assert_eq!(
        driver.output(&api.totals).unwrap().read_values().unwrap(),
        [1, 2, 1, 3, 8]
    );
}

/// E2: wall-clock expiry is moved by `advance_wall_clock`, records or not:
/// a session ends five minutes after its last call, at most a tick late.
#[test]
fn e2_advance_wall_clock_expires_a_quiet_session() {
    let api = api();
    let driver = driver(&api);
    let calls = driver.input(&api.calls).unwrap();
    calls.pipe("ann", 1).unwrap();
    driver.advance_wall_clock(Duration::from_secs(200)).unwrap();
    calls.pipe("ann", 1).unwrap();
    let live = driver
        .live_state::<i64, _, _>("sessions", &api.calls)
        .unwrap();
    assert_eq!(live, [("ann".to_string(), 2, START + 500_000)]);
    // 299 s after the last call: still live.
    driver.advance_wall_clock(Duration::from_secs(299)).unwrap();
    assert_eq!(
        driver
            .live_state::<i64, _, _>("sessions", &api.calls)
            .unwrap()
            .len(),
        1
    );
    // Past 300 s and the next tick: gone, and the next call starts over.
    driver.advance_wall_clock(Duration::from_secs(11)).unwrap();
    assert!(driver
        .live_state::<i64, _, _>("sessions", &api.calls)
        .unwrap()
        .is_empty());
    calls.pipe("ann", 1).unwrap();
    assert_eq!(
        driver
            .output(&api.session_calls)
            .unwrap()
            .read_values()
            .unwrap(),
        [1, 2, 1]
    );
}

/// X1, S5: a restart restores live state and the frontier: what had
/// expired stays expired, what lived still lives.
#[test]
fn x1_a_restart_keeps_live_state_and_the_frontier() {
    let api = api();
    let driver = driver(&api);
    let calls = driver.input(&api.calls).unwrap();
    calls
        .pipe_record(TestRecord::new("ann", 1).at(START))
        .unwrap();
    calls
        .pipe_record(TestRecord::new("bob", 1).at(START + 1_500))
        .unwrap();
    driver.restart().unwrap();
    assert_eq!(
        driver
            .live_state::<i64, _, _>("rate-limit", &api.calls)
            .unwrap(),
        [("bob".to_string(), 1, START + 2_500)]
    );
    // Bob's later calls count on his restored state; a late call of Ann,
    // more than a second behind stream time, keeps no state (E3).
    for _ in 0..3 {
        calls
            .pipe_record(TestRecord::new("bob", 1).at(START + 1_600))
            .unwrap();
    }
    calls
        .pipe_record(TestRecord::new("ann", 1).at(START + 100))
        .unwrap();
    assert_eq!(
        driver
            .live_state::<i64, _, _>("rate-limit", &api.calls)
            .unwrap(),
        [("bob".to_string(), 3, START + 2_500)]
    );
    assert_eq!(
        driver
            .output(&api.allowed)
            .unwrap()
            .read_all()
            .unwrap()
            .len(),
        // ann, bob, bob twice more (the third is over the limit), ann late.
        5
    );
}

/// E1: a call without a key stops the expiring folds' tasks, naming E1
/// and the record.
#[test]
fn e1_a_call_without_a_key_is_refused_naming_the_record() {
    let api = api();
    let driver = driver(&api);
    let error = driver
        .input(&api.calls)
        .unwrap()
        .pipe(None::<String>, 1)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("E1 (docs/RULES.md#e1)") && error.contains("api-calls-0@0"),
        "{error}"
    );
    // Both expiring folds read the calls, and both refuse it.
    let stopped = driver.stopped_tasks();
    assert_eq!(stopped.len(), 2, "{stopped:?}");
    assert!(stopped
        .iter()
        .all(|error| error.to_string().contains("E1 ")));
}

/// The live state is read only from an expiring fold, with its state type.
#[test]
fn live_state_is_refused_for_other_stages_and_types() {
    let api = api();
    let driver = driver(&api);
    let other = driver
        .live_state::<i64, _, _>("totals", &api.allowed)
        .unwrap_err();
    assert!(matches!(other, DriverError::NotExpiring { .. }), "{other}");
    let wrong = driver
        .live_state::<String, _, _>("sessions", &api.calls)
        .unwrap_err();
    assert!(
        matches!(wrong, DriverError::WrongStateType { .. }),
        "{wrong}"
    );
}
