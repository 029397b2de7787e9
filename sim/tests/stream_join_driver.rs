//! Stream–stream joins (J5–J7) under the `TestDriver`, the way a Kafka
//! Streams user tests `impressions.leftJoin(clicks, …, JoinWindows…)`:
//! pipe both streams with timestamps, read the results. The application is
//! not an example: ad impressions are attributed the clicks made up to 10 s
//! after them (a left join with 2 s of grace, so an impression nobody
//! clicked is written once its window closes), and an outer join pairs
//! each impression with the clicks within 1 s either side of it.

use parsley::Stage;
use std::time::Duration;

use parsley::{App, Json, Parsley, Topic, Utf8, I64};
use parsley::{Join, JoinWindows};
use parsley_sim::{TestDriver, TestInputTopic, TestRecord};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Attribution {
    /// The impression's placement.
    placement: i64,
    /// The click's position, when the impression was clicked.
    click: Option<i64>,
}

struct Ads {
    impressions: Topic<String, i64>,
    clicks: Topic<String, i64>,
    attributed: Topic<String, Attribution>,
    nearby: Topic<String, String>,
    app: App,
}

fn ads() -> Ads {
    let impressions = Topic::<String, i64>::with_codecs("impressions", Utf8, I64);
    let clicks = Topic::<String, i64>::with_codecs("clicks", Utf8, I64);
    let attributed = Topic::<String, Attribution>::with_codecs("attributed", Utf8, Json);
    let nearby = Topic::<String, String>::with_codecs("nearby", Utf8, Utf8);
    // A click counts for the impression before it, up to 10 s after.
    let within = JoinWindows::time_difference(Duration::ZERO)
        .after(Duration::from_secs(10))
        .grace(Duration::from_secs(2));
    let attribution = Stage::named("attribution")
        .join(Join::stream_stream(&impressions, &clicks, within))
        .left(|_ad, placement: &i64, click: Option<&i64>| Attribution {
            placement: *placement,
            click: click.copied(),
        })
        .into(&attributed)
        .build();
    let second = JoinWindows::time_difference(Duration::from_secs(1));
    let pairing = Stage::named("pairing")
        .join(Join::stream_stream(&impressions, &clicks, second))
        .outer(|_ad, placement: Option<&i64>, click: Option<&i64>| {
            let side = |value: Option<&i64>| value.map_or("-".to_string(), i64::to_string);
            format!("{}/{}", side(placement), side(click))
        })
        .into(&nearby)
        .build();
    let app = Parsley::named("ads")
        .stage(attribution)
        .stage(pairing)
        .build()
        .unwrap();
    Ads {
        impressions,
        clicks,
        attributed,
        nearby,
        app,
    }
}

fn attributed(placement: i64, click: Option<i64>) -> Attribution {
    Attribution { placement, click }
}

/// A driver of `ads` (two partitions a topic), and its inputs of
/// impressions and of clicks.
fn driver(ads: &Ads) -> (TestDriver, Input, Input) {
    let driver = TestDriver::builder(&ads.app)
        .default_partitions(2)
        .build()
        .unwrap();
    let impressions = driver.input(&ads.impressions).unwrap();
    let clicks = driver.input(&ads.clicks).unwrap();
    (driver, impressions, clicks)
}

type Input = TestInputTopic<String, i64>;

/// Pipes `value` under `key` at `at` into `input`.
fn pipe(input: &Input, key: &str, value: i64, at: i64) {
    input
        .pipe_record(TestRecord::new(key, value).at(at))
        .unwrap();
}

/// J5: a click up to 10 s after its impression is attributed to it, when
/// the click comes; one before the impression, or later, is not.
#[test]
fn j5_a_click_within_its_window_is_joined_when_it_comes() {
    let ads = ads();
    let (driver, impressions, clicks) = driver(&ads);
    let attributed_out = driver.output(&ads.attributed).unwrap();
    pipe(&impressions, "ad1", 1, 10_000);
    pipe(&clicks, "ad1", 7, 9_999);
    assert!(attributed_out.is_empty(), "a click before the impression");
    pipe(&clicks, "ad1", 8, 20_000);
    pipe(&clicks, "ad1", 9, 20_001);
    assert_eq!(
        attributed_out.read_key_values_to_list().unwrap(),
        [(Some("ad1".to_string()), attributed(1, Some(8)))],
        "the click 10 s after, not the one 10.001 s after"
    );
}

/// J7: an impression nobody clicked is written once, with no click, when
/// stream time passes its 10 s window and 2 s of grace — not a
/// millisecond before — and a click within the grace still counts.
#[test]
fn j7_an_unclicked_impression_is_written_once_its_window_and_grace_close() {
    let ads = ads();
    let (driver, impressions, clicks) = driver(&ads);
    let attributed_out = driver.output(&ads.attributed).unwrap();
    pipe(&impressions, "ad1", 1, 1_000);
    pipe(&impressions, "ad1", 2, 2_000);
    // Stream time at 13,000: ad1@1,000 closes after 13,000.
    pipe(&impressions, "ad1", 3, 13_000);
    assert!(attributed_out.is_empty(), "nothing closed yet");
    // Out of order but within the grace: ad1@2,000 is clicked.
    pipe(&clicks, "ad1", 5, 11_500);
    assert_eq!(
        attributed_out.read_values_to_list().unwrap(),
        [attributed(2, Some(5))],
        "the click at 11,500 is within 10 s after 2,000 only"
    );
    pipe(&impressions, "ad1", 4, 13_001);
    assert_eq!(
        attributed_out.read_values_to_list().unwrap(),
        [attributed(1, None)],
        "ad1@1,000 alone, once"
    );
    pipe(&impressions, "ad1", 6, 60_000);
    assert_eq!(
        attributed_out.read_values_to_list().unwrap(),
        [attributed(3, None), attributed(4, None)],
        "the unclicked ones, earliest first; 2 was clicked"
    );
}

/// J6, J7: an outer join writes the records of both sides that met nothing
/// once they close, the held records survive a restart of every task
/// (they are state, X1), and nothing is written twice after it.
#[test]
fn j6_j7_held_records_survive_a_restart_and_outer_writes_both_sides() {
    let ads = ads();
    let (driver, impressions, clicks) = driver(&ads);
    let nearby = driver.output(&ads.nearby).unwrap();
    pipe(&impressions, "ad2", 1, 5_000);
    pipe(&clicks, "ad2", 2, 5_800);
    assert_eq!(nearby.read_values_to_list().unwrap(), ["1/2"]);
    driver.restart().unwrap();
    pipe(&clicks, "ad2", 3, 6_000);
    assert_eq!(
        nearby.read_values_to_list().unwrap(),
        ["1/3"],
        "the impression is held across the restart, until 6,000"
    );
    driver.restart().unwrap();
    pipe(&impressions, "ad2", 4, 6_900);
    assert_eq!(
        nearby.read_values_to_list().unwrap(),
        ["4/3"],
        "not 4/2: closed at 6,800"
    );
    pipe(&clicks, "ad2", 5, 9_000);
    assert!(nearby.is_empty(), "what closed had met something");
    pipe(&impressions, "ad2", 6, 20_000);
    assert_eq!(nearby.read_values_to_list().unwrap(), ["-/5"]);
    pipe(&clicks, "ad2", 7, 30_000);
    assert_eq!(nearby.read_values_to_list().unwrap(), ["6/-"], "once");
}
