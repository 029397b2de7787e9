//! S1, S2, S3, S5 (and T2): state slots, where emissions may go, the changelog.

use bytes::Bytes;

use super::fixtures::*;
use crate::emission::{Record, Tick};
use crate::record::RecordData;
use crate::stage::{SlotKey, Stage};
use crate::stamp::Stamp;
use crate::task::{Task, TaskError};
use crate::topic::Topic;

// ----- S1, S2: state slots -----

/// S1, S2: a stateful stage folds each record into its key's slot; the null
/// key has its own slot; unseen slots read as the initial value; a step with
/// no state deletes the slot, which then reads as the initial value again.
#[test]
fn s1_s2_fold_per_key_with_a_null_slot_and_deletion() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    let (a, b, null) = (key_slot("a"), key_slot("b"), SlotKey::Null);
    let slots = |task: &Task| (slot(task, &a), slot(task, &b), slot(task, &null));

    assert!(task.slots::<String>().is_none());
    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("a").value(1),
            rec(1).key("b").value(5),
            rec(2).value(7),
            rec(3).key("a").value(2),
            rec(4).value(1),
            rec(5).key("a").value(0),
            rec(6).key("a").value(4),
        ],
        7,
    );
    let mut step = || emitted(&deliver(&mut task, &o));

    assert_eq!(step(), ["101"]);
    assert_eq!(step(), ["105"]);
    assert_eq!(step(), ["107"]);
    assert_eq!(step(), ["103"]);
    assert_eq!(step(), ["108"]);
    assert_eq!(slots(&task), (Some(103), Some(105), Some(108)));

    assert_eq!(emitted(&deliver(&mut task, &o)), Vec::<String>::new());
    assert_eq!(slots(&task), (None, Some(105), Some(108)));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["104"]);
    assert_eq!(slots(&task), (Some(104), Some(105), Some(108)));
    assert_eq!(slot(&task, &SlotKey::Tick), None);

    commit(&mut task, T0 + 100);
    let committed = task.slots::<i64>().unwrap();
    assert_eq!(committed.committed(&a), Some(&104));
    assert_eq!(committed.committed(&null), Some(&108));
}

// ----- S3, T2: where emissions may go -----

/// S3: an emission to a topic the stage does not declare with `into` is an
/// error naming stage and topic; the record is not delivered.
#[test]
fn s3_emission_to_an_undeclared_topic_is_an_error() {
    let audits: Topic<String, String> = Topic::new("audits");
    let stage = Stage::named("s")
        .on(&orders(), move |_: &Record<String, i64>| {
            vec![audits.send(None, "x")]
        })
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    feed(&mut task, &o, vec![rec(0)], 1);
    let error = task.delivered(&o).unwrap_err();
    assert_eq!(
        error,
        TaskError::UndeclaredSink {
            task: id(0),
            topic: "audits".to_string(),
            tp: o.clone(),
            offset: 0,
        }
    );
    assert!(
        error
            .to_string()
            .starts_with("S3 (docs/RULES.md#s3): stage \"s\" emitted to topic \"audits\""),
        "{error}"
    );
    assert_eq!(task.position(&o), Some(0));
    assert_eq!(task.history(), &Stamp::empty());
    assert!(!task.has_open_work());
}

/// T2: no logic may emit to a tick topic, even one it can name as a topic
/// without declaring it as a sink: from a record handler or a tick handler.
#[test]
fn t2_emission_to_a_tick_topic_is_an_error() {
    let tick_topic: Topic<String, String> = Topic::new(TICKS);
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));

    // From a record handler.
    let sneaky = tick_topic.clone();
    let stage = Stage::named("s")
        .on(&orders(), move |_: &Record<String, i64>| {
            vec![sneaky.send(None, "x")]
        })
        .ticks(interval(), |_: &Tick| Vec::new())
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    feed(&mut task, &o, vec![rec(0)], 1);
    let error = task.delivered(&o).unwrap_err();
    assert_eq!(
        error,
        TaskError::EmitToTickTopic {
            task: id(0),
            topic: TICKS.to_string(),
            tp: o.clone(),
            offset: 0,
        }
    );
    assert!(
        error.to_string().starts_with(
            "T2 (docs/RULES.md#t2): stage \"s\" emitted to tick topic \"app-s-ticks\""
        ),
        "{error}"
    );
    assert_eq!(task.position(&o), Some(0));

    // From a tick handler.
    let sneaky = tick_topic.clone();
    let stage = Stage::named("s")
        .on(&orders(), |_: &Record<String, i64>| Vec::new())
        .ticks(interval(), move |_: &Tick| vec![sneaky.send(None, "x")])
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let tick = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    task.handle_committed(T0 + INTERVAL_MS);
    feed(&mut task, &k, vec![back(0, &tick)], 2);
    assert_eq!(
        task.delivered(&k).unwrap_err(),
        TaskError::EmitToTickTopic {
            task: id(0),
            topic: TICKS.to_string(),
            tp: k.clone(),
            offset: 0,
        }
    );
    assert_eq!(task.position(&k), Some(0));
}

// ----- S5: changelog -----

/// S5: a transaction's state changes are changelog records on the stage's
/// changelog, at the task's partition, keyed by slot (a tombstone for a
/// deletion), written by its commit: one per slot it changed, with the
/// slot's value at the commit, in the order the slots first changed.
/// Restoring those records before start restores the slots.
#[test]
fn s5_a_transactions_changes_go_to_the_changelog_at_its_commit_and_restore_the_slots() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.started(1);
    let o = tp(ORDERS, 1);
    assert_eq!(task.changelog_tp(), Some(&tp(CHANGELOG, 1)));
    let (a, b, c, null) = (key_slot("a"), key_slot("b"), key_slot("c"), SlotKey::Null);

    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("a").value(1),
            rec(1).key("b").value(5),
            rec(2).value(7),
            rec(3).key("c").value(3),
            rec(4).key("a").value(2),
            rec(5).key("b").value(0),
        ],
        6,
    );
    for _ in 0..6 {
        let sent = deliver(&mut task, &o);
        assert!(
            sent.iter()
                .all(|record| record.tp.topic.as_str() != CHANGELOG),
            "a delivery's changes wait for the commit: {sent:?}"
        );
    }
    let changes = commit(&mut task, T0 + 10);
    assert_eq!(
        changes,
        [
            changelog_record(1, &a, Some(103), T0 + 4),
            changelog_record(1, &b, None, T0 + 5),
            changelog_record(1, &null, Some(107), T0 + 2),
            changelog_record(1, &c, Some(103), T0 + 3),
        ]
    );
    assert_eq!(null.changelog_key(), Bytes::from_static(&[0]));
    assert_eq!(a.changelog_key(), Bytes::from_static(b"\x01\"a\""));

    // A new instance restores from the changelog before it starts.
    let mut task = f.task(1);
    for (offset, change) in changes.iter().enumerate() {
        task.restore_state(offset as u64, &change.data).unwrap();
    }
    task.start(&[None], T0).unwrap();
    assert_eq!(
        (
            slot(&task, &a),
            slot(&task, &b),
            slot(&task, &c),
            slot(&task, &null)
        ),
        (Some(103), None, Some(103), Some(107))
    );
    feed(&mut task, &o, vec![rec(6).key("a").value(1)], 7);
    assert_eq!(emitted(&deliver(&mut task, &o)), ["104"]);
}

/// S5, §8: a changelog record whose key names no slot is refused.
#[test]
fn s5_bad_changelog_record_is_refused() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.task(0);
    let error = task
        .restore_state(
            4,
            &RecordData {
                key: Some(Bytes::from_static(&[7])),
                value: Some(json(&1i64)),
                headers: Vec::new(),
                timestamp: T0,
            },
        )
        .unwrap_err();
    assert!(
        matches!(&error, TaskError::BadChangelog { task, tp, offset: 4, .. } if task == &id(0) && tp == &self::tp(CHANGELOG, 0)),
        "{error:?}"
    );
}

/// S5, X3: an aborted transaction's changes are never written: the next
/// commit writes only its own.
#[test]
fn s5_an_aborted_transactions_changes_are_never_written() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(&mut task, &o, vec![rec(0).key("a").value(1)], 1);
    deliver(&mut task, &o);
    let _ = task.handle_aborted();
    assert_eq!(commit(&mut task, T0 + 10), []);

    feed(&mut task, &o, vec![rec(0).key("a").value(1)], 1);
    deliver(&mut task, &o);
    assert_eq!(
        commit(&mut task, T0 + 20),
        [changelog_record(0, &key_slot("a"), Some(101), T0)]
    );
}

// ----- Q1: what a query answers -----

/// Q1: a query answers a slot's committed state, never the open
/// transaction's change of it; the task lists its open changes (what its
/// commit writes) and forgets them at the commit.
#[test]
fn q1_a_query_answers_committed_state_not_the_open_transaction() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("a").value(1),
            rec(1).key("a").value(5),
            rec(2).key("b").value(0),
        ],
        3,
    );
    let mut store = std::collections::BTreeMap::new();
    let ask = |store: &std::collections::BTreeMap<Bytes, Bytes>, task: &Task, key: &str| {
        let beside = crate::StoreBeside { store, task };
        crate::answer_query(crate::QueryStanding::Serving(&beside), &json(key))
            .expect("a serving task answers")
            .map(|value| serde_json::from_slice::<i64>(&value).expect("an i64"))
    };
    deliver(&mut task, &o);
    assert_eq!(
        task.open_changes()
            .map(|(slot, value)| (slot.clone(), value.cloned()))
            .collect::<Vec<_>>(),
        vec![(key_slot("a"), Some(json(&101i64)))]
    );
    assert_eq!(ask(&store, &task, "a"), None, "nothing committed yet");
    for record in commit(&mut task, T0 + 100) {
        let key = record.data.key.expect("a changelog key");
        match record.data.value {
            Some(value) => store.insert(key, value),
            None => store.remove(&key),
        };
    }
    assert_eq!(task.open_changes().count(), 0);
    assert_eq!(ask(&store, &task, "a"), Some(101));
    deliver(&mut task, &o);
    deliver(&mut task, &o);
    assert_eq!(slot(&task, &key_slot("a")), Some(106));
    assert_eq!(task.open_changes().count(), 2);
    assert_eq!(
        ask(&store, &task, "a"),
        Some(101),
        "the open 106 is not committed"
    );
    assert_eq!(ask(&store, &task, "b"), None);
    let _ = task.handle_aborted();
    assert_eq!(task.open_changes().count(), 0);
    assert_eq!(ask(&store, &task, "a"), Some(101));
}
