//! What a new user sees when they get a `TestDriver` call wrong: every error
//! names what was wrong and what would have been right. The topology is a
//! user's own diamond (`events` feeds `enrich` and `score`; `join` consumes
//! both branches), built here with the public API only.

use std::time::Duration;

use parsley::{App, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::{DriverError, TestDriver};

struct Diamond {
    events: Topic<String, i64>,
    left: Topic<String, i64>,
    right: Topic<String, i64>,
    joined: Topic<String, i64>,
    app: App,
}

fn diamond() -> Diamond {
    let events: Topic<String, i64> = Topic::with_codecs("events", Utf8, I64);
    let left: Topic<String, i64> = Topic::with_codecs("left", Utf8, I64);
    let right: Topic<String, i64> = Topic::with_codecs("right", Utf8, I64);
    let joined: Topic<String, i64> = Topic::with_codecs("joined", Utf8, I64);
    let to_left = left.clone();
    let enrich = Stage::named("enrich")
        .on(&events, move |event| {
            vec![to_left.send(event.key().cloned(), event.value() * 2)]
        })
        .into(&left)
        .build();
    let to_right = right.clone();
    let score = Stage::named("score")
        .on(&events, move |event| {
            if *event.value() < 0 {
                return Err(format!("negative event {}", event.value()));
            }
            Ok(vec![to_right.send(event.key().cloned(), 1)])
        })
        .into(&right)
        .build();
    let to_joined = joined.clone();
    let to_joined_too = joined.clone();
    let join = Stage::named("join")
        .state(I64, || 0i64)
        .on(&left, move |total: i64, record| {
            let total = total + record.value();
            Step::of(total).emit(to_joined.send(record.key().cloned(), total))
        })
        .on(&right, move |total: i64, record| {
            let total = total + record.value();
            Step::of(total).emit(to_joined_too.send(record.key().cloned(), total))
        })
        .ticks(Duration::from_secs(60), |_tick| Vec::new())
        .into(&joined)
        .build();
    let app = Parsley::named("shop")
        .stage(enrich)
        .stage(score)
        .stage(join)
        .build()
        .expect("the diamond composes");
    Diamond {
        events,
        left,
        right,
        joined,
        app,
    }
}

#[test]
fn a_misspelt_stage_lists_the_stages_and_suggests_the_closest() {
    let diamond = diamond();
    let driver = TestDriver::new(&diamond.app).unwrap();
    let error = driver
        .key_slot::<i64, _, _>("jion", &diamond.left, &"alice".to_string())
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "application \"shop\" has no stage \"jion\" (did you mean \"join\"?); its stages: enrich, score, join"
    );
    let error = driver.metrics("payments", 0).unwrap_err();
    assert_eq!(
        error.to_string(),
        "application \"shop\" has no stage \"payments\"; its stages: enrich, score, join"
    );
    // The same check guards every call that names a stage.
    assert!(matches!(
        driver.fail_next_commit("scroe", 0),
        Err(DriverError::UnknownStage { suggestion: Some(name), .. }) if name == "score"
    ));
    assert!(matches!(
        driver.restart_task("enrichh", 0),
        Err(DriverError::UnknownStage { .. })
    ));
    assert!(matches!(
        driver.tick_slot::<i64>("jon", 0),
        Err(DriverError::UnknownStage { .. })
    ));
}

#[test]
fn a_missing_task_says_how_many_tasks_the_stage_has() {
    let diamond = diamond();
    let driver = TestDriver::builder(&diamond.app)
        .default_partitions(2)
        .build()
        .unwrap();
    let error = driver.tick_slot::<i64>("join", 2).unwrap_err();
    assert_eq!(
        error.to_string(),
        "stage \"join\" has no task 2: it has 2 task(s), numbered from 0"
    );
}

#[test]
fn an_unknown_output_topic_names_the_application_and_its_sinks() {
    let diamond = diamond();
    let driver = TestDriver::new(&diamond.app).unwrap();
    let nope: Topic<String, i64> = Topic::with_codecs("nope", Utf8, I64);
    let error = driver.output(&nope).err().expect("nope is refused");
    assert_eq!(
        error.to_string(),
        "topic \"nope\" is not a topic of application \"shop\"; its sinks: left, right, joined"
    );
    // Sources and Parsley's own topics can be read too.
    assert!(driver.output(&diamond.events).is_ok());
    let ticks: Topic<String, String> = Topic::with_codecs("shop-join-ticks", Utf8, Utf8);
    assert!(driver.output(&ticks).is_ok());
}

#[test]
fn c1_a_handle_whose_codecs_differ_from_the_declaration_is_refused() {
    let diamond = diamond();
    let driver = TestDriver::new(&diamond.app).unwrap();
    // The app declares `events` as <String, i64> in UTF-8 and Kafka's long.
    let as_text: Topic<String, String> = Topic::with_codecs("events", Utf8, Utf8);
    let error = driver.input(&as_text).err().expect("refused at input()");
    let DriverError::CodecMismatch {
        call,
        topic,
        declared,
        given,
        ..
    } = &error
    else {
        panic!("expected a codec mismatch, got {error}");
    };
    assert_eq!((*call, topic.as_str()), ("input", "events"));
    assert!(
        declared.contains("i64") && declared.contains("I64"),
        "{declared}"
    );
    assert!(given.contains("Utf8") && !given.contains("I64"), "{given}");
    assert!(
        error
            .to_string()
            .starts_with("input: topic \"events\" is declared by application \"shop\" with key "),
        "{error}"
    );
    // Same types, other codec (JSON instead of Kafka's long): still refused.
    let as_json: Topic<String, i64> = Topic::new("joined");
    assert!(matches!(
        driver.output(&as_json),
        Err(DriverError::CodecMismatch { call: "output", .. })
    ));
    // Raw bytes bypass the codecs on purpose, for sources only.
    let raw = driver.input_raw("events").unwrap();
    raw.pipe(
        Some(bytes::Bytes::from_static(b"alice")),
        bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 4]),
    )
    .unwrap();
    assert!(matches!(
        driver.input_raw("joined"),
        Err(DriverError::NotASource { .. })
    ));
    // The declared handles are accepted, and nothing stopped.
    driver.input(&diamond.events).unwrap();
    let joined = driver
        .output(&diamond.joined)
        .unwrap()
        .read_values()
        .unwrap();
    assert_eq!(joined.last(), Some(&9), "the raw long 4, doubled, plus one");
    assert!(driver.stopped_tasks().is_empty());
}

/// X5: the step that stops a task returns its error once; later steps say
/// the task is stopped (and which), instead of repeating the old error.
#[test]
fn x5_a_stop_is_reported_once_and_later_pipes_say_the_task_is_stopped() {
    let diamond = diamond();
    let driver = TestDriver::new(&diamond.app).unwrap();
    let events = driver.input(&diamond.events).unwrap();
    events.pipe("alice".to_string(), 1).unwrap();
    let stop = events.pipe("alice".to_string(), -5).unwrap_err();
    assert!(
        matches!(&stop, DriverError::Task(error) if error.task().to_string() == "score/0"),
        "{stop}"
    );
    let later = events.pipe("bob".to_string(), 2).unwrap_err();
    assert_eq!(
        later.to_string(),
        format!(
            "score/0 stopped earlier and process(es) nothing until restarted (`restart_task`, `restart`); the first stopped with: {}",
            driver.stopped_tasks()[0]
        )
    );
    // The other branch kept going: bob's event went through enrich and join.
    let bob = driver
        .key_slot::<i64, _, _>("join", &diamond.left, &"bob".to_string())
        .unwrap();
    assert_eq!(bob, Some(4));
    // score wrote nothing for the bad event or after it.
    let right = driver
        .output(&diamond.right)
        .unwrap()
        .read_values()
        .unwrap();
    assert_eq!(right, [1]);
    // Restarted, the task meets the same record and stops again: a new stop,
    // returned once more as the task's own error.
    let again = driver.restart_task("score", 0).unwrap_err();
    assert!(
        matches!(&again, DriverError::Task(error) if error.task().to_string() == "score/0"),
        "{again}"
    );
    assert_eq!(driver.stopped_tasks().len(), 1);
    assert!(matches!(
        events.pipe("carol".to_string(), 3),
        Err(DriverError::TaskStopped { .. })
    ));
}

#[test]
fn the_driver_and_its_handles_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let diamond = diamond();
    let driver = TestDriver::new(&diamond.app).unwrap();
    let events = driver.input(&diamond.events).unwrap();
    let joined = driver.output(&diamond.joined).unwrap();
    assert_send(&driver);
    assert_send(&events);
    assert_send(&joined);
    // A test may drive it from another thread.
    let values = std::thread::spawn(move || {
        events.pipe("alice".to_string(), 3).unwrap();
        joined.read_values().unwrap()
    })
    .join()
    .unwrap();
    // Both branches reached join; the last total holds both.
    assert_eq!(values.len(), 2);
    assert_eq!(values.last(), Some(&7));
    assert_eq!(driver.metric("join", "records-delivered-total").unwrap(), 2);
    assert!(matches!(
        driver.metric("join", "records-delivred-total"),
        Err(DriverError::UnknownMetric { .. })
    ));
}

/// `read_new` reads on from where it stopped: each output is returned once,
/// in write order across partitions, however often it is called.
#[test]
fn read_new_returns_each_committed_output_once_in_write_order() {
    let diamond = diamond();
    let driver = TestDriver::builder(&diamond.app)
        .default_partitions(3)
        .build()
        .unwrap();
    let events = driver.input(&diamond.events).unwrap();
    let left = driver.output(&diamond.left).unwrap();
    let mut seen = Vec::new();
    for (index, key) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        events.pipe(key.to_string(), index as i64).unwrap();
        let fresh = left.read_new().unwrap();
        assert_eq!(fresh.len(), 1, "one new output per event");
        seen.extend(fresh.into_iter().map(|record| record.value));
        assert!(left.read_new().unwrap().is_empty(), "nothing is read twice");
    }
    assert_eq!(seen, [0, 2, 4, 6, 8, 10]);
    assert_eq!(
        left.read_values().unwrap().len(),
        6,
        "read_all still sees all"
    );
}

/// A thread that still holds the view from `cluster()` and calls the driver
/// again would wait for itself forever; it is told instead. Once the view is
/// dropped the driver goes on, and another thread simply waits for it.
#[test]
fn a_call_while_this_thread_holds_the_cluster_view_panics_instead_of_hanging() {
    let diamond = diamond();
    let driver = TestDriver::new(&diamond.app).unwrap();
    let events = driver.input(&diamond.events).unwrap();
    let held = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let view = driver.cluster();
        let _ = events.pipe("alice".to_string(), 1);
        drop(view);
    }));
    let message = held.expect_err("the call panics");
    let message = message
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| message.downcast_ref::<String>().map(String::as_str))
        .unwrap_or_default();
    assert!(
        message.contains("still holds the view returned by TestDriver::cluster()"),
        "{message}"
    );
    events.pipe("alice".to_string(), 1).unwrap();
    let view = driver.cluster();
    let other = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| driver.wall_clock());
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(view);
        waiting.join().unwrap()
    });
    assert_eq!(other, 0);
}
