//! Re-keying (R1, R2) under the `TestDriver`: the derived repartition
//! topic is created and probed like the other derived topics, records land
//! on their new key's partition, and a downstream fold sees every record of
//! a key in one task. The application is not an example: page views keyed
//! by visitor, re-keyed by page, counted per page.

use parsley::probe::Role;
use parsley::{App, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::{TestDriver, TestRecord};

struct Views {
    by_visitor: Topic<String, String>,
    by_page: Topic<String, String>,
    counts: Topic<String, i64>,
    app: App,
}

fn views() -> Views {
    let by_visitor = Topic::<String, String>::with_codecs("views-by-visitor", Utf8, Utf8);
    let counts = Topic::<String, i64>::with_codecs("views-per-page", Utf8, I64);
    let site = Parsley::named("site");
    // The value is the page.
    let (rekey, by_page) = site.rekey("to-page", &by_visitor, Utf8, |view| view.value().clone());
    let counting = Stage::named("count")
        .state(Json, || 0i64)
        .on(&by_page, {
            let counts = counts.clone();
            move |count: i64, view| {
                Step::of(count + 1).emit(counts.send(view.key().cloned(), count + 1))
            }
        })
        .into(&counts)
        .build();
    let app = site.stage(rekey).stage(counting).build().unwrap();
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
    let contract = TestDriver::builder(&views.app)
        .default_partitions(3)
        .build()
        .unwrap()
        .probe()
        .into_iter()
        .find(|contract| contract.name == *views.by_page.name())
        .expect("probed");
    assert!(contract.roles.contains(&Role::Repartition {
        stage: "to-page".to_string()
    }));
    assert_eq!(contract.owner(), Some("to-page"));
    let driver = TestDriver::builder(&views.app)
        .default_partitions(3)
        .build()
        .unwrap();
    assert_eq!(
        driver.cluster().partitions(views.by_page.name().as_str()),
        Some(3)
    );
}

/// R1, R2: every visitor's views of a page are counted in one task, each
/// re-keyed record keeps its value and timestamp and claims its source
/// record.
#[test]
fn r2_rekeyed_records_keep_value_timestamp_and_cause() {
    let views = views();
    let driver = TestDriver::builder(&views.app)
        .default_partitions(3)
        .build()
        .unwrap();
    let input = driver.input(&views.by_visitor).unwrap();
    let mut sources = Vec::new();
    for (visitor, page, at) in [
        ("ann", "home", 10),
        ("bob", "home", 20),
        ("cyd", "shop", 30),
        ("dee", "home", 40),
    ] {
        sources.push(
            input
                .pipe_record(TestRecord::new(visitor, page).at(at))
                .unwrap(),
        );
    }
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
    let counts = driver
        .output(&views.counts)
        .unwrap()
        .read_key_values_to_list()
        .unwrap();
    assert_eq!(
        counts
            .iter()
            .filter(|(page, _)| page.as_deref() == Some("home"))
            .map(|(_, count)| *count)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

/// R1: a re-key made by another application's builder, and another stage
/// writing a repartition topic, are refused naming R1.
#[test]
fn r1_foreign_rekeys_and_other_writers_are_refused() {
    let views = views();
    let other = Parsley::named("other");
    let (rekey, _) = Parsley::named("site").rekey("to-page", &views.by_visitor, Utf8, |view| {
        view.value().clone()
    });
    let error = other.stage(rekey).build().unwrap_err().to_string();
    assert!(
        error.starts_with("R1 ") && error.contains("site-to-page-repartition"),
        "{error}"
    );
    let site = Parsley::named("site");
    let (rekey, by_page) = site.rekey("to-page", &views.by_visitor, Utf8, |view| {
        view.value().clone()
    });
    let forger = Stage::named("forger")
        .on(&views.by_visitor, {
            let by_page = by_page.clone();
            move |view| vec![by_page.send(view.key().cloned(), view.value().clone())]
        })
        .into(&by_page)
        .build();
    let error = site
        .stage(rekey)
        .stage(forger)
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("R1 ") && error.contains("only the re-key stage writes it"),
        "{error}"
    );
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
