//! Windowed aggregation (W1–W4) under the `TestDriver`, the way a Kafka
//! Streams user tests `windowedBy(…).aggregate(…).suppress(…)`: pipe records
//! with timestamps, read the windows back. The application is not an
//! example: page views fan out to two windowed stages, one-minute view
//! counts per page closed by stream time with grace and a late topic, and
//! ten-minute hopping dwell time per user closed by the wall clock, whose
//! closed windows a third stage reads.

use std::time::Duration;

use crate::support::one_partition_driver;
use parsley::{App, Parsley, Stage, Topic, Utf8, I64};
use parsley::{Close, Windowed, WindowedCodec, Windows};
use parsley_sim::{DriverError, TestDriver, TestRecord};

// A multiple of ten minutes: windows start at multiples of their advance.
const START: i64 = 1_700_000_400_000;
const MINUTE: i64 = 60_000;

struct Views {
    by_page: Topic<String, i64>,
    by_user: Topic<String, i64>,
    per_minute: Topic<Windowed<String>, i64>,
    late: Topic<String, i64>,
    dwell: Topic<Windowed<String>, i64>,
    long_stays: Topic<String, i64>,
    app: App,
}

fn views() -> Views {
    let topic = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let windowed =
        |name: &str| Topic::<Windowed<String>, i64>::with_codecs(name, WindowedCodec(Utf8), I64);
    let (by_page, by_user, late, long_stays) = (
        topic("views-by-page"),
        topic("views-by-user"),
        topic("late-views"),
        topic("long-stays"),
    );
    let (per_minute, dwell) = (windowed("views-per-minute"), windowed("dwell-per-user"));
    let counts = Stage::named("page-counts")
        .windowed(Windows::tumbling(Duration::from_secs(60)).grace(Duration::from_secs(10)))
        .aggregate(&by_page, I64, || 0i64, |count, _view| count + 1)
        .late_records_to(&late)
        .into(&per_minute)
        .build();
    let dwelling = Stage::named("dwell")
        .windowed(Windows::hopping(
            Duration::from_secs(600),
            Duration::from_secs(300),
        ))
        .aggregate(&by_user, I64, || 0i64, |total, view| total + view.value())
        .close_by(Close::WallClock {
            resolution: Duration::from_secs(1),
        })
        .into(&dwell)
        .build();
    let alerts = Stage::named("long-stays")
        .on(&dwell, {
            let long_stays = long_stays.clone();
            move |window| match *window.value() >= 1_000 {
                true => {
                    vec![long_stays.send(window.key().map(|key| key.key.clone()), *window.value())]
                }
                false => Vec::new(),
            }
        })
        .into(&long_stays)
        .build();
    let app = Parsley::named("site")
        .stage(counts)
        .stage(dwelling)
        .stage(alerts)
        .build()
        .unwrap();
    Views {
        by_page,
        by_user,
        per_minute,
        late,
        dwell,
        long_stays,
        app,
    }
}

fn driver(views: &Views) -> TestDriver {
    one_partition_driver(&views.app, START)
}

fn windows(
    records: Vec<parsley_sim::OutputRecord<Windowed<String>, i64>>,
) -> Vec<(String, i64, i64, i64)> {
    records
        .into_iter()
        .map(|record| {
            let key = record.key.expect("a windowed key");
            (key.key, key.start - START, key.end - START, record.value)
        })
        .collect()
}

/// W2, W4: a minute's counts are written once, when stream time passes the
/// minute's end plus grace — not when the wall clock does, and not a
/// millisecond before.
#[test]
fn w2_w4_stream_time_closes_a_minute_after_its_grace() {
    let views = views();
    let driver = driver(&views);
    let pages = driver.input(&views.by_page).unwrap();
    for (page, at) in [("home", 0), ("cart", 1_000), ("home", 59_999)] {
        pages
            .pipe_record(TestRecord::new(page, 1).at(START + at))
            .unwrap();
    }
    // The windowed store: one open minute per page, counting its views.
    let open = driver
        .open_windows::<i64, _, _>("page-counts", &views.by_page)
        .unwrap();
    let open: Vec<(&str, i64, i64)> = open
        .iter()
        .map(|(window, count)| (window.key.as_str(), window.start - START, *count))
        .collect();
    assert_eq!(open, [("cart", 0, 1), ("home", 0, 2)]);
    let per_minute = driver.output(&views.per_minute).unwrap();
    driver.advance_wall_clock(Duration::from_secs(600)).unwrap();
    assert!(
        per_minute.read_all().unwrap().is_empty(),
        "stream time closes, not the wall clock"
    );
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + MINUTE + 9_999))
        .unwrap();
    assert!(
        per_minute.read_all().unwrap().is_empty(),
        "grace runs to the last millisecond"
    );
    pages
        .pipe_record(TestRecord::new("cart", 1).at(START + MINUTE + 10_000))
        .unwrap();
    assert_eq!(
        windows(per_minute.read_all().unwrap()),
        [
            ("cart".to_string(), 0, MINUTE, 1),
            ("home".to_string(), 0, MINUTE, 2)
        ]
    );
    // Closed windows leave the store; the second minute's are open.
    let open = driver
        .open_windows::<i64, _, _>("page-counts", &views.by_page)
        .unwrap();
    assert_eq!(open.len(), 2);
    assert!(open
        .iter()
        .all(|(window, _)| window.start == START + MINUTE));
}

/// The windowed store is refused, naming why, for a stage that keeps no
/// windows and for the wrong aggregate type.
#[test]
fn open_windows_are_refused_for_other_stages_and_types() {
    let views = views();
    let driver = driver(&views);
    let not_windowed = driver
        .open_windows::<i64, _, _>("long-stays", &views.dwell)
        .unwrap_err();
    assert!(
        matches!(not_windowed, DriverError::NotAWindowedAggregation { .. }),
        "{not_windowed}"
    );
    let wrong_type = driver
        .open_windows::<String, _, _>("page-counts", &views.by_page)
        .unwrap_err();
    assert!(
        matches!(wrong_type, DriverError::WrongStateType { .. }),
        "{wrong_type}"
    );
}

/// W3: a view for a closed minute is late: counted, written as it came to
/// the late topic, and in no window; a view within grace still counts.
#[test]
fn w3_late_views_go_to_the_late_topic_once_and_are_counted() {
    let views = views();
    let driver = driver(&views);
    let pages = driver.input(&views.by_page).unwrap();
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + 30_000))
        .unwrap();
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + MINUTE + 5_000))
        .unwrap();
    // Within grace: the first minute is still open.
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + 59_000))
        .unwrap();
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + MINUTE + 10_000))
        .unwrap();
    // Too late: the first minute closed at 70 s of stream time.
    pages
        .pipe_record(TestRecord::new("home", 7).at(START + 1_000))
        .unwrap();
    let per_minute = driver.output(&views.per_minute).unwrap();
    assert_eq!(
        windows(per_minute.read_all().unwrap()),
        [("home".to_string(), 0, MINUTE, 2)]
    );
    let late = driver.output(&views.late).unwrap().read_all().unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!((late[0].key.as_deref(), late[0].value), (Some("home"), 7));
    assert_eq!(
        driver
            .metric("page-counts", "window-records-late-total")
            .unwrap(),
        1
    );
}

/// W2, W4, G5: wall-clock windows close by `advance_wall_clock` alone; a
/// user's view far in the future closes nothing; each hopping window is
/// written once, and the stage downstream reads it through its gate.
#[test]
fn w2_wall_clock_hopping_windows_close_by_advance_wall_clock() {
    let views = views();
    let driver = driver(&views);
    let users = driver.input(&views.by_user).unwrap();
    users
        .pipe_record(TestRecord::new("ann", 400).at(START + 1_000))
        .unwrap();
    users
        .pipe_record(TestRecord::new("ann", 700).at(START + 301_000))
        .unwrap();
    users
        .pipe_record(TestRecord::new("bob", 50).at(START + 10 * 600_000))
        .unwrap();
    let dwell = driver.output(&views.dwell).unwrap();
    driver.advance_wall_clock(Duration::from_secs(299)).unwrap();
    assert!(dwell.read_all().unwrap().is_empty());
    // Windows start every 5 minutes: [-5, 5) and [0, 10) hold ann's first
    // view, [0, 10) and [5, 15) her second.
    driver.advance_wall_clock(Duration::from_secs(1)).unwrap();
    assert_eq!(
        windows(dwell.read_new().unwrap()),
        [("ann".to_string(), -300_000, 300_000, 400)]
    );
    driver.advance_wall_clock(Duration::from_secs(300)).unwrap();
    assert_eq!(
        windows(dwell.read_new().unwrap()),
        [("ann".to_string(), 0, 600_000, 1_100)]
    );
    let long_stays = driver.output(&views.long_stays).unwrap();
    assert_eq!(
        long_stays.read_key_values_to_list().unwrap(),
        [(Some("ann".to_string()), 1_100)]
    );
    driver.advance_wall_clock(Duration::from_secs(300)).unwrap();
    assert_eq!(
        windows(dwell.read_new().unwrap()),
        [("ann".to_string(), 300_000, 900_000, 700)],
        "each window once; bob's is hours ahead"
    );
}

/// X1, S5: a restart between records keeps the open windows and the stream
/// time: the window closes once, with every record in it.
#[test]
fn x1_a_restart_keeps_open_windows_and_stream_time() {
    let views = views();
    let driver = driver(&views);
    let pages = driver.input(&views.by_page).unwrap();
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + 10_000))
        .unwrap();
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + MINUTE + 10_000))
        .unwrap();
    driver.restart().unwrap();
    pages
        .pipe_record(TestRecord::new("home", 1).at(START + 20_000))
        .unwrap();
    let late = driver.output(&views.late).unwrap();
    assert_eq!(
        late.read_all().unwrap().len(),
        1,
        "stream time survived the restart"
    );
    pages
        .pipe_record(TestRecord::new("cart", 1).at(START + MINUTE + 30_000))
        .unwrap();
    driver.restart().unwrap();
    pages
        .pipe_record(TestRecord::new("cart", 1).at(START + 2 * MINUTE + 10_000))
        .unwrap();
    let per_minute = driver.output(&views.per_minute).unwrap();
    assert_eq!(
        windows(per_minute.read_all().unwrap()),
        [
            ("home".to_string(), 0, MINUTE, 1),
            ("cart".to_string(), MINUTE, 2 * MINUTE, 1),
            ("home".to_string(), MINUTE, 2 * MINUTE, 1)
        ]
    );
}
