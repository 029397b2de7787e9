//! The timer service of K2 (`parsley::timer`) in an application of the
//! test's own: sessions that ask to be woken a gap after each click, and
//! close when woken. The checker's I6/I7 replay the service's ticks over
//! every key slot and I11 holds on every seed; the audit is clean on a
//! driver run; each planted timer bug is caught by I11, and a forgotten
//! request by the audit's I6.

use std::time::Duration;

use crate::support::START;
use parsley::mutation::{self, Mutation};
use parsley::{assemble, App, Parsley, Stage, Topic, Utf8, I64};
use parsley_sim::audit::{audit, committed_logs};
use parsley_sim::sim::{
    ClockConfig, Input, Invariant, Regressions, Simulation, StepRange, TimeStrategy,
};
use parsley_sim::TestDriver;

/// How long after a click its session's timer fires.
const GAP_MS: i64 = 1_500;
/// The service's tick interval: a fire is at most this late.
const RESOLUTION: Duration = Duration::from_millis(500);
struct Sessions {
    clicks: Topic<String, i64>,
    fires: Topic<String, i64>,
    closed: Topic<String, i64>,
    app: App,
}

/// `sessions` asks, for each click, for a timer at the click's timestamp
/// plus [`GAP_MS`] on `session-requests`, and forwards each fire to
/// `closed`; `timers` is the service between the two.
fn sessions() -> Sessions {
    let clicks: Topic<String, i64> = Topic::with_codecs("clicks", Utf8, I64);
    let requests: Topic<String, i64> = Topic::with_codecs("session-requests", Utf8, I64);
    let fires: Topic<String, i64> = Topic::with_codecs("session-fires", Utf8, I64);
    let closed: Topic<String, i64> = Topic::with_codecs("closed", Utf8, I64);
    let sessions = Stage::named("sessions")
        .on(&clicks, {
            let requests = requests.clone();
            move |click| vec![requests.send(click.key().cloned(), click.timestamp() + GAP_MS)]
        })
        .on(&fires, {
            let closed = closed.clone();
            move |fire| vec![closed.send(fire.key().cloned(), *fire.value())]
        })
        .into(&requests)
        .into(&closed)
        .build();
    let timers = Stage::named("timers")
        .timer_service(&requests, &fires)
        .resolution(RESOLUTION)
        .build();
    let app = Parsley::named("web")
        .stage(sessions)
        .stage(timers)
        .build()
        .expect("the sessions compose");
    Sessions {
        clicks,
        fires,
        closed,
        app,
    }
}

/// The sessions under the simulator, faults on (the defaults), with `bug`
/// planted.
fn simulation(bug: Option<Mutation>) -> Simulation {
    let Sessions {
        clicks,
        closed,
        app,
        ..
    } = sessions();
    Simulation::builder(app)
        .input(Input::new(&clicks, |draw| {
            (Some(draw.key()), draw.range(1, 9))
        }))
        .partitions(2)
        .instances(2)
        .inputs(40)
        .keys(6)
        .clock(ClockConfig {
            time: TimeStrategy::default(),
            step_ms: StepRange { min: 1, max: 400 },
            tick_interval_ms: 500,
            commit_interval_ms: 100,
            transaction_timeout_ms: 4_000,
            ..ClockConfig::default()
        })
        .budget(1_000, 4_000)
        .sometimes("a session closed", move |run| {
            Ok(!run.records(&closed)?.is_empty())
        })
        .sometimes("an instance crashed", |run| Ok(run.stats().crashes > 0))
        .regressions(Regressions::Off)
        .planted(bug)
        .build()
        .expect("the simulation fits the app")
}

/// The first of 50 seeds on which `bug` is reported as I11 with a message
/// holding `needle`; panics if none is.
fn caught(bug: Mutation, needle: &str) {
    let simulation = simulation(Some(bug));
    let found = (0..50).find_map(|seed| {
        simulation
            .run_seed(seed)
            .violations
            .into_iter()
            .find(|violation| {
                violation.invariant == Invariant::I11 && violation.message.contains(needle)
            })
    });
    assert!(
        found.is_some(),
        "{} went unnoticed by I11 ({needle:?}) over 50 seeds",
        bug.name()
    );
}

/// I6, I7, I11: the correct service passes every check on 200 seeds with
/// faults on: its ticks' slot changes and fires are those of its pure
/// logic, and every due request fires once.
#[test]
fn i11_the_timer_service_simulates_clean() {
    let summary = simulation(None).check_seeds(0..200);
    assert!(summary.failure.is_none(), "{}", summary.failure.unwrap());
    assert!(summary.never_reached().is_empty(), "{:?}", summary.reached);
}

/// I11: a tick that fires timers a resolution early writes fires whose
/// record timestamp is before their time.
#[test]
fn i11_a_timer_that_fires_early_is_caught() {
    caught(Mutation::TimerFiresEarly, "before its due time");
}

/// I11: a tick that fires timers but keeps them pending fires them again
/// at the next tick: a duplicate fire.
#[test]
fn i11_a_timer_that_fires_twice_is_caught() {
    caught(Mutation::TimerKeepsFired, "a duplicate fire");
}

/// I11: a request the task forgets (its time is odd) never fires, though a
/// committed tick past its time claims it.
#[test]
fn i11_a_request_that_never_fires_is_caught() {
    caught(Mutation::TimerDropsOddRequests, "no committed fire");
}

/// I11: a fire that does not claim its request lets the stage deliver it
/// before the request's causes (G5).
#[test]
fn i11_a_fire_that_does_not_claim_its_request_is_caught() {
    caught(Mutation::TimerFireUnstamped, "does not claim the request");
}

/// The audit (I1, I3–I7) is clean on a driver run of the sessions: the
/// service's ticks are replayed over every key slot, and each slot they
/// change is the next record of its changelog.
#[test]
fn the_audit_is_clean_on_a_driver_run_of_the_timer_service() {
    let sessions = sessions();
    let driver = TestDriver::builder(&sessions.app)
        .initial_wall_clock(START)
        .default_partitions(2)
        .build()
        .unwrap();
    let clicks = driver.input(&sessions.clicks).unwrap();
    // Each click a step after the one before: at 0, 200, 900 and 1,200 ms.
    for (key, step) in [("alice", 0), ("bob", 200), ("alice", 700), ("carol", 300)] {
        driver
            .advance_wall_clock(Duration::from_millis(step))
            .unwrap();
        clicks.pipe(key.to_string(), 1).unwrap();
    }
    // Not due yet: nothing fired.
    assert!(driver
        .output(&sessions.fires)
        .unwrap()
        .read_values()
        .unwrap()
        .is_empty());
    driver
        .advance_wall_clock(Duration::from_millis(GAP_MS as u64) + 2 * RESOLUTION)
        .unwrap();
    let fires = driver.output(&sessions.fires).unwrap().read_all().unwrap();
    for fire in &fires {
        assert!(fire.timestamp >= fire.value, "fired early: {fire:?}");
    }
    let mut closed: Vec<(String, i64)> = driver
        .output(&sessions.closed)
        .unwrap()
        .read_all()
        .unwrap()
        .into_iter()
        .map(|record| (record.key.expect("sessions are keyed"), record.value))
        .collect();
    closed.sort();
    let at = |offset: i64| START + offset + GAP_MS;
    assert_eq!(
        closed,
        [
            ("alice".to_string(), at(0)),
            ("alice".to_string(), at(900)),
            ("bob".to_string(), at(200)),
            ("carol".to_string(), at(1_200)),
        ]
    );
    let cluster = driver.cluster();
    let assembly = assemble(&sessions.app, &*cluster).expect("the driver assembled the app");
    let logs = committed_logs(&cluster, &sessions.app, &assembly);
    let report = audit(&sessions.app, &assembly, &logs);
    assert!(report.is_clean(), "{report}");
    assert!(report.summary.notes.is_empty(), "{report}");
    assert_eq!(
        report.summary.changelog_matched, report.summary.changelog_records,
        "{report}"
    );
    assert!(report.summary.changelog_records > 0, "{report}");
    assert_eq!(
        report.summary.outputs_matched, report.summary.outputs,
        "{report}"
    );
}

/// I6 in the audit: a task that forgets a request (planted: its time is
/// odd) writes a changelog record the pure fold does not, and the audit's
/// replay of the service says which.
#[test]
fn i6_audit_catches_a_timer_request_the_task_forgets() {
    let sessions = sessions();
    let driver = TestDriver::builder(&sessions.app)
        .initial_wall_clock(START + 1)
        .default_partitions(1)
        .build()
        .unwrap();
    mutation::set(Some(Mutation::TimerDropsOddRequests));
    let piped = driver
        .input(&sessions.clicks)
        .unwrap()
        .pipe("alice".to_string(), 1);
    mutation::set(None);
    piped.unwrap();
    let cluster = driver.cluster();
    let assembly = assemble(&sessions.app, &*cluster).expect("the driver assembled the app");
    let logs = committed_logs(&cluster, &sessions.app, &assembly);
    let report = audit(&sessions.app, &assembly, &logs);
    assert!(
        report
            .violations
            .iter()
            .any(|violation| violation.invariant == Invariant::I6
                && violation
                    .message
                    .contains("delivering session-requests-0@0 sets slot")),
        "{report}"
    );
}
