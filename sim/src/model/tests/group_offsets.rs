//! Group offsets: stable lookups against late markers, and what the model
//! refuses of `send_offsets` (staging and committing them is in the table,
//! `fidelity/cases.rs`).

use parsley::Tp;

use super::fixtures::*;
use crate::model::*;

/// Model only: it ends with a commit whose markers are written later, which
/// only the model can hold back; the rest is the table's
/// `group_offsets_are_invisible_until_commit`, on the broker too.
///
/// KIP-447: while a transaction holding a group's offsets on a tp is open,
/// a stable (`read_committed`) lookup of that group's offset on that tp
/// waits (the broker answers UNSTABLE_OFFSET_COMMIT); other groups and tps
/// answer at once, and so does the plain lookup.
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

/// Model only: the model writes the markers when told; a broker's lag is its
/// own (the broker-only `markers_land_after_commit_returns_and_pin_the_lso_until_then`).
///
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

/// Model only: late markers, as above.
///
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

/// Model only: late markers, as above.
///
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

/// Model only: what a broker answers to offsets of a partition it does not
/// have (TxnOffsetCommit, UNKNOWN_TOPIC_OR_PARTITION, retried) is not pinned.
///
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

/// Model only: after the refusal the model lets the transaction go on and
/// commit; librdkafka makes it abortable, so the table's
/// `offset_metadata_over_the_broker_limit_is_refused` aborts it on both.
///
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
