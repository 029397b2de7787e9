//! Re-keying (R1, R2) under the `TestDriver`: the derived repartition
//! topic is created and listed among the topic contracts like the other derived topics, records land
//! on their new key's partition, and a downstream fold sees every record of
//! a key in one task. The application is not an example: page views keyed
//! by visitor, re-keyed by page, counted per page.

use parsley::Role;
use parsley::{App, Json, Parsley, Stage, Step, Topic, Tp, Utf8, I64};
use parsley_sim::{TestDriver, TestInputTopic, TestRecord};

struct Views {
    by_visitor: Topic<String, String>,
    by_page: Topic<String, String>,
    counts: Topic<String, i64>,
    app: App,
}

/// What building `app` refuses it with.
fn refusal(app: parsley::AppBuilder) -> String {
    app.build().unwrap_err().to_string()
}

/// Asserts that `error` names `rule` first, and says `what`.
fn assert_refused(error: &str, rule: &str, what: &str) {
    assert!(
        error.starts_with(&format!("{rule} ")) && error.contains(what),
        "{error}"
    );
}

/// A stage "count" counting the records of `source` per key into `counts`.
fn counting(source: &Topic<String, String>, counts: &Topic<String, i64>) -> Stage {
    let written = counts.clone();
    Stage::named("count")
        .state(Json, || 0i64)
        .on(source, move |count: i64, record| {
            Step::of(count + 1).emit(written.send(record.key().cloned(), count + 1))
        })
        .into(counts)
        .build()
}

/// A driver of `app`, its topics of three partitions.
fn three_partitions(app: &App) -> TestDriver {
    TestDriver::builder(app)
        .default_partitions(3)
        .build()
        .unwrap()
}

/// Asserts that `driver` lists and creates `topic` as the repartition
/// topic of `stage`, with three partitions.
fn assert_repartition(driver: &TestDriver, topic: &Topic<String, String>, stage: &str) {
    let contract = driver
        .topic_contracts()
        .into_iter()
        .find(|contract| contract.name == *topic.name())
        .expect("probed");
    assert!(contract.roles.contains(&Role::Repartition {
        stage: stage.to_string()
    }));
    assert_eq!(contract.owner(), Some(stage));
    assert_eq!(driver.cluster().partitions(topic.name().as_str()), Some(3));
}

/// Pipes each (key, value, timestamp) of `records`; where each landed.
fn pipe_each(
    input: &TestInputTopic<String, String>,
    records: &[(&str, &str, i64)],
) -> Vec<(Tp, u64)> {
    records
        .iter()
        .map(|(key, value, at)| {
            input
                .pipe_record(TestRecord::new(*key, *value).at(*at))
                .unwrap()
        })
        .collect()
}

/// The counts `driver` wrote to `counts` for `key`, in order.
fn counts_of(driver: &TestDriver, counts: &Topic<String, i64>, key: &str) -> Vec<i64> {
    driver
        .output(counts)
        .unwrap()
        .read_key_values_to_list()
        .unwrap()
        .into_iter()
        .filter(|(counted, _)| counted.as_deref() == Some(key))
        .map(|(_, count)| count)
        .collect()
}

fn views() -> Views {
    let by_visitor = Topic::<String, String>::with_codecs("views-by-visitor", Utf8, Utf8);
    let counts = Topic::<String, i64>::with_codecs("views-per-page", Utf8, I64);
    // The value is the page.
    let (rekey, by_page) =
        Stage::named("to-page").rekey(&by_visitor, Utf8, |view| view.value().clone());
    let app = Parsley::named("site")
        .stage(rekey)
        .stage(counting(&by_page, &counts))
        .build()
        .unwrap();
    Views {
        by_visitor,
        by_page,
        counts,
        app,
    }
}

/// R1: the repartition topic is derived, `<application.id>-<stage>-repartition`,
/// listed by the probe with its stage's task count, and created by the
/// driver.
#[test]
fn r1_the_repartition_topic_is_derived_probed_and_created() {
    let views = views();
    assert_eq!(views.by_page.name().as_str(), "site-to-page-repartition");
    assert_repartition(&three_partitions(&views.app), &views.by_page, "to-page");
}

/// R1, R2: every visitor's views of a page are counted in one task, each
/// re-keyed record keeps its value and timestamp and claims its source
/// record.
#[test]
fn r2_rekeyed_records_keep_value_timestamp_and_cause() {
    let views = views();
    let driver = three_partitions(&views.app);
    let input = driver.input(&views.by_visitor).unwrap();
    let sources = pipe_each(
        &input,
        &[
            ("ann", "home", 10),
            ("bob", "home", 20),
            ("cyd", "shop", 30),
            ("dee", "home", 40),
        ],
    );
    let rekeyed = driver.output(&views.by_page).unwrap().read_all().unwrap();
    assert_eq!(rekeyed.len(), 4);
    for (record, (tp, offset)) in rekeyed.iter().zip(&sources) {
        assert_eq!(record.key.as_deref(), Some(record.value.as_str()));
        assert_eq!(
            record.stamp.offset(tp),
            Some(*offset),
            "a re-keyed record claims its source record"
        );
    }
    assert_eq!(
        rekeyed
            .iter()
            .map(|record| record.timestamp)
            .collect::<Vec<_>>(),
        [10, 20, 30, 40]
    );
    // Same page, same partition.
    let home: Vec<u32> = rekeyed
        .iter()
        .filter(|record| record.value == "home")
        .map(|record| record.tp.partition)
        .collect();
    assert!(home.windows(2).all(|pair| pair[0] == pair[1]), "{home:?}");
    assert_eq!(counts_of(&driver, &views.counts, "home"), [1, 2, 3]);
}

/// R1: a re-key built into another application first, and another stage
/// writing a repartition topic, are refused naming R1.
#[test]
fn r1_foreign_rekeys_and_other_writers_are_refused() {
    let views = views();
    let rekey = views.app.stage("to-page").unwrap().stage.clone();
    let error = refusal(Parsley::named("other").stage(rekey));
    assert_refused(&error, "R1", "site-to-page-repartition");
    let (rekey, by_page) =
        Stage::named("to-page").rekey(&views.by_visitor, Utf8, |view| view.value().clone());
    let forger = Stage::named("forger")
        .on(&views.by_visitor, {
            let by_page = by_page.clone();
            move |view| vec![by_page.send(view.key().cloned(), view.value().clone())]
        })
        .into(&by_page)
        .build();
    let error = refusal(Parsley::named("site").stage(rekey).stage(forger));
    assert_refused(&error, "R1", "only that stage writes it");
}

/// R1, C3: derived topics follow derived topics: the repartition topic takes
/// its re-key's source count, and the downstream fold's changelog the
/// repartition topic's, whatever the driver's default — though the
/// changelog's name sorts before the repartition topic's.
#[test]
fn r1_derived_topics_follow_the_repartition_topic() {
    let views = views();
    let driver = TestDriver::builder(&views.app)
        .default_partitions(2)
        .partitions("views-by-visitor", 5)
        .build()
        .unwrap();
    let cluster = driver.cluster();
    assert_eq!(cluster.partitions("site-to-page-repartition"), Some(5));
    assert_eq!(cluster.partitions("site-count-state-changelog"), Some(5));
}

/// Clicks keyed by visitor joined with each visitor's country (a
/// stream–table join), the join's output re-keyed within the join stage by
/// country (R3) and counted per country.
struct Countries {
    clicks: Topic<String, String>,
    visitors: Topic<String, String>,
    joined: Topic<String, String>,
    by_country: Topic<String, String>,
    counts: Topic<String, i64>,
    app: App,
}

/// The join of clicks with their visitor's country, before its build.
fn joining(
    clicks: &Topic<String, String>,
    visitors: &Topic<String, String>,
    joined: &Topic<String, String>,
) -> parsley::OperatorBuilder<parsley::StreamTableJoined<String, String, String, String>> {
    parsley::Stage::named("join")
        .join(parsley::Join::stream_table(clicks, visitors))
        .left(|click, country: Option<&String>| {
            format!("{}@{}", click.value(), country.map_or("?", String::as_str))
        })
        .into(joined)
}

fn countries() -> Countries {
    let clicks = Topic::<String, String>::with_codecs("clicks", Utf8, Utf8);
    let visitors = Topic::<String, String>::with_codecs("visitor-countries", Utf8, Utf8);
    let joined = Topic::<String, String>::with_codecs("clicks-with-country", Utf8, Utf8);
    let counts = Topic::<String, i64>::with_codecs("clicks-per-country", Utf8, I64);
    let by_country = joined.repartition("to-country", Utf8);
    let join = joining(&clicks, &visitors, &joined)
        .rekey_output(&joined, &by_country, |_, joined| {
            joined.rsplit('@').next().unwrap_or("?").to_string()
        })
        .build();
    let app = Parsley::named("site")
        .stage(join)
        .stage(counting(&by_country, &counts))
        .build()
        .unwrap();
    Countries {
        clicks,
        visitors,
        joined,
        by_country,
        counts,
        app,
    }
}

/// R3 (with R1): a re-key within a join stage derives, probes and creates
/// its repartition topic as a re-key stage does, owned by the join; the
/// join writes each joined click to its output and again under its
/// country, with the same value, timestamp and stamp (which claims the
/// click and the table row the join read), and every click of a country
/// is counted in one task.
#[test]
fn r3_a_join_rekeys_its_output_within_its_own_stage() {
    let countries = countries();
    assert_eq!(
        countries.by_country.name().as_str(),
        "site-to-country-repartition"
    );
    let driver = three_partitions(&countries.app);
    assert_repartition(&driver, &countries.by_country, "join");
    let table = driver.input(&countries.visitors).unwrap();
    let rows = pipe_each(
        &table,
        &[("ann", "fr", 1), ("bob", "de", 1), ("cyd", "fr", 1)],
    );
    let input = driver.input(&countries.clicks).unwrap();
    let clicks = pipe_each(
        &input,
        &[
            ("ann", "home", 10),
            ("bob", "home", 20),
            ("cyd", "shop", 30),
            ("dee", "cart", 40),
            ("ann", "shop", 50),
        ],
    );
    let joined = driver
        .output(&countries.joined)
        .unwrap()
        .read_all()
        .unwrap();
    let rekeyed = driver
        .output(&countries.by_country)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(
        joined.iter().map(|r| r.value.as_str()).collect::<Vec<_>>(),
        ["home@fr", "home@de", "shop@fr", "cart@?", "shop@fr"]
    );
    assert_eq!(rekeyed.len(), joined.len(), "one copy per joined click");
    for ((record, copy), (tp, offset)) in joined.iter().zip(&rekeyed).zip(&clicks) {
        assert_eq!(copy.value, record.value);
        assert_eq!(copy.timestamp, record.timestamp);
        assert_eq!(copy.stamp, record.stamp, "stamped at one stamping site");
        assert_eq!(
            Some(copy.key.as_deref().unwrap_or_default()),
            record.value.rsplit('@').next()
        );
        assert_eq!(copy.stamp.offset(tp), Some(*offset), "claims the click");
    }
    // ann's first click claims the table row it was joined with.
    let (row_tp, row_offset) = &rows[0];
    assert_eq!(rekeyed[0].stamp.offset(row_tp), Some(*row_offset));
    assert_eq!(
        counts_of(&driver, &countries.counts, "fr"),
        [1, 2, 3],
        "every click from France counted in one task"
    );
}

/// R3 with X5: a tombstone on a re-keyed output has no value to select a
/// key from; the stage stops naming the record, and nothing of the step is
/// written.
#[test]
fn r3_a_tombstone_on_a_rekeyed_output_stops_the_stage_naming_the_record() {
    let input = Topic::<String, String>::with_codecs("commands", Utf8, Utf8);
    let table = Topic::<String, String>::with_codecs("table", Utf8, Utf8);
    let writing = Stage::named("write")
        .on(&input, {
            let table = table.clone();
            move |command: &parsley::Record<String, String>| match command.value().as_str() {
                "delete" => vec![table.tombstone(command.key().cloned())],
                value => vec![table.send(command.key().cloned(), value.to_string())],
            }
        })
        .into(&table)
        .rekey_output(&table, &table.repartition("by-value", Utf8), |_, value| {
            value.clone()
        })
        .build();
    let app = Parsley::named("site").stage(writing).build().unwrap();
    let driver = TestDriver::builder(&app).build().unwrap();
    let commands = driver.input(&input).unwrap();
    commands.pipe_record(TestRecord::new("k", "v")).unwrap();
    let error = commands
        .pipe_record(TestRecord::new("k", "delete"))
        .expect_err("the tombstone stops the stage");
    let text = error.to_string();
    assert!(
        text.contains("R3") && text.contains("tombstone") && text.contains("commands-0@1"),
        "{text}"
    );
    assert!(
        !text.contains("codec"),
        "the stage's output is at fault, not its input's bytes: {text}"
    );
    assert_eq!(driver.output(&table).unwrap().read_all().unwrap().len(), 1);
}

/// R1 with R3: two re-keys with one name, on one stage or on two, would
/// write one repartition topic with two key functions; the build refuses
/// them naming R1.
#[test]
fn r1_two_rekeys_with_one_name_are_refused() {
    let countries = countries();
    let (clicks, joined) = (&countries.clicks, &countries.joined);
    let rekeyed = |join: parsley::OperatorBuilder<_>| {
        join.rekey_output(
            joined,
            &joined.repartition("to-country", Utf8),
            |_, joined| joined.clone(),
        )
    };
    let twice = rekeyed(rekeyed(joining(clicks, &countries.visitors, joined))).build();
    let error = refusal(Parsley::named("site").stage(twice));
    assert_refused(&error, "R1", "site-to-country-repartition");
    let join = rekeyed(joining(clicks, &countries.visitors, joined)).build();
    let (rekey, _) = Stage::named("to-country").rekey(clicks, Utf8, |click| click.value().clone());
    let error = refusal(Parsley::named("site").stage(join).stage(rekey));
    assert_refused(&error, "R1", "two re-keys");
}

/// R3: a re-key given a topic of the output's name but other codecs would
/// read what the stage writes with the wrong codecs; the build refuses it.
#[test]
fn r3_a_rekey_of_an_output_with_other_codecs_is_refused() {
    let countries = countries();
    let as_json = Topic::<String, String>::with_codecs("clicks-with-country", Utf8, Json);
    let join = joining(&countries.clicks, &countries.visitors, &countries.joined)
        .rekey_output(
            &as_json,
            &as_json.repartition("by-value", Utf8),
            |_, joined| joined.clone(),
        )
        .build();
    let error = refusal(Parsley::named("site").stage(join));
    assert_refused(&error, "R3", "other codecs");
}

/// R3 with W4: the re-keyed copy of a window's record keeps the timestamp
/// the window wrote it at (the window's latest record's), not the
/// delivery's: a record back in time rewrites the window at 40 and so
/// does its copy.
#[test]
fn r3_a_rekeyed_window_record_keeps_the_windows_timestamp() {
    let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
    let totals = Topic::<parsley::Windowed<String>, i64>::with_codecs(
        "totals",
        parsley::WindowedCodec(Utf8),
        I64,
    );
    let by_total = totals.repartition("by-total", I64);
    let windows = Stage::named("totals")
        .windowed(parsley::Windows::tumbling(
            std::time::Duration::from_millis(60),
        ))
        .aggregate(&sales, I64, || 0i64, |total, sale| total + sale.value())
        .emit(parsley::Emit::OnUpdate)
        .into(&totals)
        .rekey_output(&totals, &by_total, |_, total| *total)
        .build();
    let app = Parsley::named("shop").stage(windows).build().unwrap();
    let driver = TestDriver::builder(&app).build().unwrap();
    let input = driver.input(&sales).unwrap();
    input.pipe_record(TestRecord::new("k", 1).at(40)).unwrap();
    input.pipe_record(TestRecord::new("k", 2).at(20)).unwrap();
    let written: Vec<i64> = driver
        .output(&totals)
        .unwrap()
        .read_all()
        .unwrap()
        .iter()
        .map(|record| record.timestamp)
        .collect();
    let copied: Vec<i64> = driver
        .output(&by_total)
        .unwrap()
        .read_all()
        .unwrap()
        .iter()
        .map(|record| record.timestamp)
        .collect();
    assert_eq!(
        written,
        [40, 40],
        "W4: the window's latest record's timestamp"
    );
    assert_eq!(
        copied, written,
        "R3: each copy keeps its record's timestamp"
    );
}
