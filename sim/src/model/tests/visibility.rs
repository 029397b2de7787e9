//! Visibility: what `read_committed` and `read_uncommitted` return, and
//! where control markers land.

use super::fixtures::*;
use crate::model::*;

/// Kafka: a `read_committed` consumer sees plain records and committed
/// transactions only; `read_uncommitted` sees every data record, aborted and
/// still-open ones included, but never a control marker.
#[test]
fn read_committed_sees_only_committed_read_uncommitted_sees_all() {
    let mut c = cluster();
    let t = tp("in", 0);
    c.append(&t, rec("plain")).unwrap();

    let a = c.init_producer("a", 0);
    c.begin(a, 0).unwrap();
    c.send(a, &t, rec("committed")).unwrap();
    c.commit(a).unwrap();

    let b = c.init_producer("b", 0);
    c.begin(b, 0).unwrap();
    c.send(b, &t, rec("aborted")).unwrap();
    c.abort(b).unwrap();

    let open = c.init_producer("open", 0);
    c.begin(open, 0).unwrap();
    c.send(open, &t, rec("open")).unwrap();

    assert_eq!(
        kinds(&c, &t),
        ["plain", "txn", "COMMIT", "txn", "ABORT", "txn"]
    );
    assert_eq!(
        committed_view(&c, &t),
        pairs(&[(0, "plain"), (1, "committed")])
    );
    assert_eq!(
        uncommitted_view(&c, &t),
        pairs(&[(0, "plain"), (1, "committed"), (3, "aborted"), (5, "open")])
    );
    assert_eq!(c.entry_status(&t, 3), Some(EntryStatus::Aborted));
    assert_eq!(c.entry_status(&t, 5), Some(EntryStatus::Open));
    assert_eq!(c.entry_status(&t, 2), Some(EntryStatus::Control));
}

/// Kafka: an abort marker takes an offset, so a committed record written after
/// one aborted record (offset 0) and its marker (offset 1) lands at offset 2.
#[test]
fn committed_record_after_one_aborted_record_lands_at_offset_2() {
    let mut c = cluster();
    let t = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    assert_eq!(c.send(p, &t, rec("x")).unwrap(), 0);
    c.abort(p).unwrap();
    c.begin(p, 0).unwrap();
    assert_eq!(c.send(p, &t, rec("y")).unwrap(), 2);
    c.commit(p).unwrap();

    assert_eq!(kinds(&c, &t), ["txn", "ABORT", "txn", "COMMIT"]);
    assert_eq!(committed_view(&c, &t), pairs(&[(2, "y")]));
    assert_eq!(c.high_watermark(&t).unwrap(), 4);
}

/// Kafka: after an aborted two-record transaction (offsets 0, 1) and its
/// marker (offset 2) the next committed record lands at offset 3.
#[test]
fn committed_record_after_aborted_two_record_transaction_lands_at_offset_3() {
    let mut c = cluster();
    let t = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &t, rec("x1")).unwrap();
    c.send(p, &t, rec("x2")).unwrap();
    c.abort(p).unwrap();
    c.begin(p, 0).unwrap();
    assert_eq!(c.send(p, &t, rec("y")).unwrap(), 3);
    c.commit(p).unwrap();
    assert_eq!(committed_view(&c, &t), pairs(&[(3, "y")]));
    assert_eq!(
        c.aborted_transactions(&t).unwrap(),
        [AbortedTxn {
            producer: p.id,
            first_offset: 0,
            last_offset: 2
        }]
    );
}

/// Kafka: a transaction spanning several partitions writes one marker on each;
/// a plain record after the marker on one partition is at the next offset.
#[test]
fn markers_are_written_on_every_partition_the_transaction_touched() {
    let mut c = cluster();
    let (o0, o1, i) = (tp("out", 0), tp("out", 1), tp("in", 0));
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &o0, rec("a")).unwrap();
    c.send(p, &o1, rec("b")).unwrap();
    c.send(p, &o0, rec("c")).unwrap();
    c.commit(p).unwrap();
    assert_eq!(kinds(&c, &o0), ["txn", "txn", "COMMIT"]);
    assert_eq!(kinds(&c, &o1), ["txn", "COMMIT"]);
    assert!(kinds(&c, &i).is_empty());
    assert_eq!(c.append(&o1, rec("d")).unwrap(), 2);
}
