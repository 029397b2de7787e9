//! K2 and R2 at the task: the timer service's requests, fires and restarts,
//! and the re-key stage's stamps, as a driver sees them. (The services'
//! pure logic has its own tests beside it, in `timer` and `rekey`; these
//! go through the task, where a fire is stamped and state is restored.)

use super::fixtures::*;
use crate::app::Parsley;
use crate::assembly::assemble;
use crate::codec::Json;
use crate::record::ProducedRecord;
use crate::Stage;

/// A timer service named `s`: requests on `orders` (the value is the due
/// time), fires on `payments`, one tick per [`INTERVAL_MS`].
fn timers() -> Fixture {
    fixture(
        Stage::named("s")
            .timer_service(&orders(), &payments())
            .resolution(interval())
            .build(),
    )
}

/// The fires among `produced`: (key, due time, the stamp's claim on the
/// request's tp).
fn fires(produced: &[ProducedRecord]) -> Vec<(String, i64, Option<u64>)> {
    let request_tp = tp(ORDERS, 0);
    produced
        .iter()
        .filter(|record| record.tp.topic.as_str() == PAYMENTS)
        .map(|record| {
            let key = serde_json::from_slice(record.data.key.as_ref().expect("a key"))
                .expect("a JSON string key");
            let due = serde_json::from_slice(record.data.value.as_ref().expect("a value"))
                .expect("a JSON due time");
            (key, due, stamp_of(record).offset(&request_tp))
        })
        .collect()
}

/// Ticks the task at `now` and delivers the tick back (T5): what the tick's
/// delivery produced.
fn tick_and_deliver(
    task: &mut crate::task::Task,
    now: i64,
    tick_offset: u64,
) -> Vec<ProducedRecord> {
    let tick = task.tick(now).expect("a tick is due");
    let k = task.tick_tp().expect("the service ticks").clone();
    feed(task, &k, vec![back(tick_offset, &tick)], tick_offset + 1);
    deliver(task, &k)
}

/// K2, several requests for one key and for one time: every request is
/// held (odd due times as well as even ones), the first tick at or past
/// their time fires each once, earliest first within a key, and each fire
/// is stamped with a claim on its request.
#[test]
fn k2_every_request_for_one_key_and_one_time_fires_once_claiming_its_request() {
    let f = timers();
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("a").value(T0 + 301).at(T0),
            rec(1).key("a").value(T0 + 301).at(T0),
            rec(2).key("a").value(T0 + 200).at(T0),
            rec(3).key("b").value(T0 + 301).at(T0),
            rec(4).key("b").value(T0 + 2_500).at(T0),
        ],
        5,
    );
    for _ in 0..5 {
        deliver(&mut task, &o);
    }
    let mut fired = fires(&tick_and_deliver(&mut task, T0 + INTERVAL_MS, 0));
    fired.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
    assert_eq!(
        fired,
        [
            ("a".to_string(), T0 + 200, Some(4)),
            ("a".to_string(), T0 + 301, Some(4)),
            ("a".to_string(), T0 + 301, Some(4)),
            ("b".to_string(), T0 + 301, Some(4)),
        ],
        "each due request fires once, claiming the requests delivered before it"
    );
    assert!(
        fires(&tick_and_deliver(&mut task, T0 + 2 * INTERVAL_MS, 1)).is_empty(),
        "nothing fires twice, and b's later request is not due yet"
    );
    assert_eq!(
        fires(&tick_and_deliver(&mut task, T0 + 3 * INTERVAL_MS, 2)),
        [("b".to_string(), T0 + 2_500, Some(4))]
    );
}

/// K2 across a restart: a task started on restored state in which a timer
/// is already overdue fires it at its first tick (it did not fire before
/// the restart: nothing committed a fire).
#[test]
fn k2_a_timer_overdue_when_its_task_restarts_fires_at_the_first_tick() {
    let f = timers();
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![rec(0).key("a").value(T0 + 500).at(T0)],
        1,
    );
    deliver(&mut task, &o);
    let changes = commit(&mut task, T0);
    assert_eq!(changes.len(), 1, "the request is in the changelog");

    // The instance dies before any tick; a new one restores the timer and
    // starts when it is long overdue.
    let mut task = f.task(0);
    for (offset, change) in changes.iter().enumerate() {
        task.restore_state(offset as u64, &change.data).unwrap();
    }
    let nothing = vec![None; task.consumed_tps().len()];
    task.start(&nothing, T0 + 10 * INTERVAL_MS).unwrap();
    assert_eq!(
        fires(&tick_and_deliver(&mut task, T0 + 11 * INTERVAL_MS, 0)),
        [("a".to_string(), T0 + 500, None)],
        "the overdue timer fires at the first tick after the restart"
    );
}

/// R2: a re-keyed record claims the record it came from (and, through the
/// task's history, that record's causes).
#[test]
fn r2_a_rekeyed_record_claims_its_source_record() {
    let (rekey, _) = Stage::named("s").rekey(&orders(), Json, |order| {
        format!(
            "{}-{}",
            order.key().cloned().unwrap_or_default(),
            order.value()
        )
    });
    let app = Parsley::named("app")
        .stage(rekey)
        .build()
        .expect("the re-key app composes");
    let metadata: std::collections::BTreeMap<String, u32> = [(ORDERS, 2), ("app-s-repartition", 2)]
        .into_iter()
        .map(|(topic, partitions)| (topic.to_string(), partitions))
        .collect();
    let assembly = assemble(&app, &metadata).expect("every topic exists");
    let f = Fixture { app, assembly };
    let mut task = f.started(1);
    let o = tp(ORDERS, 1);
    feed(
        &mut task,
        &o,
        vec![rec(0).key("k").value(3).stamp(&[(PAYMENTS, 0, 7)])],
        1,
    );
    let produced = deliver(&mut task, &o);
    assert_eq!(produced.len(), 1, "{produced:?}");
    assert_eq!(produced[0].tp.topic.as_str(), "app-s-repartition");
    assert_eq!(
        stamp_of(&produced[0]),
        stamp(&[(ORDERS, 1, 0), (PAYMENTS, 0, 7)])
    );
}

/// An app of the echo stage (orders → out, with `ticks` a tick handler
/// too) with its output re-keyed within it (R3) by `select`, assembled
/// over 2-partition topics.
fn echo_rekeyed_with<R: crate::stage::Fallible<String> + 'static>(
    ticks: bool,
    select: impl Fn(Option<&String>, &String) -> R + Send + Sync + 'static,
) -> Fixture {
    let repartition = out().repartition("by-value", crate::codec::Utf8);
    let stage = echo_builder(&[orders()], ticks)
        .rekey_output(&out(), &repartition, select)
        .build();
    let app = Parsley::named("app")
        .stage(stage)
        .build()
        .expect("the re-keyed app composes");
    assert_eq!(repartition.name().as_str(), "app-by-value-repartition");
    let metadata: std::collections::BTreeMap<String, u32> = [
        (ORDERS, 2),
        (OUT, 3),
        (TICKS, 2),
        ("app-by-value-repartition", 2),
    ]
    .into_iter()
    .map(|(topic, partitions)| (topic.to_string(), partitions))
    .collect();
    let assembly = assemble(&app, &metadata).expect("every topic exists");
    Fixture { app, assembly }
}

fn echo_rekeyed<R: crate::stage::Fallible<String> + 'static>(
    select: impl Fn(Option<&String>, &String) -> R + Send + Sync + 'static,
) -> Fixture {
    echo_rekeyed_with(false, select)
}

/// R3 on a tick: what a stage emits on a tick to its re-keyed output is
/// copied as what it emits on a record is, with the tick's stamp.
#[test]
fn r3_a_rekeyed_output_written_on_a_tick_is_copied_too() {
    let f = echo_rekeyed_with(true, |_, value: &String| value.to_uppercase());
    let mut task = f.started(0);
    let produced = tick_and_deliver(&mut task, T0 + INTERVAL_MS, 0);
    let written: Vec<_> = produced
        .iter()
        .filter(|r| r.tp.topic.as_str() == OUT)
        .collect();
    let copies: Vec<_> = produced
        .iter()
        .filter(|r| r.tp.topic.as_str() == "app-by-value-repartition")
        .collect();
    assert_eq!((written.len(), copies.len()), (1, 1), "{produced:?}");
    let note = format!("tick@{}", T0 + INTERVAL_MS);
    assert_eq!(written[0].data.value.as_ref(), Some(&json(&note)));
    assert_eq!(copies[0].data.value, written[0].data.value);
    assert_eq!(
        copies[0].data.key.as_deref(),
        Some(note.to_uppercase().as_bytes())
    );
    assert_eq!(copies[0].data.timestamp, written[0].data.timestamp);
    assert_eq!(stamp_of(copies[0]), stamp_of(written[0]));
    assert!(
        stamp_of(copies[0]).offset(task.tick_tp().unwrap()) == Some(0),
        "the copy claims the tick it was written on"
    );
}

/// R3: a stage writes each record of its re-keyed output again, in the
/// same step, under the selected key, with the record's value bytes,
/// timestamp and stamp: the copy claims what the stage delivered and its
/// causes.
#[test]
fn r3_a_rekeyed_output_is_written_again_in_the_same_step_with_its_stamp() {
    let f =
        echo_rekeyed(|key, value: &String| format!("{}/{value}", key.cloned().unwrap_or_default()));
    let mut task = f.started(1);
    let o = tp(ORDERS, 1);
    feed(
        &mut task,
        &o,
        vec![rec(0)
            .key("k")
            .value(3)
            .at(T0 + 5)
            .stamp(&[(PAYMENTS, 0, 7)])],
        1,
    );
    let produced = deliver(&mut task, &o);
    assert_eq!(produced.len(), 2, "{produced:?}");
    let (written, copy) = (&produced[0], &produced[1]);
    assert_eq!(written.tp.topic.as_str(), OUT);
    assert_eq!(copy.tp.topic.as_str(), "app-by-value-repartition");
    let value = json(&format!("{ORDERS}@0"));
    assert_eq!(written.data.value.as_ref(), Some(&value));
    assert_eq!(
        copy.data.value.as_ref(),
        Some(&value),
        "the value's bytes, unchanged"
    );
    assert_eq!(
        copy.data.key.as_deref(),
        Some(format!("k/{ORDERS}@0").as_bytes()),
        "the key the function selects, in the key codec given"
    );
    assert_eq!(copy.data.timestamp, T0 + 5);
    assert_eq!(copy.data.timestamp, written.data.timestamp);
    let expected = stamp(&[(ORDERS, 1, 0), (PAYMENTS, 0, 7)]);
    assert_eq!(stamp_of(written), expected);
    assert_eq!(
        stamp_of(copy),
        expected,
        "the copy claims the delivery and its causes"
    );
}

/// R3 with X5: a key function that fails refuses the delivery; the task
/// stops naming the stage and the record, and writes nothing of it.
#[test]
fn r3_a_failing_key_function_stops_the_task_naming_the_record() {
    let f = echo_rekeyed(|_, value: &String| match value.ends_with("@1") {
        true => Err(format!("no key for {value}")),
        false => Ok(value.clone()),
    });
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![rec(0).key("a").value(1), rec(1).key("b").value(2)],
        2,
    );
    assert_eq!(deliver(&mut task, &o).len(), 2);
    let ready = task.ready().expect("no poison head");
    assert!(ready.contains(&o));
    let error = task.delivered(&o).expect_err("the key function refuses it");
    let text = error.to_string();
    assert!(
        text.contains("no key for") && text.contains(&format!("{o}")),
        "{text}"
    );
}

/// R3: a re-key of a topic the stage does not write is refused at build,
/// naming the rule.
#[test]
fn r3_a_rekey_of_a_topic_the_stage_does_not_write_fails_at_build() {
    let stage = echo_builder(&[orders()], false)
        .rekey_output(
            &payments(),
            &payments().repartition("r", crate::codec::Utf8),
            |key, _: &i64| key.cloned().unwrap_or_default(),
        )
        .build();
    let error = Parsley::named("app")
        .stage(stage)
        .build()
        .expect_err("payments is not an output of s");
    assert!(error.to_string().starts_with("R3 "), "{error}");
}

/// R2: the re-keyed record carries its source record's value bytes as they
/// are, not the value decoded and encoded again.
#[test]
fn r2_a_rekeyed_record_keeps_its_source_value_bytes() {
    let (rekey, _) = Stage::named("s").rekey(&orders(), Json, |order| order.value().to_string());
    let app = Parsley::named("app")
        .stage(rekey)
        .build()
        .expect("the re-key app composes");
    let metadata: std::collections::BTreeMap<String, u32> = [(ORDERS, 2), ("app-s-repartition", 2)]
        .into_iter()
        .map(|(topic, partitions)| (topic.to_string(), partitions))
        .collect();
    let assembly = assemble(&app, &metadata).expect("every topic exists");
    let f = Fixture { app, assembly };
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![rec(0).key("k").raw_value(Some(b" 3 "))],
        1,
    );
    let produced = deliver(&mut task, &o);
    assert_eq!(produced[0].data.value.as_deref(), Some(&b" 3 "[..]));
    assert_eq!(produced[0].data.key.as_deref(), Some(&b"\"3\""[..]));
}
