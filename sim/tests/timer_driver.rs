//! The timer service (K2) under the `TestDriver`: an application declares
//! it, and `advance_wall_clock` alone fires what is due (no pump in the
//! test), in the same call that fires ticks. The application here is not an
//! example: carts that are abandoned when no item is added for ten minutes,
//! unless they were checked out.

use std::time::Duration;

use crate::support::START;
use parsley::{App, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::{DriverError, TestDriver};

const IDLE_MS: i64 = 600_000;
struct Carts {
    items: Topic<String, i64>,
    checkouts: Topic<String, i64>,
    abandoned: Topic<String, i64>,
    app: App,
}

/// `carts` keeps each cart's item count and asks for a timer ten minutes
/// after each item; a fire that finds the cart idle since its time marks
/// it abandoned. A checkout empties the cart, so later fires find nothing.
fn carts() -> Carts {
    let topic = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let (items, checkouts, requests, fires, abandoned) = (
        topic("items"),
        topic("checkouts"),
        topic("cart-timer-requests"),
        topic("cart-timer-fires"),
        topic("abandoned-carts"),
    );
    let carts = Stage::named("carts")
        .state(I64, || 0i64)
        .on(&items, {
            let requests = requests.clone();
            move |count: i64, item| {
                Step::of(count + item.value())
                    .emit(requests.send(item.key().cloned(), item.timestamp() + IDLE_MS))
            }
        })
        .on(&checkouts, |_count: i64, _checkout| Step::delete())
        .on(&fires, {
            let abandoned = abandoned.clone();
            move |count: i64, fire| match count {
                0 => Step::of(0),
                _ => Step::delete().emit(abandoned.send(fire.key().cloned(), count)),
            }
        })
        .into((&requests, &abandoned))
        .build();
    let app = with_timers("shop", carts, "cart-timers", &requests, &fires);
    Carts {
        items,
        checkouts,
        abandoned,
        app,
    }
}

/// An app of `stage` and a timer service `timers` (a resolution of one
/// second) answering its `requests` on `fires`.
fn with_timers(
    app: &str,
    stage: Stage,
    timers: &str,
    requests: &Topic<String, i64>,
    fires: &Topic<String, i64>,
) -> App {
    let timers = Stage::named(timers)
        .timer_service(requests, fires)
        .resolution(Duration::from_secs(1))
        .build();
    Parsley::named(app)
        .stage(stage)
        .stage(timers)
        .build()
        .unwrap()
}

/// A driver of `app` whose wall clock starts at `START`.
fn driver_of(app: &App) -> TestDriver {
    TestDriver::builder(app)
        .initial_wall_clock(START)
        .build()
        .unwrap()
}

fn driver(carts: &Carts) -> TestDriver {
    driver_of(&carts.app)
}

/// Pipes `value` under `key` into `topic`.
fn pipe(driver: &TestDriver, topic: &Topic<String, i64>, key: &str, value: i64) {
    driver
        .input(topic)
        .unwrap()
        .pipe(key.to_string(), value)
        .unwrap();
}

/// K2: a timer fires once its time has come, by `advance_wall_clock` alone,
/// and never before it.
#[test]
fn k2_advance_wall_clock_fires_due_timers_and_no_others() {
    let carts = carts();
    let driver = driver(&carts);
    pipe(&driver, &carts.items, "ann", 2);
    assert_eq!(
        driver.pending_timers("cart-timers").unwrap(),
        [START + IDLE_MS]
    );
    driver
        .advance_wall_clock(Duration::from_millis(IDLE_MS as u64 - 1_000))
        .unwrap();
    let abandoned = driver.output(&carts.abandoned).unwrap();
    assert!(abandoned.read_values().unwrap().is_empty(), "not yet due");
    assert_eq!(driver.pending_timers("cart-timers").unwrap().len(), 1);
    driver.advance_wall_clock(Duration::from_secs(1)).unwrap();
    assert_eq!(abandoned.read_values().unwrap(), [2]);
    assert!(driver.pending_timers("cart-timers").unwrap().is_empty());
}

/// K2: every request fires exactly once; a checkout before the fires means
/// the fires find nothing to abandon.
#[test]
fn k2_each_request_fires_once_and_the_stage_decides_what_it_means() {
    let carts = carts();
    let driver = driver(&carts);
    let items = driver.input(&carts.items).unwrap();
    items.pipe("ann".to_string(), 1).unwrap();
    items.pipe("bob".to_string(), 1).unwrap();
    driver.advance_wall_clock(Duration::from_secs(60)).unwrap();
    items.pipe("ann".to_string(), 1).unwrap();
    driver
        .input(&carts.checkouts)
        .unwrap()
        .pipe("bob".to_string(), 0)
        .unwrap();
    assert_eq!(driver.pending_timers("cart-timers").unwrap().len(), 3);
    driver
        .advance_wall_clock(Duration::from_millis(IDLE_MS as u64 + 60_000))
        .unwrap();
    // ann's first fire abandons her cart of two; her second finds it empty.
    let abandoned = driver.output(&carts.abandoned).unwrap().read_all().unwrap();
    let abandoned: Vec<(Option<String>, i64)> = abandoned
        .into_iter()
        .map(|record| (record.key, record.value))
        .collect();
    assert_eq!(abandoned, [(Some("ann".to_string()), 2)]);
    assert!(driver.pending_timers("cart-timers").unwrap().is_empty());
}

/// K2, G5: a fire claims its request, and so the item that asked for it:
/// the stage is gated behind the request's causes.
#[test]
fn k2_a_fire_claims_its_request_and_the_requests_causes() {
    let carts = carts();
    let driver = driver(&carts);
    pipe(&driver, &carts.items, "ann", 1);
    driver
        .advance_wall_clock(Duration::from_millis(IDLE_MS as u64 + 1_000))
        .unwrap();
    let fires: Topic<String, i64> = Topic::with_codecs("cart-timer-fires", Utf8, I64);
    let fired = driver.output(&fires).unwrap().read_all().unwrap();
    assert_eq!(fired.len(), 1);
    let claims: Vec<String> = fired[0]
        .stamp
        .claims()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        claims.contains(&"cart-timer-requests-0@0".to_string()),
        "{claims:?}"
    );
    assert!(claims.contains(&"items-0@0".to_string()), "{claims:?}");
}

/// A stage that is not a timer service has no pending timers to read.
#[test]
fn pending_timers_of_another_stage_is_a_typed_error() {
    let carts = carts();
    let driver = driver(&carts);
    assert!(matches!(
        driver.pending_timers("carts"),
        Err(DriverError::NotATimerService { .. })
    ));
    assert!(matches!(
        driver.pending_timers("cart"),
        Err(DriverError::UnknownStage { .. })
    ));
}

/// An app whose stage asks for timers `offset_ms` after each reading (a
/// negative offset is a timer in the past), with or without the timer
/// service's dead-letter opt-in.
fn reminders(offset_ms: i64, dead_letters: bool) -> (Topic<String, i64>, App) {
    let topic = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let (readings, requests, fires) = (topic("readings"), topic("requests"), topic("fires"));
    let remind = Stage::named("remind")
        .on(&readings, {
            let requests = requests.clone();
            move |reading| {
                vec![requests.send(reading.key().cloned(), reading.timestamp() + offset_ms)]
            }
        })
        .on(&fires, |_fire| Vec::new())
        .into(&requests)
        .build();
    let timers = Stage::named("timers").timer_service(&requests, &fires);
    let timers = match dead_letters {
        true => timers.dead_letter_queue(),
        false => timers,
    };
    let app = Parsley::named("care")
        .stage(remind)
        .stage(timers.build())
        .build()
        .unwrap();
    (readings, app)
}

/// The reminders asking for timers a millisecond in the past, and one
/// reading piped: its timer is pending, for `START - 1`.
fn a_timer_in_the_past() -> TestDriver {
    let (readings, app) = reminders(-1, false);
    let driver = driver_of(&app);
    pipe(&driver, &readings, "s1", 1);
    assert_eq!(driver.pending_timers("timers").unwrap(), [START - 1]);
    driver
}

/// K2: a request for a time before its own timestamp (a timer "in the
/// past") is due at once: it fires at the service's next tick, for the time
/// it asked, and the service's task counts it on
/// `timer-requests-late-total`; nothing stops.
#[test]
fn k2_a_timer_in_the_past_fires_at_the_next_tick_and_is_counted() {
    let driver = a_timer_in_the_past();
    assert_eq!(
        driver
            .metric("timers", "timer-requests-late-total")
            .unwrap(),
        1
    );
    let fires = Topic::<String, i64>::with_codecs("fires", Utf8, I64);
    assert!(driver
        .output(&fires)
        .unwrap()
        .read_all()
        .unwrap()
        .is_empty());
    // The service's default resolution is one second: its next tick fires.
    driver.advance_wall_clock(Duration::from_secs(1)).unwrap();
    let fired = driver.output(&fires).unwrap().read_all().unwrap();
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].key.as_deref(), Some("s1"));
    assert_eq!(fired[0].value, START - 1, "it fires for the time it asked");
    assert!(
        fired[0].timestamp >= START,
        "at the tick's time, not before the request: {}",
        fired[0].timestamp
    );
    assert!(driver.pending_timers("timers").unwrap().is_empty());
    assert!(driver.stopped_tasks().is_empty());
}

/// K2, S5: a timer already due when its task restarts (restored from the
/// changelog, not fired yet) fires at the restarted task's first tick,
/// once. With the planted bug that drops the timers due at a task's start,
/// the restart loses it: the check this test makes is one that bug fails.
#[test]
fn k2_a_timer_overdue_at_a_restart_fires_at_the_next_tick() {
    let fires = Topic::<String, i64>::with_codecs("fires", Utf8, I64);
    let overdue_then_restarted = |planted: Option<parsley::mutation::Mutation>| {
        parsley::mutation::set(planted);
        let driver = a_timer_in_the_past();
        driver.restart_task("timers", 0).unwrap();
        let pending = driver.pending_timers("timers").unwrap();
        driver.advance_wall_clock(Duration::from_secs(1)).unwrap();
        parsley::mutation::set(None);
        (
            pending,
            driver.output(&fires).unwrap().read_values().unwrap(),
        )
    };
    let (pending, fired) = overdue_then_restarted(None);
    assert_eq!(pending, [START - 1], "the restart restores the timer");
    assert_eq!(fired, [START - 1], "and it fires once, for its time");
    let (pending, fired) = overdue_then_restarted(Some(
        parsley::mutation::Mutation::TimerLostWhenOverdueAtStart,
    ));
    assert!(
        pending.is_empty() && fired.is_empty(),
        "{pending:?} {fired:?}"
    );
}

/// K2: the natural re-arm on a fire: a fire carries the service's tick
/// time, so asking again for the fire's time plus less than a resolution is
/// a request in the past. It fires at the next tick, every tick, and the
/// stage keeps going.
#[test]
fn k2_re_arming_on_every_fire_keeps_firing_tick_after_tick() {
    let topic = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let (starts, requests, fires, beats) = (
        topic("starts"),
        topic("beat-requests"),
        topic("beat-fires"),
        topic("beats"),
    );
    let beat = Stage::named("beat")
        .on(&starts, {
            let requests = requests.clone();
            move |start| vec![requests.send(start.key().cloned(), start.timestamp() + 100)]
        })
        .on(&fires, {
            let (requests, beats) = (requests.clone(), beats.clone());
            // Re-arm 100 ms after the time it fired for: before the fire's
            // own timestamp (the tick's), so in the past.
            move |fire| {
                vec![
                    beats.send(fire.key().cloned(), *fire.value()),
                    requests.send(fire.key().cloned(), fire.value() + 100),
                ]
            }
        })
        .into((&requests, &beats))
        .build();
    let app = with_timers("pulse", beat, "beat-timers", &requests, &fires);
    let driver = driver_of(&app);
    pipe(&driver, &starts, "p", 0);
    for _ in 0..5 {
        driver.advance_wall_clock(Duration::from_secs(1)).unwrap();
    }
    let beats = driver.output(&beats).unwrap().read_values().unwrap();
    assert_eq!(
        beats,
        (1..=5).map(|n| START + 100 * n).collect::<Vec<_>>(),
        "one beat a tick, each for the time it was asked for"
    );
    assert_eq!(
        driver
            .metric("beat-timers", "timer-requests-late-total")
            .unwrap(),
        5,
        "every re-arm after the first fire asked for a time already past"
    );
    assert!(driver.stopped_tasks().is_empty());
}

/// K2, X5: with the service's dead-letter opt-in a refused request (here
/// one with no key, whose fire could have none) is dead-lettered and the
/// service goes on with the next one.
#[test]
fn k2_a_refused_request_is_dead_lettered_with_the_opt_in() {
    let (readings, app) = reminders(0, true);
    let driver = driver_of(&app);
    let readings = driver.input(&readings).unwrap();
    readings.pipe(None, 1).unwrap();
    readings.pipe("s2".to_string(), 2).unwrap();
    let letters = driver.dead_letters("timers").unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].tp, parsley::Tp::new("requests", 0));
    assert!(
        letters[0].message.contains("has no key"),
        "{}",
        letters[0].message
    );
    assert_eq!(driver.pending_timers("timers").unwrap(), [START]);
}

/// K2, bad input: a request whose time the request topic's codec rejects
/// stops the service with a codec error naming the topic, tp and offset.
#[test]
fn k2_a_request_that_does_not_decode_is_a_codec_error_naming_the_record() {
    let (_, app) = reminders(0, false);
    let driver = driver_of(&app);
    let requests = Topic::<String, i64>::with_codecs("requests", Utf8, I64);
    let error = driver
        .input(&requests)
        .unwrap()
        .pipe_raw(
            0,
            Some(bytes::Bytes::from_static(b"s1")),
            Some(bytes::Bytes::from_static(b"soon")),
            Vec::new(),
        )
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            &error,
            DriverError::Task(parsley::TaskError::Codec { offset: 0, tp, .. })
                if *tp == parsley::Tp::new("requests", 0)
        ),
        "{message}"
    );
}
