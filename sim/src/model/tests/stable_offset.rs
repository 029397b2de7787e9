//! The last stable offset and hanging transactions.

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

/// Kafka: an open transaction pins the LSO at its first offset; nothing at or
/// after it is delivered to `read_committed`, not even other producers'
/// committed and plain records, while `read_uncommitted` sees them all.
#[test]
fn open_transaction_stalls_read_committed_at_the_lso() {
    let mut c = cluster();
    let t = tp("in", 0);
    hanging(&mut c);

    let f = fetch(&c, &t, 0, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!(
        (f.next_offset, f.last_stable_offset, f.high_watermark),
        (0, 0, 4)
    );
    assert_eq!(c.last_stable_offset(&t).unwrap(), 0);
    assert_eq!(
        uncommitted_view(&c, &t),
        pairs(&[(0, "hanging"), (1, "plain"), (2, "other")])
    );
    assert_eq!(c.open_transactions(), ["hang"]);
    // A consumer already past the LSO stays where it is.
    let f = fetch(&c, &t, 2, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!(f.next_offset, 2);
}

/// Kafka: the LSO is per partition; an open transaction holds back only the
/// partitions it wrote to, and every one of them.
#[test]
fn open_transaction_holds_back_only_the_partitions_it_wrote_to() {
    let mut c = cluster();
    let (o0, o1, i) = (tp("out", 0), tp("out", 1), tp("in", 0));
    c.append(&o0, rec("before")).unwrap();
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &o0, rec("x")).unwrap();
    c.send(p, &o1, rec("y")).unwrap();
    c.append(&o1, rec("after")).unwrap();
    c.append(&i, rec("elsewhere")).unwrap();
    assert_eq!(c.last_stable_offset(&o0).unwrap(), 1);
    assert_eq!(c.last_stable_offset(&o1).unwrap(), 0);
    assert_eq!(committed_view(&c, &o0), pairs(&[(0, "before")]));
    assert!(committed_view(&c, &o1).is_empty());
    assert_eq!(committed_view(&c, &i), pairs(&[(0, "elsewhere")]));
}

/// Kafka: with two open transactions the LSO is the first offset of the
/// earliest; it advances to the next open one when the earliest ends.
#[test]
fn lso_is_the_earliest_open_transaction() {
    let mut c = cluster();
    let t = tp("in", 0);
    let a = c.init_producer("a", 0);
    let b = c.init_producer("b", 0);
    c.append(&t, rec("p0")).unwrap();
    c.begin(a, 0).unwrap();
    c.begin(b, 0).unwrap();
    c.send(a, &t, rec("a1")).unwrap();
    c.send(b, &t, rec("b2")).unwrap();
    c.send(a, &t, rec("a3")).unwrap();
    assert_eq!(c.last_stable_offset(&t).unwrap(), 1);
    c.commit(a).unwrap(); // marker at 4
    assert_eq!(c.last_stable_offset(&t).unwrap(), 2);
    assert_eq!(committed_view(&c, &t), pairs(&[(0, "p0"), (1, "a1")]));
    c.abort(b).unwrap(); // marker at 5
    assert_eq!(c.last_stable_offset(&t).unwrap(), 6);
    assert_eq!(
        committed_view(&c, &t),
        pairs(&[(0, "p0"), (1, "a1"), (3, "a3")])
    );
}

/// Kafka: committing the hanging transaction releases the stall; its records
/// and everything after it become visible.
#[test]
fn stall_clears_on_commit() {
    let mut c = cluster();
    let t = tp("in", 0);
    let hang = hanging(&mut c);
    c.commit(hang).unwrap();
    assert_eq!(c.last_stable_offset(&t).unwrap(), 5);
    assert_eq!(
        committed_view(&c, &t),
        pairs(&[(0, "hanging"), (1, "plain"), (2, "other")])
    );
    assert!(c.open_transactions().is_empty());
}

/// Kafka: aborting the hanging transaction releases the stall; its records
/// stay invisible, everything after it becomes visible.
#[test]
fn stall_clears_on_abort() {
    let mut c = cluster();
    let t = tp("in", 0);
    let hang = hanging(&mut c);
    c.abort(hang).unwrap();
    assert_eq!(c.last_stable_offset(&t).unwrap(), 5);
    assert_eq!(committed_view(&c, &t), pairs(&[(1, "plain"), (2, "other")]));
}

/// Kafka: a new producer initialised with the crashed one's transactional id
/// fences it and aborts its open transaction, releasing the stall.
#[test]
fn stall_clears_when_init_producer_fences_the_old_producer() {
    let mut c = cluster();
    let t = tp("in", 0);
    let hang = hanging(&mut c);
    let fresh = c.init_producer("hang", 2_000);
    assert_eq!(fresh.id, hang.id);
    assert_eq!(fresh.epoch, hang.epoch + 1);
    assert_eq!(kinds(&c, &t).last(), Some(&"ABORT"));
    assert_eq!(c.last_stable_offset(&t).unwrap(), 5);
    assert_eq!(committed_view(&c, &t), pairs(&[(1, "plain"), (2, "other")]));
    assert!(c.open_transactions().is_empty());
}

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
