//! Hanging transactions that time out, at simulated time (the last stable
//! offset's other cases are in the table, `fidelity/cases.rs`).

use super::fixtures::*;
use crate::model::*;

/// Builds the stall: producer `hang` opens a transaction on `in-0` at offset 0;
/// then a plain record (1) and a committed transaction of `other` (2, marker
/// 3) follow it. Returns the hanging producer's handle.
fn hanging(c: &mut Cluster) -> ProducerId {
    let t = tp("in", 0);
    let hang = c.init_producer("hang", 1_000);
    c.begin(hang, 1_000).unwrap();
    assert_eq!(c.send(hang, &t, rec("hanging")).unwrap(), 0);
    assert_eq!(c.append(&t, rec("plain")).unwrap(), 1);
    let other = c.init_producer("other", 1_000);
    c.begin(other, 1_000).unwrap();
    assert_eq!(c.send(other, &t, rec("other")).unwrap(), 2);
    c.commit(other).unwrap();
    hang
}

/// Model only: at simulated time, to the millisecond; a broker's timeout is
/// wall-clock (the broker-only case of `live/tests/live_fidelity.rs`).
///
/// Kafka: the transaction coordinator aborts a transaction open longer than
/// `transaction.timeout.ms`, releasing the stall; not a moment before.
#[test]
fn stall_clears_when_the_transaction_times_out() {
    let mut c = Cluster::with_transaction_timeout(10_000);
    c.create_topic("in", 1).unwrap();
    let t = tp("in", 0);
    hanging(&mut c); // begun at 1_000
    assert!(c.expire_transactions(11_000).is_empty());
    assert_eq!(c.last_stable_offset(&t).unwrap(), 0);
    assert_eq!(c.expire_transactions(11_001), ["hang"]);
    assert_eq!(c.last_stable_offset(&t).unwrap(), 5);
    assert_eq!(committed_view(&c, &t), pairs(&[(1, "plain"), (2, "other")]));
    assert!(c.expire_transactions(1_000_000).is_empty());
}

/// Model only: at simulated time, as the case above; the broker side is the
/// same broker-only case.
///
/// Kafka: a timed-out producer's epoch is bumped, so its next call is fenced;
/// re-initialising gives it a working handle.
#[test]
fn timed_out_producer_is_fenced_until_reinitialised() {
    let mut c = Cluster::with_transaction_timeout(10_000);
    c.create_topic("in", 1).unwrap();
    let t = tp("in", 0);
    let hang = hanging(&mut c);
    c.expire_transactions(20_000);
    let err = c.send(hang, &t, rec("late")).unwrap_err();
    assert_eq!(
        err,
        ModelError::Fenced {
            transactional_id: "hang".into(),
            epoch: 0,
            current_epoch: 1
        }
    );
    assert!(matches!(
        c.begin(hang, 20_000),
        Err(ModelError::Fenced { .. })
    ));
    let again = c.init_producer("hang", 20_000);
    assert_eq!(again.epoch, 2);
    c.begin(again, 20_000).unwrap();
    c.send(again, &t, rec("again")).unwrap();
    c.commit(again).unwrap();
    assert_eq!(
        committed_view(&c, &t),
        pairs(&[(1, "plain"), (2, "other"), (5, "again")])
    );
}
