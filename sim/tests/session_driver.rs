//! Session windows (W5) under the `TestDriver`, the way a Kafka Streams user
//! tests `windowedBy(SessionWindows…).aggregate(…).suppress(…)`: pipe clicks
//! with timestamps, read closed sessions and the open ones back. The
//! application is not an example: clicks per user session (a 30-minute
//! inactivity gap, 5 minutes of grace), and a stage that sums each user's
//! session lengths from the closed sessions.

use std::time::Duration;

use crate::support::{one_partition_driver, START};
use parsley::{App, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley::{SessionWindows, Windowed, WindowedCodec};
use parsley_sim::{TestDriver, TestRecord};

const MINUTE: i64 = 60_000;
struct Visits {
    clicks: Topic<String, i64>,
    sessions: Topic<Windowed<String>, i64>,
    time_on_site: Topic<String, i64>,
    app: App,
}

fn visits() -> Visits {
    let clicks = Topic::<String, i64>::with_codecs("clicks", Utf8, I64);
    let sessions = Topic::with_codecs("click-sessions", WindowedCodec(Utf8), I64);
    let time_on_site = Topic::<String, i64>::with_codecs("time-on-site", Utf8, I64);
    let per_session = Stage::named("per-session")
        .windowed(
            SessionWindows::with_inactivity_gap(Duration::from_secs(30 * 60))
                .grace(Duration::from_secs(5 * 60)),
        )
        .aggregate(
            &clicks,
            I64,
            || 0i64,
            |count, _click| count + 1,
            |one, two| one + two,
        )
        .into(&sessions)
        .build();
    let totals = Stage::named("time-on-site")
        .state(Json, || 0i64)
        .on(&sessions, {
            let out = time_on_site.clone();
            move |total: i64, session| {
                let windowed = session.key().expect("a session has a key");
                let total = total + (windowed.end - windowed.start);
                Step::of(total).emit(out.send(windowed.key.clone(), total))
            }
        })
        .into(&time_on_site)
        .build();
    let app = Parsley::named("visits")
        .stage(per_session)
        .stage(totals)
        .build()
        .unwrap();
    Visits {
        clicks,
        sessions,
        time_on_site,
        app,
    }
}

fn driver(visits: &Visits) -> TestDriver {
    one_partition_driver(&visits.app, START)
}

fn click(driver: &TestDriver, visits: &Visits, user: &str, minute: i64) {
    driver
        .input(&visits.clicks)
        .unwrap()
        .pipe_record(TestRecord::new(user, 1).at(START + minute * MINUTE))
        .unwrap();
}

/// `(user, first minute, last minute, clicks)` of each session.
fn minutes(sessions: Vec<(Windowed<String>, i64)>) -> Vec<(String, i64, i64, i64)> {
    sessions
        .into_iter()
        .map(|(windowed, count)| {
            (
                windowed.key,
                (windowed.start - START) / MINUTE,
                (windowed.end - START) / MINUTE,
                count,
            )
        })
        .collect()
}

fn closed(driver: &TestDriver, visits: &Visits) -> Vec<(String, i64, i64, i64)> {
    let records = driver.output(&visits.sessions).unwrap().read_all().unwrap();
    minutes(
        records
            .into_iter()
            .map(|record| (record.key.expect("a windowed key"), record.value))
            .collect(),
    )
}

fn open(driver: &TestDriver, visits: &Visits) -> Vec<(String, i64, i64, i64)> {
    minutes(
        driver
            .open_windows::<i64, _, _>("per-session", &visits.clicks)
            .unwrap(),
    )
}

/// W5, W2, W4: a user's clicks within 30 minutes of each other make one
/// session; sessions close once stream time passes their last click plus
/// gap plus grace, written once in (end, key, start) order, and the stage
/// reading them sees each once.
#[test]
fn w5_clicks_within_the_gap_make_a_session_closed_by_stream_time() {
    let visits = visits();
    let driver = driver(&visits);
    click(&driver, &visits, "ann", 0);
    click(&driver, &visits, "bob", 5);
    click(&driver, &visits, "ann", 10);
    assert_eq!(
        open(&driver, &visits),
        [("bob".into(), 5, 5, 1), ("ann".into(), 0, 10, 2)]
    );
    // 45 = 10 + 30 + 5: ann's session may still take a click at 40.
    click(&driver, &visits, "cid", 45);
    assert_eq!(closed(&driver, &visits), [("bob".into(), 5, 5, 1)]);
    click(&driver, &visits, "cid", 46);
    assert_eq!(
        closed(&driver, &visits),
        [("bob".into(), 5, 5, 1), ("ann".into(), 0, 10, 2)]
    );
    assert_eq!(
        driver
            .output(&visits.time_on_site)
            .unwrap()
            .read_values()
            .unwrap(),
        [0, 10 * MINUTE]
    );
}

/// W5: a click within the gap of two sessions merges them into one, whose
/// count is the merge of theirs plus the click; a restart between clicks
/// keeps the open sessions and stream time (X1, S5).
#[test]
fn w5_a_bridging_click_merges_two_sessions_across_a_restart() {
    let visits = visits();
    let driver = driver(&visits);
    click(&driver, &visits, "ann", 50);
    // 32 minutes on: a session of its own, and 50's still open (it closes
    // after 50 + 30 + 5).
    click(&driver, &visits, "ann", 82);
    assert_eq!(
        open(&driver, &visits),
        [("ann".into(), 50, 50, 1), ("ann".into(), 82, 82, 1)]
    );
    driver.restart().unwrap();
    click(&driver, &visits, "ann", 66);
    assert_eq!(open(&driver, &visits), [("ann".into(), 50, 82, 3)]);
    click(&driver, &visits, "bob", 117);
    assert!(
        closed(&driver, &visits).is_empty(),
        "82 + 35 is not passed yet"
    );
    click(&driver, &visits, "bob", 118);
    assert_eq!(closed(&driver, &visits), [("ann".into(), 50, 82, 3)]);
}

/// W3: a click whose session would have closed already is late: counted,
/// merged into nothing; a closed session is final, so a later click within
/// its gap starts a session of its own.
#[test]
fn w3_a_late_click_is_counted_and_a_closed_session_stays_closed() {
    let visits = visits();
    let driver = driver(&visits);
    click(&driver, &visits, "ann", 0);
    click(&driver, &visits, "bob", 36);
    assert_eq!(closed(&driver, &visits), [("ann".into(), 0, 0, 1)]);
    click(&driver, &visits, "ann", 0);
    assert_eq!(
        driver
            .metric("per-session", "window-records-late-total")
            .unwrap(),
        1
    );
    // 20 is within the gap of ann's closed session, and on time.
    click(&driver, &visits, "ann", 20);
    assert_eq!(
        open(&driver, &visits),
        [("ann".into(), 20, 20, 1), ("bob".into(), 36, 36, 1)]
    );
}
