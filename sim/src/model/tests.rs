//! The model's behaviour, pinned against what Kafka does (in the spirit of
//! Kafka's `TransactionsTest`), plus a property test over random interleavings.

use bytes::Bytes;
use parsley::{RecordData, Tp};

use super::*;

fn rec(value: &str) -> RecordData {
    RecordData {
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
        timestamp: 0,
    }
}

fn tp(topic: &str, partition: u32) -> Tp {
    Tp::new(topic, partition)
}

/// A cluster with `in` (1 partition) and `out` (2 partitions).
fn cluster() -> Cluster {
    let mut cluster = Cluster::new();
    cluster.create_topic("in", 1).unwrap();
    cluster.create_topic("out", 2).unwrap();
    cluster
}

fn fetch(cluster: &Cluster, tp: &Tp, from: u64, isolation: Isolation) -> Fetch {
    cluster.fetch(tp, from, usize::MAX, isolation).unwrap()
}

fn committed_view(cluster: &Cluster, tp: &Tp) -> Vec<(u64, String)> {
    offsets_and_values(&fetch(cluster, tp, 0, Isolation::ReadCommitted))
}

fn uncommitted_view(cluster: &Cluster, tp: &Tp) -> Vec<(u64, String)> {
    offsets_and_values(&fetch(cluster, tp, 0, Isolation::ReadUncommitted))
}

fn offsets_and_values(fetch: &Fetch) -> Vec<(u64, String)> {
    fetch
        .records
        .iter()
        .map(|r| {
            let value = r.data.value.as_deref().unwrap_or_default();
            (r.offset, String::from_utf8_lossy(value).into_owned())
        })
        .collect()
}

fn kinds(cluster: &Cluster, tp: &Tp) -> Vec<&'static str> {
    cluster
        .entries(tp)
        .unwrap()
        .iter()
        .map(|entry| match entry {
            Entry::Data {
                transactional: false,
                ..
            } => "plain",
            Entry::Data { .. } => "txn",
            Entry::Control {
                kind: ControlKind::Commit,
                ..
            } => "COMMIT",
            Entry::Control {
                kind: ControlKind::Abort,
                ..
            } => "ABORT",
        })
        .collect()
}

fn pairs(items: &[(u64, &str)]) -> Vec<(u64, String)> {
    items.iter().map(|&(o, v)| (o, v.to_owned())).collect()
}

// ----- visibility -----

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

// ----- the last stable offset and hanging transactions -----

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

// ----- fencing -----

/// Kafka (`testFencingOnCommit`, `testFencingOnSend`): once a new producer with
/// the same transactional id is initialised, every call of the old one fails
/// with a fencing error, its open transaction is aborted, and the new one
/// works.
#[test]
fn fenced_producer_fails_and_its_open_transaction_is_aborted() {
    let mut c = cluster();
    let t = tp("out", 0);
    let old = c.init_producer("task-0", 0);
    c.begin(old, 0).unwrap();
    c.send(old, &t, rec("zombie")).unwrap();
    c.send_offsets(old, "g", &[(tp("in", 0), CommittedOffset::new(7, ""))])
        .unwrap();

    let new = c.init_producer("task-0", 0);
    let fenced = ModelError::Fenced {
        transactional_id: "task-0".into(),
        epoch: 0,
        current_epoch: 1,
    };
    assert_eq!(c.commit(old).unwrap_err(), fenced);
    assert_eq!(c.send(old, &t, rec("more")).unwrap_err(), fenced);
    assert_eq!(c.abort(old).unwrap_err(), fenced);
    assert_eq!(c.begin(old, 0).unwrap_err(), fenced);
    assert_eq!(
        c.send_offsets(old, "g", &[(tp("in", 0), CommittedOffset::new(8, ""))])
            .unwrap_err(),
        fenced
    );

    assert_eq!(kinds(&c, &t), ["txn", "ABORT"]);
    assert_eq!(c.entry_status(&t, 0), Some(EntryStatus::Aborted));
    assert_eq!(c.committed("g", &tp("in", 0)), None);

    c.begin(new, 0).unwrap();
    assert_eq!(c.send(new, &t, rec("fresh")).unwrap(), 2);
    c.commit(new).unwrap();
    assert_eq!(committed_view(&c, &t), pairs(&[(2, "fresh")]));
    assert_eq!(c.producer("task-0"), Some(new));
}

/// The coordinator's bookkeeping errors: a second `begin`, ending or sending
/// without a transaction, and a handle this cluster never issued.
#[test]
fn transaction_state_errors() {
    let mut c = cluster();
    let t = tp("in", 0);
    let p = c.init_producer("p", 0);
    assert_eq!(
        c.commit(p).unwrap_err(),
        ModelError::NoOpenTransaction {
            transactional_id: "p".into()
        }
    );
    assert!(matches!(
        c.send(p, &t, rec("x")),
        Err(ModelError::NoOpenTransaction { .. })
    ));
    assert!(matches!(
        c.abort(p),
        Err(ModelError::NoOpenTransaction { .. })
    ));
    c.begin(p, 0).unwrap();
    assert_eq!(
        c.begin(p, 0).unwrap_err(),
        ModelError::TransactionAlreadyOpen {
            transactional_id: "p".into()
        }
    );
    let stranger = ProducerId { id: 99, epoch: 0 };
    assert_eq!(
        c.begin(stranger, 0).unwrap_err(),
        ModelError::UnknownProducer
    );
    // A failed send leaves the transaction and the logs as they were.
    assert!(matches!(
        c.send(p, &tp("nope", 0), rec("x")),
        Err(ModelError::UnknownTopic { .. })
    ));
    assert_eq!(c.high_watermark(&t).unwrap(), 0);
    c.commit(p).unwrap();
    assert!(c.entries(&t).unwrap().is_empty());
}

// ----- group offsets -----

/// Kafka (`sendOffsetsToTransaction`): offsets sent to a transaction are not
/// visible as the group's committed offsets until the transaction commits.
#[test]
fn group_offsets_are_invisible_until_commit() {
    let mut c = cluster();
    let input = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &tp("out", 0), rec("x")).unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(5, "m"))])
        .unwrap();
    assert_eq!(c.committed("g", &input), None);
    c.commit(p).unwrap();
    assert_eq!(c.committed("g", &input), Some(CommittedOffset::new(5, "m")));
    assert_eq!(c.committed("other-group", &input), None);
}

/// KIP-447: while a transaction holding a group's offsets on a tp is open,
/// a stable (`read_committed`) lookup of that group's offset on that tp
/// waits (the broker answers UNSTABLE_OFFSET_COMMIT); other groups and tps
/// answer at once, and so does the plain lookup. The broker side is
/// `group_offsets_are_invisible_until_commit` in `tests/live_fidelity.rs`.
#[test]
fn stable_offset_lookups_wait_while_the_group_s_offsets_are_pending() {
    let mut c = cluster();
    let input = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(3, ""))])
        .unwrap();
    c.commit(p).unwrap();
    c.begin(p, 0).unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(5, ""))])
        .unwrap();
    assert_eq!(
        c.committed_stable("g", &input),
        Err(ModelError::UnstableOffset {
            group: "g".to_string(),
            tp: input.clone(),
            transactional_id: "p".to_string(),
        })
    );
    assert_eq!(c.committed("g", &input), Some(CommittedOffset::new(3, "")));
    assert_eq!(c.committed_stable("other-group", &input), Ok(None));
    c.commit_later(p).unwrap();
    assert!(
        c.committed_stable("g", &input).is_err(),
        "a commit whose markers are unwritten is still pending"
    );
    assert!(c.write_markers(p.id));
    assert_eq!(
        c.committed_stable("g", &input),
        Ok(Some(CommittedOffset::new(5, "")))
    );
}

/// A broker answers `EndTxn` before it writes the markers: between the two,
/// the transaction's records stay invisible to `read_committed`, the last
/// stable offset stays where it began, and its group offsets are not
/// applied. Then the markers land, where they would have landed at once.
#[test]
fn a_commit_with_markers_written_later_becomes_visible_when_they_are() {
    let mut c = cluster();
    let out = tp("out", 0);
    let input = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &out, rec("x")).unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(1, ""))])
        .unwrap();
    c.commit_later(p).unwrap();
    c.append(&out, rec("plain")).unwrap();
    assert!(committed_view(&c, &out).is_empty());
    assert_eq!(c.last_stable_offset(&out).unwrap(), 0);
    assert_eq!(c.committed("g", &input), None);
    assert_eq!(c.unwritten_markers(), [p.id]);
    // The producer has no open transaction: the client saw the commit end.
    assert!(matches!(
        c.commit(p),
        Err(ModelError::NoOpenTransaction { .. })
    ));
    assert!(c.write_markers(p.id));
    assert!(!c.write_markers(p.id), "written once");
    assert_eq!(kinds(&c, &out), ["txn", "plain", "COMMIT"]);
    assert_eq!(
        committed_view(&c, &out),
        [(0, "x".to_string()), (1, "plain".to_string())]
    );
    assert_eq!(c.committed("g", &input), Some(CommittedOffset::new(1, "")));
}

/// An abort with late markers: the records are never visible, and the
/// partition stays stalled at them until the markers are written.
#[test]
fn an_abort_with_markers_written_later_stalls_until_they_are() {
    let mut c = cluster();
    let out = tp("out", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &out, rec("x")).unwrap();
    c.abort_later(p).unwrap();
    c.append(&out, rec("plain")).unwrap();
    assert!(committed_view(&c, &out).is_empty());
    c.write_markers(p.id);
    assert_eq!(kinds(&c, &out), ["txn", "plain", "ABORT"]);
    assert_eq!(committed_view(&c, &out), [(1, "plain".to_string())]);
}

/// The producer's next transaction, or a new producer with its id, makes
/// the coordinator write the pending markers first: a broker holds the
/// next transaction's first write (CONCURRENT_TRANSACTIONS) and completes a
/// decided end before it fences.
#[test]
fn late_markers_are_written_before_the_next_transaction_or_a_fencing() {
    let mut c = cluster();
    let out = tp("out", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &out, rec("x")).unwrap();
    c.commit_later(p).unwrap();
    c.begin(p, 0).unwrap();
    assert_eq!(committed_view(&c, &out), [(0, "x".to_string())]);
    c.send(p, &out, rec("y")).unwrap();
    c.commit_later(p).unwrap();
    let _fencer = c.init_producer("p", 0);
    assert_eq!(
        committed_view(&c, &out),
        [(0, "x".to_string()), (2, "y".to_string())],
        "the decided commit survives the fencing"
    );
    assert!(c.unwritten_markers().is_empty());
}

/// Kafka: offsets sent to an aborted transaction are discarded; the group
/// keeps its previously committed offsets.
#[test]
fn group_offsets_are_dropped_on_abort() {
    let mut c = cluster();
    let input = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(3, ""))])
        .unwrap();
    c.commit(p).unwrap();
    c.begin(p, 0).unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(9, ""))])
        .unwrap();
    c.abort(p).unwrap();
    assert_eq!(c.committed("g", &input), Some(CommittedOffset::new(3, "")));
}

/// Kafka: a transaction that only commits offsets (no records) commits fine
/// and writes no markers; the last `send_offsets` per tp wins.
#[test]
fn transaction_touching_no_partition_commits_offsets() {
    let mut c = cluster();
    let input = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(1, ""))])
        .unwrap();
    c.send_offsets(p, "g", &[(input.clone(), CommittedOffset::new(2, ""))])
        .unwrap();
    c.commit(p).unwrap();
    assert_eq!(c.committed("g", &input), Some(CommittedOffset::new(2, "")));
    for (topic, partitions) in c.topics() {
        for partition in 0..partitions {
            assert!(c
                .entries(&Tp::new(topic.clone(), partition))
                .unwrap()
                .is_empty());
        }
    }
    // An empty transaction commits too.
    c.begin(p, 0).unwrap();
    c.commit(p).unwrap();
}

/// Offsets for a tp that does not exist are refused, and nothing is staged.
#[test]
fn send_offsets_for_unknown_partition_stages_nothing() {
    let mut c = cluster();
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    let err = c
        .send_offsets(
            p,
            "g",
            &[
                (tp("in", 0), CommittedOffset::new(1, "")),
                (tp("in", 3), CommittedOffset::new(1, "")),
            ],
        )
        .unwrap_err();
    assert!(matches!(
        err,
        ModelError::UnknownPartition { partitions: 1, .. }
    ));
    c.commit(p).unwrap();
    assert_eq!(c.committed("g", &tp("in", 0)), None);
}

// ----- fetch positions -----

/// Kafka: the consumer's position moves past control markers and aborted
/// records it skipped, so it does not fetch them again; it never moves beyond
/// the LSO.
#[test]
fn next_offset_moves_past_markers_and_aborted_records() {
    let mut c = cluster();
    let t = tp("in", 0);
    let p = c.init_producer("p", 0);
    c.begin(p, 0).unwrap();
    c.send(p, &t, rec("x1")).unwrap(); // 0
    c.send(p, &t, rec("x2")).unwrap(); // 1
    c.abort(p).unwrap(); // 2
    let f = fetch(&c, &t, 0, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!(f.next_offset, 3);

    c.begin(p, 0).unwrap();
    c.send(p, &t, rec("y")).unwrap(); // 3
    c.commit(p).unwrap(); // 4
    let f = fetch(&c, &t, 0, Isolation::ReadCommitted);
    assert_eq!(offsets_and_values(&f), pairs(&[(3, "y")]));
    assert_eq!(f.next_offset, 5);

    // Another transaction opens at 5: the position stops at the LSO.
    c.begin(p, 0).unwrap();
    c.send(p, &t, rec("z")).unwrap(); // 5
    let f = fetch(&c, &t, 4, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!((f.next_offset, f.last_stable_offset), (5, 5));

    // read_uncommitted skips markers only.
    let f = fetch(&c, &t, 0, Isolation::ReadUncommitted);
    assert_eq!(
        offsets_and_values(&f),
        pairs(&[(0, "x1"), (1, "x2"), (3, "y"), (5, "z")])
    );
    assert_eq!(f.next_offset, 6);
}

/// Kafka (`max.poll.records`): a fetch returns at most `max_records`; the
/// position after a full fetch resumes exactly where it stopped, past any
/// markers that follow the last record.
#[test]
fn max_records_bounds_a_fetch_and_next_offset_resumes() {
    let mut c = cluster();
    let t = tp("in", 0);
    let p = c.init_producer("p", 0);
    for i in 0..3 {
        c.begin(p, 0).unwrap();
        c.send(p, &t, rec(&format!("r{i}"))).unwrap();
        c.commit(p).unwrap();
    } // r0@0 C@1 r1@2 C@3 r2@4 C@5
    let f = c.fetch(&t, 0, 2, Isolation::ReadCommitted).unwrap();
    assert_eq!(offsets_and_values(&f), pairs(&[(0, "r0"), (2, "r1")]));
    assert_eq!(f.next_offset, 4);
    let f = c.fetch(&t, 4, 2, Isolation::ReadCommitted).unwrap();
    assert_eq!(offsets_and_values(&f), pairs(&[(4, "r2")]));
    assert_eq!(f.next_offset, 6);
    let f = c.fetch(&t, 0, 0, Isolation::ReadCommitted).unwrap();
    assert!(f.records.is_empty());
    assert_eq!(f.next_offset, 0);
    let f = c.fetch(&t, 1, 0, Isolation::ReadCommitted).unwrap();
    assert_eq!(
        f.next_offset, 2,
        "a skipped marker still moves the position"
    );
}

/// Kafka: fetching at the log end is an empty fetch; beyond it is
/// `OFFSET_OUT_OF_RANGE`.
#[test]
fn fetch_at_log_end_is_empty_and_beyond_is_out_of_range() {
    let mut c = cluster();
    let t = tp("in", 0);
    c.append(&t, rec("a")).unwrap();
    let f = fetch(&c, &t, 1, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!((f.next_offset, f.high_watermark), (1, 1));
    assert_eq!(
        c.fetch(&t, 2, 10, Isolation::ReadUncommitted).unwrap_err(),
        ModelError::OffsetOutOfRange {
            tp: t.clone(),
            offset: 2,
            high_watermark: 1
        }
    );
}

// ----- ordering, determinism, topics, errors -----

/// The append sequence orders records of several partitions by the time they
/// were written; markers have none.
#[test]
fn append_sequence_orders_records_across_partitions() {
    let mut c = cluster();
    let (o0, o1) = (tp("out", 0), tp("out", 1));
    let p = c.init_producer("p", 0);
    c.append(&o1, rec("first")).unwrap();
    c.begin(p, 0).unwrap();
    c.send(p, &o0, rec("second")).unwrap();
    c.send(p, &o1, rec("third")).unwrap();
    c.commit(p).unwrap();
    c.append(&o0, rec("fourth")).unwrap();

    let mut all: Vec<(u64, String)> = [&o0, &o1]
        .into_iter()
        .flat_map(|t| {
            let f = fetch(&c, t, 0, Isolation::ReadCommitted);
            f.records
                .iter()
                .map(|r| {
                    let seq = c.append_sequence(t, r.offset).unwrap();
                    let value = r.data.value.as_deref().unwrap();
                    (seq, String::from_utf8_lossy(value).into_owned())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort();
    let order: Vec<_> = all.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(order, ["first", "second", "third", "fourth"]);
    assert_eq!(c.append_sequence(&o0, 1), None, "offset 1 is a marker");
    assert_eq!(c.append_sequence(&o0, 99), None);
    assert_eq!(c.append_sequence(&tp("nope", 0), 0), None);
}

/// The model is deterministic: the same calls on two clusters give identical
/// logs, producer ids and group offsets.
#[test]
fn same_calls_give_identical_logs() {
    fn run() -> Cluster {
        let mut c = Cluster::with_transaction_timeout(5_000);
        c.create_topic("out", 3).unwrap();
        c.create_topic("in", 1).unwrap();
        let a = c.init_producer("a", 0);
        let b = c.init_producer("b", 0);
        c.begin(a, 0).unwrap();
        c.begin(b, 0).unwrap();
        for i in 0..10u32 {
            let t = Tp::new("out", i % 3);
            c.send(a, &t, rec(&format!("a{i}"))).unwrap();
            c.append(&t, rec(&format!("p{i}"))).unwrap();
            if i % 4 == 0 {
                c.send(b, &t, rec(&format!("b{i}"))).unwrap();
            }
        }
        c.send_offsets(a, "g", &[(Tp::new("in", 0), CommittedOffset::new(4, "x"))])
            .unwrap();
        c.commit(a).unwrap();
        c.expire_transactions(10_000);
        c.init_producer("b", 10_000);
        c
    }
    let (x, y) = (run(), run());
    for partition in 0..3 {
        let t = Tp::new("out", partition);
        assert_eq!(x.entries(&t).unwrap(), y.entries(&t).unwrap());
        let seqs = |c: &Cluster| -> Vec<Option<u64>> {
            (0..c.high_watermark(&t).unwrap())
                .map(|o| c.append_sequence(&t, o))
                .collect()
        };
        assert_eq!(seqs(&x), seqs(&y));
    }
    assert_eq!(x.producer("a"), y.producer("a"));
    assert_eq!(x.producer("b"), y.producer("b"));
    assert_eq!(
        x.committed("g", &Tp::new("in", 0)),
        y.committed("g", &Tp::new("in", 0))
    );
}

/// Topic administration: duplicates and empty topics are refused; the list is
/// sorted by name.
#[test]
fn topics_are_created_once_and_listed_sorted() {
    let mut c = Cluster::new();
    c.create_topic("zeta", 2).unwrap();
    c.create_topic("alpha", 1).unwrap();
    assert_eq!(
        c.create_topic("zeta", 4).unwrap_err(),
        ModelError::TopicExists {
            topic: "zeta".into()
        }
    );
    assert_eq!(
        c.create_topic("empty", 0).unwrap_err(),
        ModelError::InvalidPartitionCount {
            topic: "empty".into()
        }
    );
    let listed: Vec<_> = c
        .topics()
        .into_iter()
        .map(|(name, n)| (name.as_str().to_owned(), n))
        .collect();
    assert_eq!(listed, [("alpha".to_owned(), 1), ("zeta".to_owned(), 2)]);
    assert_eq!(c.partitions("zeta"), Some(2));
    assert_eq!(c.partitions("nope"), None);
    assert_eq!(c.transaction_timeout_ms(), DEFAULT_TRANSACTION_TIMEOUT_MS);
}

/// Error messages name the topic, partition, offset or transactional id they
/// are about, so a failed simulation says where it failed.
#[test]
fn errors_name_what_and_where() {
    let mut c = cluster();
    assert_eq!(
        c.append(&tp("orders", 0), rec("x"))
            .unwrap_err()
            .to_string(),
        "unknown topic `orders`"
    );
    assert_eq!(
        c.append(&tp("out", 5), rec("x")).unwrap_err().to_string(),
        "unknown partition out-5: topic `out` has 2 partition(s)"
    );
    assert_eq!(
        c.fetch(&tp("in", 0), 3, 1, Isolation::ReadCommitted)
            .unwrap_err()
            .to_string(),
        "offset 3 is out of range for in-0: the high watermark is 0"
    );
    assert_eq!(
        c.create_topic("in", 1).unwrap_err().to_string(),
        "topic `in` already exists"
    );
    assert_eq!(
        c.create_topic("none", 0).unwrap_err().to_string(),
        "topic `none` needs at least one partition"
    );
    let old = c.init_producer("task-3", 0);
    c.init_producer("task-3", 0);
    assert_eq!(
        c.begin(old, 0).unwrap_err().to_string(),
        "producer `task-3` with epoch 0 is fenced: the current epoch is 1"
    );
    let p = c.init_producer("p", 0);
    assert_eq!(
        c.commit(p).unwrap_err().to_string(),
        "producer `p` has no open transaction"
    );
    c.begin(p, 0).unwrap();
    assert_eq!(
        c.begin(p, 0).unwrap_err().to_string(),
        "producer `p` already has an open transaction"
    );
    assert!(c
        .high_watermark(&tp("in", 1))
        .unwrap_err()
        .to_string()
        .contains("in-1"));
}

// ----- property: random interleavings -----

mod interleavings {
    //! Two transactional producers and one plain producer interleave at random
    //! over two partitions, with fencing, timeouts and zombie calls. An oracle
    //! tracks the fate of every offset independently of the model, and after
    //! every step the model must agree: offsets consecutive, the LSO at the
    //! earliest open record, `read_committed` never returning an aborted or
    //! open record or one at/after the LSO, and never skipping a committed one.

    use super::*;
    use proptest::prelude::*;

    const TIMEOUT_MS: i64 = 50_000;
    const PARTITIONS: u32 = 2;

    #[derive(Clone, Debug)]
    enum Op {
        Begin(usize),
        Send(usize, u32),
        Commit(usize),
        Abort(usize),
        Append(u32),
        Reinit(usize),
        Zombie(usize, u32),
        Tick(i64),
        Fetch(u32, u64, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let p = 0..2usize;
        let part = 0..PARTITIONS;
        prop_oneof![
            3 => p.clone().prop_map(Op::Begin),
            6 => (p.clone(), part.clone()).prop_map(|(p, k)| Op::Send(p, k)),
            2 => p.clone().prop_map(Op::Commit),
            2 => p.clone().prop_map(Op::Abort),
            3 => part.clone().prop_map(Op::Append),
            1 => p.clone().prop_map(Op::Reinit),
            1 => (p, part.clone()).prop_map(|(p, k)| Op::Zombie(p, k)),
            1 => (0..40_000i64).prop_map(Op::Tick),
            3 => (part, any::<u64>(), 0..5usize).prop_map(|(k, f, m)| Op::Fetch(k, f, m)),
        ]
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Fate {
        Committed,
        Open(usize),
        Aborted,
        Marker(ControlKind),
    }

    struct Oracle {
        fates: Vec<Vec<Fate>>,
        handles: [ProducerId; 2],
        stale: [Option<ProducerId>; 2],
        fenced: [bool; 2],
        started: [Option<i64>; 2],
        now: i64,
    }

    impl Oracle {
        fn end(&mut self, p: usize, kind: ControlKind) {
            for fates in &mut self.fates {
                let mut wrote = false;
                for fate in fates.iter_mut() {
                    if *fate == Fate::Open(p) {
                        wrote = true;
                        *fate = match kind {
                            ControlKind::Commit => Fate::Committed,
                            ControlKind::Abort => Fate::Aborted,
                        };
                    }
                }
                if wrote {
                    fates.push(Fate::Marker(kind));
                }
            }
            self.started[p] = None;
        }

        /// What a call by producer `p`'s current handle must fail with, if
        /// anything, before it looks at the transaction.
        fn fencing(&self, p: usize) -> Option<ModelError> {
            self.fenced[p].then(|| ModelError::Fenced {
                transactional_id: name(p),
                epoch: self.handles[p].epoch,
                current_epoch: self.handles[p].epoch + 1,
            })
        }

        fn no_txn(&self, p: usize) -> Option<ModelError> {
            self.fencing(p).or_else(|| {
                self.started[p]
                    .is_none()
                    .then(|| ModelError::NoOpenTransaction {
                        transactional_id: name(p),
                    })
            })
        }
    }

    fn name(p: usize) -> String {
        format!("txn-{p}")
    }

    fn expect_unit(result: Result<(), ModelError>, expected: Option<ModelError>) {
        match expected {
            Some(err) => assert_eq!(result, Err(err)),
            None => assert_eq!(result, Ok(())),
        }
    }

    fn check(c: &Cluster, o: &Oracle) {
        for k in 0..PARTITIONS {
            let t = Tp::new("t", k);
            let fates = &o.fates[k as usize];
            let entries = c.entries(&t).unwrap();
            assert_eq!(entries.len(), fates.len(), "offsets are consecutive");
            assert_eq!(c.high_watermark(&t).unwrap(), fates.len() as u64);
            for (entry, fate) in entries.iter().zip(fates) {
                match (entry, fate) {
                    (Entry::Control { kind, .. }, Fate::Marker(expected)) => {
                        assert_eq!(kind, expected)
                    }
                    (Entry::Data { .. }, Fate::Committed | Fate::Open(_) | Fate::Aborted) => {}
                    other => panic!("entry and fate disagree: {other:?}"),
                }
            }
            let lso = fates
                .iter()
                .position(|f| matches!(f, Fate::Open(_)))
                .unwrap_or(fates.len()) as u64;
            assert_eq!(c.last_stable_offset(&t).unwrap(), lso);

            let f = c
                .fetch(&t, 0, usize::MAX, Isolation::ReadCommitted)
                .unwrap();
            let visible: Vec<u64> = (0..lso)
                .filter(|&o| fates[o as usize] == Fate::Committed)
                .collect();
            let got: Vec<u64> = f.records.iter().map(|r| r.offset).collect();
            assert_eq!(
                got, visible,
                "read_committed returns exactly the committed records below the LSO"
            );
            assert_eq!(f.next_offset, lso);

            let f = c
                .fetch(&t, 0, usize::MAX, Isolation::ReadUncommitted)
                .unwrap();
            let data: Vec<u64> = (0..fates.len() as u64)
                .filter(|&o| !matches!(fates[o as usize], Fate::Marker(_)))
                .collect();
            let got: Vec<u64> = f.records.iter().map(|r| r.offset).collect();
            assert_eq!(got, data);
        }
        let open: Vec<String> = (0..2)
            .filter(|&p| o.started[p].is_some())
            .map(name)
            .collect();
        assert_eq!(c.open_transactions(), open);
    }

    fn partial_fetch(c: &Cluster, o: &Oracle, k: u32, from_seed: u64, max: usize) {
        let t = Tp::new("t", k);
        let fates = &o.fates[k as usize];
        let hw = fates.len() as u64;
        let from = from_seed % (hw + 1);
        let f = c.fetch(&t, from, max, Isolation::ReadCommitted).unwrap();
        let lso = f.last_stable_offset;
        assert!(f.records.len() <= max);
        assert!(f.next_offset >= from);
        assert!(f.next_offset <= lso.max(from));
        let got: Vec<u64> = f.records.iter().map(|r| r.offset).collect();
        for &offset in &got {
            assert!(
                offset >= from && offset < lso,
                "offset {offset} outside [{from}, {lso})"
            );
            assert_eq!(fates[offset as usize], Fate::Committed, "offset {offset}");
        }
        // No committed record in [from, next_offset) was skipped.
        let expected: Vec<u64> = (from..f.next_offset)
            .filter(|&o| fates[o as usize] == Fate::Committed)
            .collect();
        assert_eq!(got, expected);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn read_committed_never_sees_aborted_or_unstable_records(
            ops in proptest::collection::vec(op(), 1..80)
        ) {
            let mut c = Cluster::with_transaction_timeout(TIMEOUT_MS);
            c.create_topic("t", PARTITIONS).unwrap();
            let handles = [c.init_producer(&name(0), 0), c.init_producer(&name(1), 0)];
            let mut o = Oracle {
                fates: vec![Vec::new(); PARTITIONS as usize],
                handles,
                stale: [None; 2],
                fenced: [false; 2],
                started: [None; 2],
                now: 0,
            };
            let mut counter = 0u64;
            for op in ops {
                counter += 1;
                let value = rec(&counter.to_string());
                match op {
                    Op::Begin(p) => {
                        let expected = o.fencing(p).or_else(|| {
                            o.started[p].map(|_| ModelError::TransactionAlreadyOpen {
                                transactional_id: name(p),
                            })
                        });
                        let ok = expected.is_none();
                        expect_unit(c.begin(o.handles[p], o.now), expected);
                        if ok {
                            o.started[p] = Some(o.now);
                        }
                    }
                    Op::Send(p, k) => {
                        let result = c.send(o.handles[p], &Tp::new("t", k), value);
                        match o.no_txn(p) {
                            Some(err) => prop_assert_eq!(result, Err(err)),
                            None => {
                                let fates = &mut o.fates[k as usize];
                                prop_assert_eq!(result, Ok(fates.len() as u64));
                                fates.push(Fate::Open(p));
                            }
                        }
                    }
                    Op::Commit(p) | Op::Abort(p) => {
                        let kind = if matches!(op, Op::Commit(_)) {
                            ControlKind::Commit
                        } else {
                            ControlKind::Abort
                        };
                        let result = match kind {
                            ControlKind::Commit => c.commit(o.handles[p]),
                            ControlKind::Abort => c.abort(o.handles[p]),
                        };
                        let expected = o.no_txn(p);
                        let ok = expected.is_none();
                        expect_unit(result, expected);
                        if ok {
                            o.end(p, kind);
                        }
                    }
                    Op::Append(k) => {
                        let fates = &mut o.fates[k as usize];
                        prop_assert_eq!(c.append(&Tp::new("t", k), value), Ok(fates.len() as u64));
                        fates.push(Fate::Committed);
                    }
                    Op::Reinit(p) => {
                        if o.started[p].is_some() {
                            o.end(p, ControlKind::Abort);
                        }
                        let fresh = c.init_producer(&name(p), o.now);
                        let bump = if o.fenced[p] { 2 } else { 1 };
                        prop_assert_eq!(fresh.epoch, o.handles[p].epoch + bump);
                        o.stale[p] = Some(o.handles[p]);
                        o.handles[p] = fresh;
                        o.fenced[p] = false;
                    }
                    Op::Zombie(p, k) => {
                        if let Some(stale) = o.stale[p] {
                            let result = c.send(stale, &Tp::new("t", k), value);
                            prop_assert!(
                                matches!(result, Err(ModelError::Fenced { .. })),
                                "a stale handle must be fenced, got {:?}",
                                result
                            );
                        }
                    }
                    Op::Tick(ms) => {
                        o.now += ms;
                        let mut expected = Vec::new();
                        for p in 0..2 {
                            if o.started[p].is_some_and(|s| o.now - s > TIMEOUT_MS) {
                                o.end(p, ControlKind::Abort);
                                o.fenced[p] = true;
                                expected.push(name(p));
                            }
                        }
                        prop_assert_eq!(c.expire_transactions(o.now), expected);
                    }
                    Op::Fetch(k, from_seed, max) => partial_fetch(&c, &o, k, from_seed, max),
                }
                check(&c, &o);
            }
        }
    }
}

/// Kafka's `offset.metadata.max.bytes` (4096 by default): longer offset
/// metadata is refused, and nothing is staged.
#[test]
fn offset_metadata_longer_than_the_broker_limit_is_refused() {
    let mut cluster = Cluster::new();
    cluster.create_topic("in", 1).unwrap();
    let tp = Tp::new("in", 0);
    let producer = cluster.init_producer("limit", 0);
    cluster.begin(producer, 0).unwrap();
    let too_long = CommittedOffset::new(1, "x".repeat(4097));
    let error = cluster
        .send_offsets(producer, "g", &[(tp.clone(), too_long)])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "offset metadata for in-0 is 4097 bytes, more than the broker's 4096 (offset.metadata.max.bytes)"
    );
    cluster
        .send_offsets(
            producer,
            "g",
            &[(tp.clone(), CommittedOffset::new(1, "x".repeat(4096)))],
        )
        .unwrap();
    cluster.commit(producer).unwrap();
    assert_eq!(
        cluster
            .committed("g", &tp)
            .map(|committed| committed.metadata.len()),
        Some(4096)
    );
}
