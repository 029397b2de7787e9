//! G7, X1, X2, X3: abort and redelivery, the atomic unit, the commit interval.

use std::time::Duration;

use super::fixtures::*;
use crate::task::{Checkpoint, TaskConfig};

// ----- G7, X3: abort and redelivery -----

/// G7, X3: after an abort, history, tick time, slots and positions return to
/// the committed snapshot; the seek positions are the committed positions;
/// the redelivered records give the same outputs and are counted.
#[test]
fn g7_x3_abort_returns_to_the_committed_snapshot_and_redelivers_the_same() {
    let f = fixture(counter_with_tick_handler());
    let mut task = f.started(0);
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));
    let (a, b) = (key_slot("a"), key_slot("b"));

    let inputs = || {
        [
            rec(0).key("a").value(1),
            rec(1).key("a").value(2),
            rec(2).key("b").value(5),
        ]
    };
    feed(&mut task, &o, inputs().into(), 3);
    deliver(&mut task, &o);
    assert!(task.tick(T0 + INTERVAL_MS).is_some());
    let committed = task.committing().unwrap();
    task.handle_committed(T0 + INTERVAL_MS);

    // The open transaction: two deliveries and a tick.
    let a_then = deliver(&mut task, &o);
    let b_then = deliver(&mut task, &o);
    let tick_then = task.tick(T0 + 2 * INTERVAL_MS).expect("a tick is due");
    assert_eq!(task.history(), &stamp(&[(ORDERS, 0, 2)]));
    assert_eq!(task.last_tick_at(), Some(T0 + 2 * INTERVAL_MS));
    assert_eq!((slot(&task, &a), slot(&task, &b)), (Some(103), Some(105)));

    let seek = task.handle_aborted();
    assert_eq!(seek, [(o.clone(), 1), (k.clone(), 0)]);
    assert_eq!(seek, committed.offsets);
    assert_eq!(task.history(), &stamp(&[(ORDERS, 0, 0)]));
    assert_eq!(task.committed_history(), &stamp(&[(ORDERS, 0, 0)]));
    assert_eq!(task.last_tick_at(), Some(T0 + INTERVAL_MS));
    assert_eq!((slot(&task, &a), slot(&task, &b)), (Some(101), None));
    assert_eq!((task.position(&o), task.position(&k)), (Some(1), Some(0)));
    assert_eq!(task.buffered(), 0);
    assert!(!task.has_open_work());
    assert_eq!(task.committing().unwrap(), committed);

    // Re-consume from the committed position: the same outputs, stamps included.
    let [_, again_a, again_b] = inputs();
    feed(&mut task, &o, vec![again_a, again_b], 3);
    assert_eq!(deliver(&mut task, &o), a_then);
    assert_eq!(deliver(&mut task, &o), b_then);
    assert_eq!(task.tick(T0 + 2 * INTERVAL_MS), Some(tick_then));

    let metrics = task.metrics();
    assert_eq!(metrics.records_redelivered_total, 2);
    assert_eq!(metrics.records_delivered_total, 5);
    assert_eq!(metrics.transactions_aborted_total, 1);
    assert_eq!(metrics.transactions_committed_total, 1);
}

// ----- X1: the atomic unit -----

/// X1: `prepare_commit` carries every consumed tp's position and a checkpoint
/// with the history and the tick time; a restart from those committed offsets
/// resumes the history and the tick cadence.
#[test]
fn x1_commit_carries_positions_and_checkpoint_and_a_restart_resumes_them() {
    let f = fixture(echo(&[orders(), payments()], true));
    let mut task = f.started(0);
    let (o, p, k) = (tp(ORDERS, 0), tp(PAYMENTS, 0), tp(TICKS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[("a", 0, 3)]), rec(1)], 2);
    feed(&mut task, &p, vec![rec(0)], 1);
    deliver(&mut task, &o);
    deliver(&mut task, &p);
    assert!(task.tick(T0 + 1_500).is_some());

    let request = task.committing().unwrap();
    let history = stamp(&[("a", 0, 3), (ORDERS, 0, 0), (PAYMENTS, 0, 0)]);
    // X6: the stage's own group, `<application.id>-<stage>`.
    assert_eq!(&*request.group, "app-s");
    assert_eq!(
        request.offsets,
        [(o.clone(), 1), (p.clone(), 1), (k.clone(), 0)]
    );
    assert_eq!(
        Checkpoint::decode(&request.metadata).unwrap(),
        Checkpoint {
            history: history.clone(),
            last_tick_at: Some(T0 + 1_500),
            epochs: None,
        }
    );
    task.handle_committed(T0 + 1_500);
    assert_eq!(task.committed_history(), &history);

    // A new instance of the task, from what was committed.
    let mut task = f.task(0);
    let seek = task
        .start(&committed_offsets(&request), T0 + 1_600)
        .unwrap();
    assert_eq!(seek, request.offsets);
    assert_eq!(task.history(), &history);
    assert_eq!(task.committed_history(), &history);
    assert_eq!(task.last_tick_at(), Some(T0 + 1_500));
    assert_eq!(task.next_tick_at(), Some(T0 + 2_500));
    assert_eq!(task.tick(T0 + 2_499), None);

    // The history goes on from the checkpoint.
    feed(&mut task, &o, vec![rec(1)], 2);
    let produced = deliver(&mut task, &o);
    assert_eq!(
        stamp_of(&produced[0]),
        stamp(&[("a", 0, 3), (ORDERS, 0, 1), (PAYMENTS, 0, 0)])
    );
    assert!(task.tick(T0 + 2_500).is_some());
}

// ----- X2: commit interval -----

/// X2: the commit's due time, which a driver sleeps no later than, is the
/// last commit plus the interval while there is open work, and none
/// without it.
#[test]
fn x2_commit_due_at_is_the_last_commit_plus_the_interval_with_open_work() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    assert_eq!(task.commit_due_at(), None, "nothing to commit");

    feed(&mut task, &o, vec![rec(0), rec(1)], 2);
    deliver(&mut task, &o);
    assert_eq!(task.commit_due_at(), Some(T0 + 100));
    task.handle_committed(T0 + 130);
    assert_eq!(task.commit_due_at(), None, "committed: nothing open");
    deliver(&mut task, &o);
    assert_eq!(task.commit_due_at(), Some(T0 + 230), "from the last commit");
}

/// X2, T3: a driver's one timeout is the earliest of the next tick and the
/// open transaction's commit.
#[test]
fn x2_t3_poll_timeout_is_the_earliest_of_the_next_tick_and_the_commit() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    let tick = task.next_tick_at().expect("the stage ticks");
    assert_eq!(task.poll_timeout(T0), Some(tick), "nothing to commit");
    feed(&mut task, &o, vec![rec(0)], 1);
    deliver(&mut task, &o);
    let commit = task.commit_due_at().expect("a delivery is open work");
    assert!(commit < tick, "the fixture commits before it ticks");
    assert_eq!(task.poll_timeout(T0), Some(commit));
}

/// X2: a task wants to commit only when the commit interval has passed since
/// its last commit (or start) and there is open work (a delivery or a tick).
#[test]
fn x2_wants_commit_only_after_the_interval_with_open_work() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    assert!(!task.has_open_work());
    assert!(!task.wants_commit(T0 + 10_000), "nothing to commit");

    feed(&mut task, &o, vec![rec(0), rec(1)], 2);
    deliver(&mut task, &o);
    assert!(task.has_open_work());
    assert!(!task.wants_commit(T0 + 99));
    assert!(task.wants_commit(T0 + 100));
    task.handle_committed(T0 + 100);
    assert!(!task.has_open_work());
    assert!(!task.wants_commit(T0 + 10_000), "nothing to commit");

    // The interval runs from the last commit.
    deliver(&mut task, &o);
    assert!(!task.wants_commit(T0 + 199));
    assert!(task.wants_commit(T0 + 200));
    task.handle_committed(T0 + 200);

    // A tick is work too.
    assert!(task.tick(T0 + INTERVAL_MS).is_some());
    assert!(task.wants_commit(T0 + INTERVAL_MS));

    // The interval comes from the task's configuration.
    let mut slow = f.task_with(
        0,
        TaskConfig {
            commit_interval: Duration::from_secs(5),
        },
    );
    slow.start(&[None, None], T0).unwrap();
    feed(&mut slow, &o, vec![rec(0)], 1);
    deliver(&mut slow, &o);
    assert!(!slow.wants_commit(T0 + 4_999));
    assert!(slow.wants_commit(T0 + 5_000));
}
