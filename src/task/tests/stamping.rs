//! G4, G5: the task history and the stamping site.

use super::fixtures::*;
use crate::stamp::Stamp;
use crate::task::{HeadStatus, TaskError};
use crate::tp::Tp;

// ----- G4: history -----

/// G4: the history is the merge of every delivered record's stamp plus a claim
/// on each delivered record; held records add nothing.
#[test]
fn g4_history_merges_delivered_stamps_and_claims_on_delivered_records() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    assert_eq!(task.history(), &Stamp::empty());

    feed(
        &mut task,
        &o,
        vec![
            rec(0).stamp(&[("a", 0, 7), (PAYMENTS, 1, 3)]),
            rec(1).stamp(&[("a", 0, 2), ("x", 0, 1)]),
        ],
        2,
    );
    // payments@1 claims orders@5, not delivered: it stays held.
    feed(
        &mut task,
        &p,
        vec![rec(0), rec(1).stamp(&[(ORDERS, 0, 5), ("z", 0, 9)])],
        2,
    );

    deliver(&mut task, &o);
    assert_eq!(
        task.history(),
        &stamp(&[("a", 0, 7), (ORDERS, 0, 0), (PAYMENTS, 1, 3)])
    );
    deliver(&mut task, &o);
    assert_eq!(
        task.history(),
        &stamp(&[("a", 0, 7), (ORDERS, 0, 1), (PAYMENTS, 1, 3), ("x", 0, 1)])
    );
    deliver(&mut task, &p);
    let expected = stamp(&[
        ("a", 0, 7),
        (ORDERS, 0, 1),
        (PAYMENTS, 0, 0),
        (PAYMENTS, 1, 3),
        ("x", 0, 1),
    ]);
    assert_eq!(task.history(), &expected);

    assert_eq!(task.ready().unwrap(), Vec::<Tp>::new());
    assert_eq!(task.history(), &expected);
}

// ----- G5: the stamping site -----

/// G5: an emission made while delivering r claims r and r's causes; with a
/// record held, every emission (and every tick: same site) is stamped with
/// the history merged with the held record's stamp — exactly that.
#[test]
fn g5_emissions_and_ticks_are_stamped_with_history_merged_with_held_stamps() {
    let f = fixture(echo(&[orders(), payments(), refunds()], true));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(
        &mut task,
        &o,
        vec![
            rec(0).stamp(&[("a", 0, 4)]),
            rec(1).stamp(&[("a", 0, 5), ("c", 0, 1)]),
        ],
        2,
    );
    let first = deliver(&mut task, &o);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].tp, tp(OUT, 0));
    assert_eq!(stamp_of(&first[0]), stamp(&[("a", 0, 4), (ORDERS, 0, 0)]));

    // payments@0 is held on refunds@2 (refunds is consumed, never fetched).
    feed(
        &mut task,
        &p,
        vec![rec(0).stamp(&[(REFUNDS, 0, 2), ("b", 0, 9)])],
        1,
    );
    assert_eq!(
        task.heads(),
        [
            (o.clone(), 1, HeadStatus::Deliverable),
            (p.clone(), 0, HeadStatus::Held(claim(REFUNDS, 0, 2))),
        ]
    );

    let second = deliver(&mut task, &o);
    let site = stamp(&[
        ("a", 0, 5),
        ("b", 0, 9),
        ("c", 0, 1),
        (ORDERS, 0, 1),
        (REFUNDS, 0, 2),
    ]);
    assert_eq!(stamp_of(&second[0]), site);
    // The held stamp is in the emission, not in the history.
    assert_eq!(
        task.history(),
        &stamp(&[("a", 0, 5), ("c", 0, 1), (ORDERS, 0, 1)])
    );

    let tick = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), site);
}

/// G5 with G6: a record that claims its own tp at or beyond itself is
/// poison on sight, not held: emissions made before the task reaches it do
/// not carry its claims (they would name a cause that never exists), and
/// it stops the task when it is the head.
#[test]
fn g5_a_record_poison_on_sight_lends_no_claims_to_emissions() {
    let f = fixture(echo(&[orders(), payments(), refunds()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).stamp(&[(ORDERS, 0, 1_000_000), ("b", 0, 9)])],
        2,
    );
    assert_eq!(task.metrics().records_held, 0, "poison is not held");
    let first = deliver(&mut task, &o);
    assert_eq!(stamp_of(&first[0]), stamp(&[(ORDERS, 0, 0)]));
    let tick = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), stamp(&[(ORDERS, 0, 0)]));
    assert!(matches!(
        task.next_deliverable(0),
        Err(TaskError::UnresolvableClaim { offset: 1, .. })
    ));
}
