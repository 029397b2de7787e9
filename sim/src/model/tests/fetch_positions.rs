//! Fetch positions: `next_offset`, `max_records`, the log end.

use super::fixtures::*;
use crate::model::*;

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
