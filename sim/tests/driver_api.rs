//! The `TestDriver` as a Kafka Streams `TopologyTestDriver` user expects it:
//! pipes that take `&str` keys and values, consuming reads of a per-handle
//! output queue, a stage's state by key with no topic named, and output
//! rendered for snapshots. Every test runs a word count of its own: `words`
//! (three partitions, `Utf8` keys, `I64` weights) feeds `count`, which keeps
//! a running total per word and emits it to `counts`, and every minute
//! emits how many words it has seen to `totals`; `lines` (`Utf8` values)
//! feeds `shout`, a stateless echo in capitals; `scores` (JSON keys) feeds
//! `best`, the best score per player.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::START;
use parsley::{Json, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::JsonKey;
use parsley_sim::{DriverError, TestDriver, TestRecord};

struct WordCount {
    words: Topic<String, i64>,
    counts: Topic<String, i64>,
    totals: Topic<String, i64>,
    lines: Topic<String, String>,
    shouts: Topic<String, String>,
    scores: Topic<String, i64>,
    app: parsley::App,
}

fn word_count() -> WordCount {
    let long = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let text = |name: &str| Topic::<String, String>::with_codecs(name, Utf8, Utf8);
    let (words, counts, totals) = (long("words"), long("counts"), long("totals"));
    let (lines, shouts) = (text("lines"), text("shouts"));
    let scores: Topic<String, i64> = Topic::new("scores");
    let count = Stage::named("count")
        .state(I64, || 0i64)
        .on(&words, {
            let counts = counts.clone();
            move |total: i64, word| {
                let total = total + word.value();
                Step::of(total).emit(counts.send(word.key().cloned(), total))
            }
        })
        .tick_fold(Duration::from_secs(60), {
            let totals = totals.clone();
            move |ticks: i64, _tick| Step::of(ticks + 1).emit(totals.send(None, ticks + 1))
        })
        .into((&counts, &totals))
        .build();
    let shout = Stage::named("shout")
        .on(&lines, {
            let shouts = shouts.clone();
            move |line| vec![shouts.send(line.key().cloned(), line.value().to_uppercase())]
        })
        .into(&shouts)
        .build();
    let best = Stage::named("best")
        .state(Json, || 0i64)
        .on(&scores, |best: i64, score| {
            Step::of(best.max(*score.value()))
        })
        .build();
    let app = Parsley::named("words")
        .stage(count)
        .stage(shout)
        .stage(best)
        .build()
        .unwrap();
    WordCount {
        words,
        counts,
        totals,
        lines,
        shouts,
        scores,
        app,
    }
}

fn driver(app: &WordCount) -> TestDriver {
    TestDriver::builder(&app.app)
        .initial_wall_clock(START)
        .partitions("words", 3)
        .build()
        .unwrap()
}

/// A TTD user pipes `pipeInput("alice", 5)`: on a `Topic<String, i64>` the
/// key may be a `&str`, a `String`, an `Option<String>` or `None`.
#[test]
fn pipe_takes_a_str_a_string_an_option_or_none_as_the_key() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    words.pipe("alice", 5).unwrap();
    words.pipe("alice".to_string(), 1).unwrap();
    let alice = "alice".to_string();
    words.pipe(&alice, 1).unwrap();
    words.pipe(Some(alice), 1).unwrap();
    words.pipe(None, 7).unwrap();
    words
        .pipe_record(TestRecord::new("bob", 2).at(START - 1))
        .unwrap();
    let counts = driver.output(&app.counts).unwrap();
    assert_eq!(
        counts.read_key_values_to_list().unwrap(),
        [
            (Some("alice".to_string()), 5),
            (Some("alice".to_string()), 6),
            (Some("alice".to_string()), 7),
            (Some("alice".to_string()), 8),
            (None, 7),
            (Some("bob".to_string()), 2),
        ]
    );
}

/// A TTD user pipes `pipeInput("k", "hello")`: on a `Topic<_, String>` the
/// value may be a `&str` as well as a `String`.
#[test]
fn pipe_takes_a_str_as_a_string_value() {
    let app = word_count();
    let driver = driver(&app);
    let lines = driver.input(&app.lines).unwrap();
    lines.pipe("k", "hello").unwrap();
    lines.pipe("k", "world".to_string()).unwrap();
    lines.pipe_record(TestRecord::new(None, "again")).unwrap();
    assert_eq!(
        driver
            .output(&app.shouts)
            .unwrap()
            .read_values_to_list()
            .unwrap(),
        ["HELLO", "WORLD", "AGAIN"]
    );
}

/// A TTD user's `readValue` removes the value it returns: each call returns
/// the next record in write order, across partitions.
#[test]
fn read_value_consumes_one_record_at_a_time_in_write_order() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    for (word, weight) in [("a", 1), ("b", 10), ("c", 100), ("a", 2)] {
        words.pipe(word, weight).unwrap();
    }
    let counts = driver.output(&app.counts).unwrap();
    assert_eq!(counts.read_value().unwrap(), 1);
    assert_eq!(counts.read_value().unwrap(), 10);
    assert_eq!(counts.read_value().unwrap(), 100);
    words.pipe("b", 5).unwrap();
    assert_eq!(counts.read_value().unwrap(), 3);
    assert_eq!(counts.read_value().unwrap(), 15);
}

/// A TTD user's `readValue` on an empty queue throws
/// `NoSuchElementException`: here a typed error naming the topic.
#[test]
fn read_value_on_an_empty_queue_is_an_error() {
    let app = word_count();
    let driver = driver(&app);
    let counts = driver.output(&app.counts).unwrap();
    let error = counts.read_value().unwrap_err();
    assert_eq!(
        error,
        DriverError::NoRecordToRead {
            topic: "counts".to_string()
        }
    );
    assert!(error.to_string().contains("is_empty()"), "{error}");
    driver.input(&app.words).unwrap().pipe("a", 1).unwrap();
    assert_eq!(counts.read_value().unwrap(), 1);
    assert!(matches!(
        counts.read_key_value(),
        Err(DriverError::NoRecordToRead { .. })
    ));
    assert!(matches!(
        counts.read_record(),
        Err(DriverError::NoRecordToRead { .. })
    ));
}

/// A TTD user's `readKeyValue` returns the next record's key and value and
/// removes it; a null key reads as `None`.
#[test]
fn read_key_value_consumes_the_next_key_and_value() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    words.pipe("a", 4).unwrap();
    words.pipe(None, 2).unwrap();
    let counts = driver.output(&app.counts).unwrap();
    assert_eq!(counts.read_key_value().unwrap(), (Some("a".to_string()), 4));
    assert_eq!(counts.read_key_value().unwrap(), (None, 2));
    assert!(counts.is_empty());
}

/// A TTD user's `readValuesToList` and `readKeyValuesToList` drain the
/// queue: a second call returns only what was committed since.
#[test]
fn to_list_reads_drain_the_queue() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    words.pipe("a", 1).unwrap();
    words.pipe("b", 2).unwrap();
    let counts = driver.output(&app.counts).unwrap();
    assert_eq!(counts.read_values_to_list().unwrap(), [1, 2]);
    assert!(counts.read_values_to_list().unwrap().is_empty());
    words.pipe("a", 3).unwrap();
    assert_eq!(
        counts.read_key_values_to_list().unwrap(),
        [(Some("a".to_string()), 4)]
    );
    assert!(counts.read_key_values_to_list().unwrap().is_empty());
    words.pipe("b", 1).unwrap();
    let records = counts.read_records_to_list().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].key.as_deref(), records[0].value),
        (Some("b"), 3)
    );
}

/// A TTD user's `readKeyValuesToMap` keeps the last value of each key, and
/// refuses a null key (`IllegalStateException`); here the refusal consumes
/// nothing.
#[test]
fn read_key_values_to_map_keeps_the_last_value_and_refuses_a_null_key() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    for (word, weight) in [("a", 1), ("b", 2), ("a", 3)] {
        words.pipe(word, weight).unwrap();
    }
    let counts = driver.output(&app.counts).unwrap();
    assert_eq!(
        counts.read_key_values_to_map().unwrap(),
        HashMap::from([("a".to_string(), 4), ("b".to_string(), 2)])
    );
    assert!(counts.read_key_values_to_map().unwrap().is_empty());

    words.pipe("c", 1).unwrap();
    words.pipe(None, 9).unwrap();
    let error = counts.read_key_values_to_map().unwrap_err();
    assert!(
        matches!(&error, DriverError::NullKeyInMap { tp, .. } if tp.topic.as_str() == "counts"),
        "{error}"
    );
    assert_eq!(counts.queue_size(), 2, "the refused read consumed nothing");
    assert_eq!(
        counts.read_key_values_to_list().unwrap(),
        [(Some("c".to_string()), 1), (None, 9)]
    );
}

/// A TTD user's `getQueueSize` and `isEmpty` count what is committed and
/// not read yet, and reading lowers the count.
#[test]
fn queue_size_and_is_empty_count_what_is_left_to_read() {
    let app = word_count();
    let driver = driver(&app);
    let counts = driver.output(&app.counts).unwrap();
    assert!(counts.is_empty());
    assert_eq!(counts.queue_size(), 0);
    let words = driver.input(&app.words).unwrap();
    for word in ["a", "b", "c", "d"] {
        words.pipe(word, 1).unwrap();
    }
    assert_eq!(counts.queue_size(), 4);
    counts.read_value().unwrap();
    assert_eq!(counts.queue_size(), 3);
    assert!(!counts.is_empty());
    counts.read_values_to_list().unwrap();
    assert_eq!(counts.queue_size(), 0);
    assert!(counts.is_empty());
}

/// A TopologyTestDriver keeps one output queue per topic: every
/// `TestOutputTopic` of it reads that queue, so what one handle consumed is
/// gone for the others, and a helper that opens the output anew reads on
/// from where the test left off instead of reading everything again.
#[test]
fn every_output_handle_of_a_topic_reads_one_queue() {
    let app = word_count();
    let driver = driver(&app);
    let first = driver.output(&app.counts).unwrap();
    let second = driver.output(&app.counts).unwrap();
    let words = driver.input(&app.words).unwrap();
    words.pipe("a", 1).unwrap();
    words.pipe("b", 1).unwrap();
    assert_eq!(second.queue_size(), 2);
    assert_eq!(first.read_value().unwrap(), 1);
    assert_eq!(second.queue_size(), 1, "the first handle consumed one");
    assert_eq!(second.read_key_value().unwrap(), (Some("b".into()), 1));
    assert!(first.is_empty());
    assert!(matches!(
        first.read_value(),
        Err(DriverError::NoRecordToRead { .. })
    ));
    // A helper that opens the output itself sees only what is new.
    let read_fresh = |driver: &TestDriver| driver.output(&app.counts).unwrap().read_new().unwrap();
    words.pipe("a", 1).unwrap();
    let fresh = read_fresh(&driver);
    assert_eq!(
        fresh.iter().map(|record| record.value).collect::<Vec<_>>(),
        [2]
    );
    assert!(read_fresh(&driver).is_empty(), "read twice");
    // The non-consuming reads still see everything.
    assert_eq!(second.read_values().unwrap(), [1, 1, 2]);
}

/// Not in a TTD: `read_all` and `read_values` see everything committed,
/// every time, whatever the consuming reads took.
#[test]
fn read_all_and_read_values_do_not_consume() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    words.pipe("a", 1).unwrap();
    words.pipe("a", 1).unwrap();
    let counts = driver.output(&app.counts).unwrap();
    assert_eq!(counts.read_values().unwrap(), [1, 2]);
    assert_eq!(counts.read_values().unwrap(), [1, 2]);
    assert_eq!(
        counts.queue_size(),
        2,
        "read_values left the queue as it was"
    );
    assert_eq!(counts.read_value().unwrap(), 1);
    assert_eq!(counts.read_all().unwrap().len(), 2);
    assert_eq!(counts.read_values().unwrap(), [1, 2]);
}

/// A TTD user's `getKeyValueStore("count").get("alice")`: the state by
/// stage and key, with no source topic named, found on whichever of the
/// stage's three tasks holds the key.
#[test]
fn store_reads_a_stages_state_by_key_without_a_topic() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    let keys = ["alice", "bob", "carol", "dave", "erin", "frank"];
    let mut partitions = Vec::new();
    for (weight, word) in keys.iter().enumerate() {
        partitions.push(words.pipe(*word, weight as i64 + 1).unwrap().partition);
        words.pipe(*word, 10).unwrap();
    }
    partitions.sort();
    partitions.dedup();
    assert!(partitions.len() > 1, "the keys span several tasks");
    let store = driver.store::<i64>("count").unwrap();
    for (weight, word) in keys.iter().enumerate() {
        let expected = Some(weight as i64 + 11);
        assert_eq!(store.get(*word).unwrap(), expected, "{word}");
        assert_eq!(store.get(word.to_string()).unwrap(), expected, "{word}");
        assert_eq!(
            driver
                .key_slot::<i64, _, _>("count", &app.words, &word.to_string())
                .unwrap(),
            expected,
            "key_slot agrees"
        );
    }
    assert_eq!(store.get("zed").unwrap(), None, "an unseen key is None");
    assert_eq!(store.len(), keys.len());
    // The view is live: it reads what is committed when asked.
    words.pipe("alice", 100).unwrap();
    assert_eq!(store.get("alice").unwrap(), Some(111));
}

/// A TTD user's store keys are typed by the topic's serde: keys under the
/// `Json` codec (the default) are found too, and a key type of your own
/// goes in a `JsonKey`.
#[test]
fn store_finds_keys_of_a_json_keyed_source() {
    let app = word_count();
    let driver = driver(&app);
    let scores = driver.input(&app.scores).unwrap();
    scores.pipe("ann", 3).unwrap();
    scores.pipe("ann", 9).unwrap();
    scores.pipe("ann", 4).unwrap();
    let store = driver.store::<i64>("best").unwrap();
    assert_eq!(store.get("ann").unwrap(), Some(9));
    assert_eq!(store.get(JsonKey("ann".to_string())).unwrap(), Some(9));
    assert_eq!(store.get("bea").unwrap(), None);
}

/// A TTD user's `getKeyValueStore` of a wrong name or type fails: here an
/// unknown stage, a stateless stage, a wrong state type and a key of a type
/// no source has are refused, each saying why.
#[test]
fn store_refuses_what_it_cannot_read() {
    let app = word_count();
    let driver = driver(&app);
    assert!(matches!(
        driver.store::<i64>("cuont"),
        Err(DriverError::UnknownStage { suggestion: Some(ref name), .. }) if name == "count"
    ));
    assert!(matches!(
        driver.store::<()>("shout"),
        Err(DriverError::WrongStateType { .. })
    ));
    assert!(matches!(
        driver.store::<String>("count"),
        Err(DriverError::WrongStateType { .. })
    ));
    let error = driver.store::<i64>("count").unwrap().get(7i64).unwrap_err();
    assert!(
        matches!(&error, DriverError::StoreKeyType { stage, key_type: "i64", .. } if stage == "count"),
        "{error}"
    );
    assert!(error.to_string().contains("key_slot"), "{error}");
}

/// A TTD user snapshots output with decoded keys and values: `render()`
/// prints each committed record as `tp@offset  key  value  stamp`.
#[test]
fn render_prints_committed_records_decoded_for_snapshots() {
    let app = word_count();
    let driver = driver(&app);
    let words = driver.input(&app.words).unwrap();
    words.pipe("alice", 5).unwrap();
    words.pipe("alice", 2).unwrap();
    words.pipe(None, 1).unwrap();
    let counts = driver.output(&app.counts).unwrap();
    insta::assert_snapshot!(counts.render().unwrap(), @r#"
    counts-0@0  key "alice"  value 5  stamp {words-0@0}
    counts-0@2  key "alice"  value 7  stamp {words-0@1}
    counts-0@4  key null  value 1  stamp {words-0@2}
    "#);
    // Rendering does not consume; the same rendering serves what was read.
    assert_eq!(counts.queue_size(), 3);
    assert_eq!(
        parsley_sim::render_records(&counts.read_new().unwrap()),
        counts.render().unwrap()
    );
}

/// A TTD user reads numbers as numbers: `tick_report` prints the values of
/// an `I64` topic as numbers, not as their eight bytes in hex.
#[test]
fn tick_report_prints_i64_values_as_numbers() {
    let app = word_count();
    let driver = TestDriver::builder(&app.app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    driver.input(&app.words).unwrap().pipe("a", 1).unwrap();
    driver.advance_wall_clock(Duration::from_secs(60)).unwrap();
    driver.advance_wall_clock(Duration::from_secs(60)).unwrap();
    assert_eq!(
        driver.output(&app.totals).unwrap().read_values().unwrap(),
        [1, 2]
    );
    insta::assert_snapshot!(driver.tick_report(), @r"
     +60s  count/0  emit    tick words-count-ticks-0@0  stamp {words-0@0}
     +60s  count/0  deliver tick words-count-ticks-0@0  Tick { timestamp: 1700000060000 }
           count/0    -> totals-0@0  key null  value 1  stamp {words-0@0, words-count-ticks-0@0}
    +120s  count/0  emit    tick words-count-ticks-0@2  stamp {words-0@0, words-count-ticks-0@0}
    +120s  count/0  deliver tick words-count-ticks-0@2  Tick { timestamp: 1700000120000 }
           count/0    -> totals-0@2  key null  value 2  stamp {words-0@0, words-count-ticks-0@2}
    ");
}

/// §9.2: the driver lists the topics the application's tasks wrote to —
/// sinks, changelogs and tick topics, never the input the test piped — and
/// the list grows with what the tasks write.
#[test]
fn produced_topics_lists_what_the_tasks_wrote() {
    let app = word_count();
    let driver = driver(&app);
    assert!(driver.produced_topics().is_empty(), "nothing written yet");

    driver.input(&app.words).unwrap().pipe("a", 1).unwrap();
    assert_eq!(
        driver.produced_topics(),
        ["counts", "words-count-state-changelog"]
    );

    driver.input(&app.lines).unwrap().pipe("a", "hi").unwrap();
    driver.advance_wall_clock(Duration::from_secs(60)).unwrap();
    assert_eq!(
        driver.produced_topics(),
        [
            "counts",
            "shouts",
            "totals",
            "words-count-state-changelog",
            "words-count-ticks"
        ]
    );
}

/// `Step::emit_all` emits a list the logic computes, in order, after the
/// emissions already added: here one record per unit of an order, then
/// the running total.
#[test]
fn a_step_emits_a_computed_list() {
    let orders: Topic<String, i64> = Topic::with_codecs("orders", Utf8, I64);
    let units: Topic<String, i64> = Topic::with_codecs("units", Utf8, I64);
    let split = Stage::named("split")
        .state(I64, || 0i64)
        .on(&orders, {
            let units = units.clone();
            move |total: i64, order| {
                let count = *order.value();
                let key = order.key().cloned();
                Step::of(total + count)
                    .emit_all((1..=count).map(|unit| units.send(key.clone(), unit)))
                    .emit(units.send(key.clone(), -(total + count)))
            }
        })
        .into(&units)
        .build();
    let app = Parsley::named("split").stage(split).build().unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let input = driver.input(&orders).unwrap();
    input.pipe("o1", 3).unwrap();
    input.pipe("o1", 2).unwrap();
    let out = driver.output(&units).unwrap();
    assert_eq!(out.read_values_to_list().unwrap(), [1, 2, 3, -3, 1, 2, -5]);
}
