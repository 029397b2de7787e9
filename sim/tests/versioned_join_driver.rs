//! Versioned tables and as-of joins (J16–J18) under the `TestDriver`, the
//! way a Kafka Streams user tests `trades.leftJoin(rates, …)` over a table
//! materialised in a versioned store: pipe table updates out of timestamp
//! order, pipe stream records, read the results with their timestamps.
//! The application is not an example: trades valued at the exchange rate
//! in force at the trade's time (a versioned left join), and the trades
//! made while a currency had a rate (a versioned inner join).

use parsley::Stage;
use std::time::Duration;

use parsley::Join;
use parsley::{App, Json, Parsley, Topic, Utf8, I64};
use parsley_sim::{TestDriver, TestRecord};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Valuation {
    amount: i64,
    rate: Option<i64>,
}

/// How long each currency's older rates are kept.
const RETENTION_MS: i64 = 60_000;

struct Fx {
    /// Each currency's rate, stamped with when it took effect.
    rates: Topic<String, i64>,
    /// Trades, keyed by currency; the value is the amount.
    trades: Topic<String, i64>,
    valued: Topic<String, Valuation>,
    converted: Topic<String, i64>,
    app: App,
}

fn fx() -> Fx {
    let long = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let rates = long("fx-rates");
    let trades = long("trades");
    let valued = Topic::<String, Valuation>::with_codecs("valued-trades", Utf8, Json);
    let converted = long("converted-trades");
    let retention = Duration::from_millis(RETENTION_MS as u64);
    let valuing = Stage::named("valuing")
        .join(Join::stream_versioned_table(&trades, &rates, retention))
        .left(|trade, rate: Option<&i64>| Valuation {
            amount: *trade.value(),
            rate: rate.copied(),
        })
        .into(&valued)
        .build();
    let converting = Stage::named("converting")
        .join(Join::stream_versioned_table(&trades, &rates, retention))
        .inner(|trade, rate: &i64| trade.value() * rate)
        .into(&converted)
        .build();
    // The plain join, for comparison: the latest rate its task delivered.
    let latest = Stage::named("latest")
        .join(Join::stream_table(&trades, &rates))
        .inner(|trade, rate: &i64| trade.value() * rate)
        .into(&long("converted-at-latest"))
        .build();
    let app = Parsley::named("fx")
        .stage(valuing)
        .stage(converting)
        .stage(latest)
        .build()
        .unwrap();
    Fx {
        rates,
        trades,
        valued,
        converted,
        app,
    }
}

fn driver(fx: &Fx) -> TestDriver {
    TestDriver::builder(&fx.app)
        .default_partitions(2)
        .build()
        .unwrap()
}

const T0: i64 = 1_700_000_000_000;

/// J17: each trade is valued at the rate in force at its own timestamp, a
/// rate of the trade's own millisecond included, whatever order the rates
/// were piped in; the result carries the trade's timestamp. A trade before
/// any rate has none (left) and is not converted (inner).
#[test]
fn j17_a_trade_is_valued_at_the_rate_as_of_its_time() {
    let fx = fx();
    let driver = driver(&fx);
    let rates = driver.input(&fx.rates).unwrap();
    let trades = driver.input(&fx.trades).unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 110).at(T0 + 2_000))
        .unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 105).at(T0 + 1_000))
        .unwrap();
    rates
        .pipe_record(TestRecord::new("gbp", 130).at(T0 + 1_500))
        .unwrap();
    for (amount, at) in [
        (1, T0 + 500),
        (2, T0 + 1_000),
        (3, T0 + 1_999),
        (4, T0 + 2_000),
        (5, T0 + 9_000),
    ] {
        trades
            .pipe_record(TestRecord::new("eur", amount).at(at))
            .unwrap();
    }
    let valued: Vec<(Valuation, i64)> = driver
        .output(&fx.valued)
        .unwrap()
        .read_all()
        .unwrap()
        .into_iter()
        .map(|record| (record.value, record.timestamp))
        .collect();
    let valuation = |amount, rate| Valuation { amount, rate };
    assert_eq!(
        valued,
        vec![
            (valuation(1, None), T0 + 500),
            (valuation(2, Some(105)), T0 + 1_000),
            (valuation(3, Some(105)), T0 + 1_999),
            (valuation(4, Some(110)), T0 + 2_000),
            (valuation(5, Some(110)), T0 + 9_000),
        ]
    );
    let converted = driver.output(&fx.converted).unwrap().read_values().unwrap();
    assert_eq!(converted, vec![2 * 105, 3 * 105, 4 * 110, 5 * 110]);
    assert_eq!(
        driver
            .metric("valuing", "join-rows-newer-than-record-total")
            .unwrap(),
        0
    );
}

/// J16, S5: the histories are state: a restarted application restores them
/// from the changelog and values a trade at an older rate after it.
#[test]
fn j16_the_histories_survive_a_restart() {
    let fx = fx();
    let driver = driver(&fx);
    let rates = driver.input(&fx.rates).unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 105).at(T0 + 1_000))
        .unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 110).at(T0 + 2_000))
        .unwrap();
    driver.restart().unwrap();
    let trades = driver.input(&fx.trades).unwrap();
    trades
        .pipe_record(TestRecord::new("eur", 7).at(T0 + 1_500))
        .unwrap();
    trades
        .pipe_record(TestRecord::new("eur", 8).at(T0 + 2_500))
        .unwrap();
    let converted = driver.output(&fx.converted).unwrap().read_values().unwrap();
    assert_eq!(converted, vec![7 * 105, 8 * 110]);
}

/// J16: a rate older than the highest rate timestamp less the retention is
/// dropped and counted; a trade of its time is valued at the rate in force
/// before it. J17: a trade older than the retention sees only its
/// currency's latest rate, when that is not newer than the trade.
#[test]
fn j16_an_update_older_than_the_retention_is_dropped_and_counted() {
    let fx = fx();
    let driver = driver(&fx);
    let rates = driver.input(&fx.rates).unwrap();
    let trades = driver.input(&fx.trades).unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 100).at(T0))
        .unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 120).at(T0 + 2 * RETENTION_MS))
        .unwrap();
    // Below the horizon (T0 + RETENTION_MS): dropped.
    rates
        .pipe_record(TestRecord::new("eur", 999).at(T0 + RETENTION_MS - 1))
        .unwrap();
    assert_eq!(
        driver
            .metric("valuing", "versioned-table-updates-expired-total")
            .unwrap(),
        1
    );
    // At the horizon: the rate in force is still 100.
    trades
        .pipe_record(TestRecord::new("eur", 1).at(T0 + RETENTION_MS))
        .unwrap();
    // Below it: only the latest rate (120, newer than the trade) could be
    // seen, so none is.
    trades
        .pipe_record(TestRecord::new("eur", 2).at(T0 + RETENTION_MS - 1))
        .unwrap();
    let rates_seen: Vec<Option<i64>> = driver
        .output(&fx.valued)
        .unwrap()
        .read_values()
        .unwrap()
        .into_iter()
        .map(|valuation| valuation.rate)
        .collect();
    assert_eq!(rates_seen, vec![Some(100), None]);
}

/// J2, J17: a trade piped after a rate newer than itself meets that rate in
/// the plain join, which counts it (`join-rows-newer-than-record-total`);
/// the versioned joins never do.
#[test]
fn j2_j17_a_row_newer_than_the_record_is_counted_by_the_plain_join_only() {
    let fx = fx();
    let driver = driver(&fx);
    let rates = driver.input(&fx.rates).unwrap();
    let trades = driver.input(&fx.trades).unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 105).at(T0 + 1_000))
        .unwrap();
    rates
        .pipe_record(TestRecord::new("eur", 110).at(T0 + 2_000))
        .unwrap();
    // Older than the latest rate: one plain meeting of a newer row.
    trades
        .pipe_record(TestRecord::new("eur", 1).at(T0 + 1_500))
        .unwrap();
    // Of the latest rate's own millisecond, and after it: not newer.
    trades
        .pipe_record(TestRecord::new("eur", 2).at(T0 + 2_000))
        .unwrap();
    trades
        .pipe_record(TestRecord::new("eur", 3).at(T0 + 3_000))
        .unwrap();
    let newer = |stage: &str| {
        driver
            .metric(stage, "join-rows-newer-than-record-total")
            .unwrap()
    };
    assert_eq!(newer("latest"), 1);
    assert_eq!(newer("valuing"), 0);
    assert_eq!(newer("converting"), 0);
    let converted = driver.output(&fx.converted).unwrap().read_values().unwrap();
    assert_eq!(converted, vec![105, 2 * 110, 3 * 110]);
}
