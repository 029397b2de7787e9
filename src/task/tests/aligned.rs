//! V3–V5: a task on a path to a consistent view delivers closed epochs in
//! epoch order, commits only between epochs, and, as the view, releases
//! the last output per key at each commit with its cut.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use super::fixtures::*;
use crate::app::{App, Parsley};
use crate::assembly::{assemble, Assembly};
use crate::header::{cut_of, EPOCH_HEADER, PROGRESS_HEADER};
use crate::record::Header;
use crate::stage::Stage;
use crate::task::{Task, TaskConfig, TaskError};
use crate::tp::Tp;

const EPOCH_MS: i64 = 1_000;

fn epoch_of(timestamp: i64) -> i64 {
    timestamp.div_euclid(EPOCH_MS)
}

fn view(stage: Stage) -> Stage {
    stage.consistent(Duration::from_millis(EPOCH_MS as u64))
}

/// A started task of `stage`, a view.
fn started(stage: Stage) -> Task {
    fixture(view(stage)).started(0)
}

/// `stage` (named `s`, writing `out`) on the path to a view `v` of
/// `out`: a view's inputs must share a source (V2), a stage on its path
/// may read unrelated ones.
fn upstream_of_a_view(stage: Stage) -> (App, Assembly) {
    let v = view(
        Stage::named("v")
            .on(&out(), |_record: &crate::Record<String, String>| Vec::new())
            .build(),
    );
    let app = Parsley::named("app")
        .stage(stage)
        .stage(v)
        .build()
        .expect("composes");
    let metadata: BTreeMap<String, u32> = [(ORDERS, 2), (PAYMENTS, 2), (OUT, 3)]
        .into_iter()
        .map(|(topic, partitions)| (topic.to_string(), partitions))
        .collect();
    let assembly = assemble(&app, &metadata).expect("assembles");
    (app, assembly)
}

/// A task of `s` in [`upstream_of_a_view`], started from `committed`.
fn upstream_task(stage: Stage, committed: &[Option<crate::task::CommittedOffset>]) -> Task {
    let (app, assembly) = upstream_of_a_view(stage);
    let mut task = Task::new(&app, &assembly, "s", 0, TaskConfig::default()).unwrap();
    task.start(committed, T0).expect("starts");
    task
}

/// V4: a view over two sources delivers an epoch only once both have
/// closed it (each fetched a record of a later epoch), lowest epoch
/// first, whatever the lanes' order; an open epoch waits.
#[test]
fn v4_a_view_delivers_only_closed_epochs_in_epoch_order() {
    let mut task = upstream_task(echo(&[orders(), payments()], false), &[None, None]);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    feed(
        &mut task,
        &o,
        vec![rec(0).at(T0 + 100), rec(1).at(T0 + 1_500)],
        2,
    );
    feed(&mut task, &p, vec![rec(0).at(T0 + 200)], 1);
    // Payments may still bring more of the first epoch.
    assert_eq!(task.ready().unwrap(), Vec::<Tp>::new());
    feed(&mut task, &p, vec![rec(1).at(T0 + 2_100)], 2);
    assert_eq!(task.ready().unwrap(), [o.clone(), p.clone()]);
    deliver(&mut task, &p);
    deliver(&mut task, &o);
    // The second epoch is closed on payments but not on orders.
    assert_eq!(task.ready().unwrap(), Vec::<Tp>::new());
    assert_eq!(task.frontier(), epoch_of(T0 + 1_500));
}

/// V5: the view holds its outputs within an epoch and, at the commit that
/// ends it, writes the last of each key, with the cut in its header.
#[test]
fn v5_a_view_releases_the_last_output_per_key_at_the_epochs_end() {
    let mut task = started(counter().into(&out()).build());
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("a").value(1).at(T0 + 10),
            rec(1).key("a").value(2).at(T0 + 20),
            rec(2).key("b").value(5).at(T0 + 30),
            rec(3).key("a").value(4).at(T0 + 40),
            rec(4).key("a").value(1).at(T0 + 1_010),
        ],
        5,
    );
    for _ in 0..4 {
        assert!(
            deliver(&mut task, &o).is_empty(),
            "held until the epoch ends"
        );
    }
    assert!(task.may_commit());
    let written = commit(&mut task, T0);
    // Values are the sums (from 100): a's last, then b's, in the order each
    // key was first held.
    assert_eq!(emitted(&written), ["107", "105"]);
    for output in written
        .iter()
        .filter(|record| record.tp.topic.as_str() == OUT)
    {
        assert_eq!(cut_of(&output.data), Some(epoch_of(T0 + 1_010)));
    }
}

/// V5: within an epoch the task may not commit, and does not say it
/// wants to; at its end it does, and stops delivering until it has.
#[test]
fn v5_a_region_task_commits_only_between_epochs() {
    let mut task = started(echo(&[orders()], false));
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![
            rec(0).at(T0 + 10),
            rec(1).at(T0 + 20),
            rec(2).at(T0 + 1_010),
            rec(3).at(T0 + 2_010),
        ],
        4,
    );
    let mut produced = Vec::new();
    task.deliver(&o, &mut produced).unwrap();
    let due = T0 + 1_000;
    assert!(!task.may_commit(), "half of the first epoch is delivered");
    assert!(!task.wants_commit(due));
    task.deliver(&o, &mut produced).unwrap();
    assert!(task.may_commit() && task.wants_commit(due));
    let mut ready = Vec::new();
    task.deliverable(due, &mut ready).unwrap();
    assert!(ready.is_empty(), "the commit comes before the next epoch");
    // The view's output comes at the commit (the last of its key, null),
    // with its delivery's epoch and this task as writer, and the cut above
    // that epoch.
    assert!(produced.is_empty(), "a view holds its outputs");
    let released = commit(&mut task, due);
    assert_eq!(emitted(&released), ["orders@1"]);
    for record in released
        .iter()
        .filter(|record| record.tp.topic.as_str() == OUT)
    {
        let header = record.data.header(EPOCH_HEADER).expect("an epoch header");
        assert_eq!(header.as_ref(), format!("{} 0 s", epoch_of(T0)).as_bytes());
        assert_eq!(cut_of(&record.data), Some(epoch_of(T0) + 1));
    }
}

/// V5, X1: the commit's checkpoint keeps where each source's epochs stood
/// at its position: after a restart, a re-read record takes the epoch the
/// first read gave it, not one raised by records read after it.
#[test]
fn v5_a_restart_goes_on_with_the_epochs_at_the_committed_position() {
    let stage = || echo(&[orders(), payments()], false);
    let mut task = upstream_task(stage(), &[None, None]);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    let orders_log = || {
        vec![
            rec(0).at(T0 + 500),
            rec(1).at(T0 + 1_500),
            rec(2).at(T0 + 2_500),
        ]
    };
    feed(&mut task, &o, orders_log(), 3);
    feed(&mut task, &p, vec![rec(0).at(T0 + 1_200)], 1);
    deliver(&mut task, &o);
    assert_eq!(task.ready().unwrap(), Vec::<Tp>::new());
    let (request, _) = task.committing_changes().unwrap();
    task.handle_committed(T0);
    assert_eq!(request.offsets, [(o.clone(), 1), (p.clone(), 0)]);

    let mut task = upstream_task(stage(), &committed_offsets(&request));
    feed(&mut task, &o, orders_log().split_off(1), 3);
    feed(
        &mut task,
        &p,
        vec![rec(0).at(T0 + 1_200), rec(1).at(T0 + 2_600)],
        2,
    );
    // orders@1 is of the second epoch again: delivered with payments@0.
    assert_eq!(task.ready().unwrap(), [o.clone(), p.clone()]);
}

/// The application of the derived-lane tests: `up` copies orders to
/// `out`, and the view `s` reads `out` (written by up's two tasks).
fn two_stages() -> (App, Assembly) {
    let sink = out();
    let up = Stage::named("up")
        .on(&orders(), move |record: &crate::Record<String, i64>| {
            vec![sink.send(record.key.clone(), record.value.to_string())]
        })
        .into(&out())
        .build();
    let view_stage = view(
        Stage::named("s")
            .on(&out(), |_record: &crate::Record<String, String>| Vec::new())
            .build(),
    );
    let app = Parsley::named("app")
        .stage(up)
        .stage(view_stage)
        .build()
        .expect("composes");
    let metadata: BTreeMap<String, u32> = [(ORDERS, 2), (OUT, 1)]
        .into_iter()
        .map(|(topic, partitions)| (topic.to_string(), partitions))
        .collect();
    let assembly = assemble(&app, &metadata).expect("assembles");
    (app, assembly)
}

fn header(name: &'static str, value: &str) -> Header {
    Header {
        name: name.into(),
        value: Bytes::from(value.to_string()),
    }
}

fn written(offset: u64, epoch: i64, writer: u32) -> Rec {
    let mut rec = rec(offset).key("k");
    rec.0.data.value = Some(json("1"));
    rec.0
        .data
        .headers
        .push(header(EPOCH_HEADER, &format!("{epoch} {writer} up")));
    rec
}

fn progress(offset: u64, frontier: i64, writer: u32) -> Rec {
    let mut rec = rec(offset);
    rec.0.data.value = None;
    rec.0
        .data
        .headers
        .push(header(PROGRESS_HEADER, &format!("{frontier} {writer} up")));
    rec
}

/// V4: on a topic two tasks write, the view delivers by epoch across the
/// writers, out of offset order but in each writer's order, once every
/// writer's progress has closed the epoch; progress records are never
/// delivered.
#[test]
fn v4_writers_of_one_topic_are_delivered_in_epoch_order() {
    let (app, assembly) = two_stages();
    let mut task = Task::new(&app, &assembly, "s", 0, TaskConfig::default()).unwrap();
    task.start(&[None], T0).unwrap();
    let lane = tp(OUT, 0);
    feed(
        &mut task,
        &lane,
        vec![
            written(0, 7, 0),
            written(1, 5, 1),
            progress(2, 8, 0),
            written(3, 6, 1),
        ],
        4,
    );
    // Writer 1 may still write more of epoch 6.
    let mut order = Vec::new();
    let mut produced = Vec::new();
    while let Some(next) = task.next_deliverable(T0).unwrap() {
        order.push(task.head(&next).unwrap().offset);
        task.deliver(&next, &mut produced).unwrap();
    }
    assert_eq!(order, [1]);
    feed(&mut task, &lane, vec![progress(4, 9, 1)], 5);
    while let Some(next) = task.next_deliverable(T0).unwrap() {
        order.push(task.head(&next).unwrap().offset);
        task.deliver(&next, &mut produced).unwrap();
    }
    assert_eq!(order, [1, 3, 0]);
    assert_eq!(task.frontier(), 8);
}

/// V4: a record on a topic region stages write that carries no epoch,
/// or names a task that does not write the topic, stops the task with
/// a typed error naming the record.
#[test]
fn v4_a_written_record_without_its_epoch_is_refused() {
    let (app, assembly) = two_stages();
    for bad in [rec(0).key("k"), written(0, 3, 5)] {
        let mut task = Task::new(&app, &assembly, "s", 0, TaskConfig::default()).unwrap();
        task.start(&[None], T0).unwrap();
        feed(&mut task, &tp(OUT, 0), vec![bad], 1);
        let error = task.ready().unwrap_err();
        assert!(
            matches!(&error, TaskError::BadEpoch { offset: 0, .. }),
            "{error}"
        );
    }
}
