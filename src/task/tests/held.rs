//! Held records behind a head, and claim cycles.

use super::fixtures::*;
use crate::task::{Fetched, TaskError};
use crate::tp::Tp;

// ----- held records behind a head, and claim cycles -----

/// G2 defines *held* per record: orders@1 claims an undelivered payments
/// offset, so it is held even though it sits behind a deliverable head. G5 and
/// T4 then require a tick (a consistent cut) to claim its causes, and T5 to
/// hold the tick until they are delivered; records-held should count it.
#[test]
fn g5_a_record_held_behind_a_deliverable_head_is_merged_into_the_stamp() {
    let f = fixture(echo(&[orders(), payments()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).stamp(&[(PAYMENTS, 0, 4)])],
        2,
    );
    assert_eq!(task.ready().unwrap(), only(&o));
    let tick = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), stamp(&[(PAYMENTS, 0, 4)]));
    assert_eq!(task.metrics().records_held, 1);
}

/// §8 ("never a silent stall"), G6: two records that each claim the other
/// (possible only with forged stamps) can never resolve, with every log end
/// fresh; they should be reported as poison rather than held forever.
#[test]
fn g6_a_claim_cycle_between_consumed_tps_is_reported_not_waited_on() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 0)])], 1);
    feed(&mut task, &p, vec![rec(0).stamp(&[(ORDERS, 0, 0)])], 1);
    feed(&mut task, &o, Vec::new(), 1);
    assert!(
        matches!(task.ready(), Err(TaskError::UnresolvableClaim { .. })),
        "heads: {:?}",
        task.heads()
    );
}

/// G6: a cycle may run through a record behind the waited lane's head:
/// orders@0 claims payments@5, and payments@3, the head that must be
/// delivered before payments@5, claims orders@0. Poison, not a stall.
#[test]
fn g6_a_cycle_through_a_record_behind_a_head_is_reported() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 5)])], 1);
    feed(
        &mut task,
        &p,
        vec![rec(3).stamp(&[(ORDERS, 0, 0)]), rec(4), rec(5)],
        6,
    );
    feed(&mut task, &o, Vec::new(), 1);
    let error = task.ready().unwrap_err();
    assert!(
        matches!(&error, TaskError::UnresolvableClaim { reason, .. } if reason.contains("cycle")),
        "{error}"
    );
}

/// G2, G6: holds that chain to a record not fetched yet are a wait, not a
/// cycle: orders@0 claims payments@0, which claims refunds@0, which exists
/// but has not arrived. Nothing is reported; once it arrives, all three
/// deliver in causal order.
#[test]
fn g6_a_chain_of_holds_ending_at_an_unfetched_record_is_not_a_cycle() {
    let f = fixture(echo(&[orders(), payments(), refunds()], false));
    let mut task = f.started(0);
    let (o, p, r) = (tp(ORDERS, 0), tp(PAYMENTS, 0), tp(REFUNDS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 0)])], 1);
    feed(&mut task, &p, vec![rec(0).stamp(&[(REFUNDS, 0, 0)])], 1);
    feed(&mut task, &r, Vec::new(), 1);
    assert_eq!(task.ready().unwrap(), Vec::<Tp>::new());
    feed(&mut task, &r, vec![rec(0)], 1);
    deliver(&mut task, &r);
    deliver(&mut task, &p);
    deliver(&mut task, &o);
}

/// G3: a driver that hands the gate a record it already queued has a bug
/// that would deliver it twice; the gate refuses it loudly.
#[test]
#[should_panic(expected = "is behind the fetch position")]
fn g3_the_same_record_fetched_twice_is_refused() {
    let f = fixture(echo(&[orders()], false));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    task.handle_fetched(
        &o,
        &mut Fetched {
            records: vec![rec(0).0, rec(0).0],
            next_offset: 1,
            log_end: 1,
        },
    );
}

/// §8, X1: a history too large for Kafka's offset metadata would make every
/// commit fail; the task stops with a typed error instead of stalling.
#[test]
fn x1_checkpoint_beyond_the_offset_metadata_limit_stops_the_task() {
    let f = fixture(echo(&[orders()], false));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    let names: Vec<String> = (0..150)
        .map(|index| format!("an-upstream-topic-with-a-long-name-{index:03}"))
        .collect();
    let claims: Vec<(&str, u32, u64)> = names.iter().map(|name| (name.as_str(), 0, 7)).collect();
    feed(&mut task, &o, vec![rec(0).stamp(&claims)], 1);
    deliver(&mut task, &o);
    let error = task.committing().unwrap_err();
    assert!(
        matches!(&error, TaskError::CheckpointTooLarge { bytes, max: 4096, claims: 151, .. } if *bytes > 4096),
        "{error}"
    );
    assert_eq!(task.ready().unwrap_err(), error, "the task stays stopped");
}
