//! G9: a stage that delivers in timestamp order across its sources, and
//! waits a bounded time for a source it has nothing of.

use std::time::Duration;

use super::fixtures::*;
use crate::task::Task;
use crate::tp::Tp;

const MAX_IDLE_MS: i64 = 500;

/// A started task of `echo` over orders and payments, delivering in
/// timestamp order with 500 ms of idling, optionally ticking.
fn synchronised(ticks: bool) -> Task {
    let stage = echo_builder(&[orders(), payments()], ticks)
        .synchronise_by_timestamp(Duration::from_millis(MAX_IDLE_MS as u64))
        .build();
    fixture(stage).started(0)
}

fn ready_at(task: &mut Task, now: i64) -> Vec<Tp> {
    let mut ready = Vec::new();
    task.deliverable(now, &mut ready).expect("no poison head");
    ready
}

/// G9: among the deliverable heads of its sources, a synchronised task
/// offers only the one with the lowest timestamp, whatever lane holds it;
/// ties go to the smaller tp. An unsynchronised task offers every one (G3).
#[test]
fn g9_a_synchronised_task_offers_only_the_lowest_timestamp_head() {
    let mut task = synchronised(false);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    feed(
        &mut task,
        &o,
        vec![rec(0).at(T0 + 50), rec(1).at(T0 + 70)],
        2,
    );
    feed(
        &mut task,
        &p,
        vec![rec(0).at(T0 + 10), rec(1).at(T0 + 70)],
        2,
    );
    assert_eq!(ready_at(&mut task, T0), only(&p));
    task.delivered(&p).unwrap();
    assert_eq!(ready_at(&mut task, T0), only(&o));
    task.delivered(&o).unwrap();
    // Both at T0 + 70: orders-0 is the smaller tp.
    assert_eq!(ready_at(&mut task, T0), only(&o));
    assert_eq!(task.next_deliverable(T0).unwrap(), Some(o.clone()));

    let mut plain = fixture(echo(&[orders(), payments()], false)).started(0);
    feed(&mut plain, &o, vec![rec(0).at(T0 + 50)], 1);
    feed(&mut plain, &p, vec![rec(0).at(T0 + 10)], 1);
    assert_eq!(ready_at(&mut plain, T0), [o, p]);
}

/// G9: a source with nothing fetched whose log has more (or that was
/// never fetched) is waited for until its records are fetched, however
/// long: Kafka Streams waits for data it knows is on the broker.
#[test]
fn g9_a_source_behind_its_log_is_waited_for_until_fetched() {
    let mut task = synchronised(false);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    feed(&mut task, &o, vec![rec(0).at(T0 + 50)], 1);
    // Payments never fetched: its lag is unknown, so it is waited for.
    assert!(ready_at(&mut task, T0).is_empty());
    // A fetch that returned nothing yet, with the log 3 ahead.
    feed(&mut task, &p, vec![], 3);
    assert!(ready_at(&mut task, T0 + 100 * MAX_IDLE_MS).is_empty());
    assert_eq!(task.next_deliverable(T0 + 100 * MAX_IDLE_MS).unwrap(), None);
    feed(
        &mut task,
        &p,
        vec![rec(0).at(T0 + 60), rec(1).at(T0 + 61), rec(2).at(T0 + 62)],
        3,
    );
    assert_eq!(ready_at(&mut task, T0 + 100 * MAX_IDLE_MS), only(&o));
}

/// G9: a source that is caught up (its position at its log end) and empty
/// is waited for up to max idle from when it became so, for producers to
/// send more (Kafka Streams' `max.task.idle.ms`); then the others go. While
/// it stays caught up and empty it is not waited for again; once it had
/// records, a new wait begins.
#[test]
fn g9_a_caught_up_source_is_waited_for_up_to_max_idle() {
    let mut task = synchronised(false);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    feed(&mut task, &p, vec![], 0);
    feed(
        &mut task,
        &o,
        vec![rec(0).at(T0 + 50), rec(1).at(T0 + 60)],
        2,
    );
    assert!(ready_at(&mut task, T0).is_empty());
    assert!(ready_at(&mut task, T0 + MAX_IDLE_MS - 1).is_empty());
    assert_eq!(ready_at(&mut task, T0 + MAX_IDLE_MS), only(&o));
    task.delivered(&o).unwrap();
    assert_eq!(
        ready_at(&mut task, T0 + MAX_IDLE_MS),
        only(&o),
        "no second wait"
    );
    task.delivered(&o).unwrap();

    let now = T0 + 10 * MAX_IDLE_MS;
    feed(&mut task, &p, vec![rec(0).at(T0 + 70)], 1);
    feed(&mut task, &o, vec![rec(2).at(T0 + 80)], 3);
    assert_eq!(ready_at(&mut task, now), only(&p));
    task.delivered(&p).unwrap();
    assert!(
        ready_at(&mut task, now).is_empty(),
        "payments drained: a new wait"
    );
    assert_eq!(ready_at(&mut task, now + MAX_IDLE_MS), only(&o));
}

/// G9: the wait for a caught-up source ends `max_idle` after it began,
/// which is when a driver must look again; none without a wait, none once
/// the wait has ended (it is not begun again), none once the gate is empty.
#[test]
fn g9_wait_ends_at_is_the_wait_start_plus_max_idle() {
    let mut task = synchronised(false);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    assert_eq!(task.wait_ends_at(T0), None, "nothing held");
    feed(&mut task, &p, vec![], 0);
    feed(
        &mut task,
        &o,
        vec![rec(0).at(T0 + 50), rec(1).at(T0 + 60)],
        2,
    );
    assert!(ready_at(&mut task, T0 + 20).is_empty());
    let end = T0 + 20 + MAX_IDLE_MS;
    assert_eq!(task.wait_ends_at(T0 + 20), Some(end));
    assert_eq!(
        task.poll_timeout(T0 + 20),
        Some(end),
        "the driver's timeout"
    );
    assert_eq!(task.wait_ends_at(end - 1), Some(end));
    assert_eq!(ready_at(&mut task, end), only(&o));
    task.delivered(&o).unwrap();
    assert_eq!(
        task.wait_ends_at(end),
        None,
        "the wait has ended, with a record still held: no deadline in the past"
    );
    assert_eq!(ready_at(&mut task, end), only(&o));
    task.delivered(&o).unwrap();
    assert_eq!(task.wait_ends_at(end), None, "the gate is empty");
}

/// G9 after G2: a held head is not offered however low its timestamp, and
/// does not make the task wait; the head its claim waits on goes first.
#[test]
fn g9_causal_holds_come_before_timestamps() {
    let mut task = synchronised(false);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    feed(
        &mut task,
        &p,
        vec![rec(0).at(T0 + 1).stamp(&[(ORDERS, 0, 0)])],
        1,
    );
    feed(&mut task, &o, vec![rec(0).at(T0 + 900)], 1);
    assert_eq!(ready_at(&mut task, T0), only(&o));
    task.delivered(&o).unwrap();
    // Orders is caught up and empty now: waited for, then payments goes.
    assert!(ready_at(&mut task, T0).is_empty());
    assert_eq!(ready_at(&mut task, T0 + MAX_IDLE_MS), only(&p));
}

/// G9: ticks are not held back by a wait for a source.
#[test]
fn g9_ticks_go_while_the_task_waits_for_a_source() {
    let mut task = synchronised(true);
    let (o, ticks) = (tp(ORDERS, 0), tp(TICKS, 0));
    feed(&mut task, &o, vec![rec(0).at(T0 + 50)], 1);
    let tick = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    feed(&mut task, &ticks, vec![back(0, &tick)], 1);
    assert_eq!(ready_at(&mut task, T0 + INTERVAL_MS), only(&ticks));
}

/// G9 for a driver whose fetches carry no log end (the live runtime's
/// carry `u64::MAX`): a drained source is behind until the driver says
/// its position reached the end of what is visible; then it is caught up,
/// and waited for up to max idle. A visible end the position has passed
/// since is stale, and says nothing.
#[test]
fn g9_a_visible_end_reached_makes_a_source_caught_up() {
    let mut task = synchronised(false);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    feed(&mut task, &p, vec![rec(0).at(T0 + 10)], u64::MAX);
    feed(&mut task, &o, vec![rec(0).at(T0 + 50)], u64::MAX);
    assert!(task.is_synchronised());
    assert_eq!(ready_at(&mut task, T0), only(&p));
    task.delivered(&p).unwrap();
    assert!(task.waits_for(&p));
    assert!(
        ready_at(&mut task, T0 + 100 * MAX_IDLE_MS).is_empty(),
        "payments may have more"
    );
    task.handle_visible_end(&p, 0);
    assert!(task.waits_for(&p), "an end behind the position is stale");
    task.handle_visible_end(&p, 1);
    assert!(!task.waits_for(&p));
    let now = T0 + 200 * MAX_IDLE_MS;
    assert!(
        ready_at(&mut task, now).is_empty(),
        "caught up: waited for a while"
    );
    assert_eq!(ready_at(&mut task, now + MAX_IDLE_MS), only(&o));
}

/// G9: the end of each wait for a caught-up source is among the task's
/// deadlines, where a driver that chooses time aims its clock (and the
/// millisecond either side); none while the gate is empty.
#[test]
fn g9_the_end_of_a_wait_is_a_deadline() {
    use crate::deadline::{Deadline, DeadlineKind};
    let mut task = synchronised(false);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    let waits = |task: &Task| -> Vec<Deadline> {
        task.deadlines()
            .filter(|deadline| deadline.kind == DeadlineKind::SyncWait)
            .collect()
    };
    assert!(waits(&task).is_empty(), "nothing held, no wait");
    feed(&mut task, &p, vec![], 0);
    feed(&mut task, &o, vec![rec(0).at(T0 + 50)], 1);
    assert!(ready_at(&mut task, T0 + 20).is_empty());
    assert_eq!(
        waits(&task),
        [Deadline::wall_clock(
            T0 + 20 + MAX_IDLE_MS,
            DeadlineKind::SyncWait
        )]
    );
    assert_eq!(ready_at(&mut task, T0 + 20 + MAX_IDLE_MS), only(&o));
    task.delivered(&o).unwrap();
    assert!(waits(&task).is_empty(), "the gate is empty");
}
