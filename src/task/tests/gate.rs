//! G2, G3: the gate condition and per-partition order.

use super::fixtures::*;
use crate::task::HeadStatus;
use crate::tp::Tp;

// ----- G2: the gate condition -----

/// G2: a record claiming an undelivered offset of another consumed tp is held,
/// and becomes deliverable exactly when that offset is delivered (not when it
/// is fetched, not one offset early).
#[test]
fn g2_claim_on_undelivered_offset_holds_until_exactly_that_offset_is_delivered() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 1)])], 1);
    feed(&mut task, &p, vec![rec(0), rec(1)], 2);
    // payments@1 is fetched but not delivered: orders@0 is held.
    assert_eq!(task.ready().unwrap(), only(&p));
    assert_eq!(
        task.heads(),
        [
            (o.clone(), 0, HeadStatus::Held(claim(PAYMENTS, 0, 1))),
            (p.clone(), 0, HeadStatus::Deliverable),
        ]
    );

    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@0"]);
    // payments@0 is delivered, payments@1 is not: still held.
    assert_eq!(task.ready().unwrap(), only(&p));

    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@1"]);
    assert_eq!(task.ready().unwrap(), only(&o));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["orders@0"]);
}

/// G2: claims on tps the task does not consume (another topic, or another
/// partition of a consumed topic) are not waited on; they are carried forward
/// (G5).
#[test]
fn g2_claims_on_tps_not_consumed_are_not_waited_on() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    let claims = [("elsewhere", 0, 3), (ORDERS, 1, 50), (PAYMENTS, 1, 7)];

    feed(&mut task, &o, vec![rec(0).stamp(&claims)], 1);
    assert_eq!(task.ready().unwrap(), only(&o));
    assert_eq!(task.heads(), [(o.clone(), 0, HeadStatus::Deliverable)]);

    let produced = deliver(&mut task, &o);
    assert_eq!(
        stamp_of(&produced[0]),
        stamp(&[
            ("elsewhere", 0, 3),
            (ORDERS, 0, 0),
            (ORDERS, 1, 50),
            (PAYMENTS, 1, 7)
        ])
    );
}

// ----- G3: per-partition order -----

/// G3: records of one tp go in offset order; a held head blocks the records
/// after it in its tp (even deliverable ones) while other tps proceed.
#[test]
fn g3_held_head_blocks_its_tp_while_other_tps_proceed() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    // orders@1 claims nothing, but sits behind the held orders@0.
    feed(
        &mut task,
        &o,
        vec![rec(0).stamp(&[(PAYMENTS, 0, 1)]), rec(1)],
        2,
    );
    feed(&mut task, &p, vec![rec(0)], 2);
    assert_eq!(task.ready().unwrap(), only(&p));
    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@0"]);

    assert_eq!(task.ready().unwrap(), Vec::<Tp>::new());
    assert_eq!(task.position(&o), Some(0));
    assert_eq!(task.buffered(), 2);

    feed(&mut task, &p, vec![rec(1)], 2);
    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@1"]);
    assert_eq!(task.ready().unwrap(), only(&o));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["orders@0"]);
    assert_eq!(emitted(&deliver(&mut task, &o)), ["orders@1"]);
    assert_eq!(task.position(&o), Some(2));
    assert_eq!(task.buffered(), 0);
}

/// G3: the live order takes the deliverable head with the oldest record
/// timestamp, ties broken by tp (not by the order the stage lists its sources).
#[test]
fn g3_next_deliverable_takes_oldest_timestamp_ties_by_tp() {
    // Sources listed payments first, so lane order differs from tp order.
    let f = fixture(echo(&[payments(), orders()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    assert_eq!(task.consumed_tps(), [p.clone(), o.clone()]);

    feed(&mut task, &o, vec![rec(0).at(500), rec(1).at(900)], 2);
    feed(&mut task, &p, vec![rec(0).at(300), rec(1).at(500)], 2);

    assert_eq!(task.next_deliverable(0).unwrap(), Some(p.clone()));
    deliver(&mut task, &p);
    // orders@0 and payments@1 both at 500: the smaller tp, orders-0, goes.
    assert_eq!(task.next_deliverable(0).unwrap(), Some(o.clone()));
    deliver(&mut task, &o);
    assert_eq!(task.next_deliverable(0).unwrap(), Some(p.clone()));
    deliver(&mut task, &p);
    assert_eq!(task.next_deliverable(0).unwrap(), Some(o.clone()));
    deliver(&mut task, &o);
    assert_eq!(task.next_deliverable(0).unwrap(), None);

    // A held head is never chosen, however old.
    feed(
        &mut task,
        &p,
        vec![rec(2).at(1).stamp(&[(ORDERS, 0, 2)])],
        3,
    );
    feed(&mut task, &o, vec![rec(2).at(800)], 3);
    assert_eq!(task.next_deliverable(0).unwrap(), Some(o.clone()));
}
