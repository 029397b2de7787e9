//! Fetch positions under `max_records` (the rest of `next_offset` and the
//! log end are in the table, `fidelity/cases.rs`).

use super::fixtures::*;
use crate::model::*;

/// Model only: the live client's fetch returns everything visible, with no
/// bound on the records (`max.poll.records` is the consumer's own).
///
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
