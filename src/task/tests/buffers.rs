//! The driver's buffers ([`Task`](crate::task::Task)'s documentation): each
//! output's method does with the driver's buffer what the docs say, so a
//! driver that keeps its buffers gets what a fresh one would.

use super::fixtures::*;
use crate::task::{CommitRequest, Fetched};

/// `handle_fetched` empties the fetch, `deliverable` clears and refills,
/// `deliver` appends, `prepare_commit` overwrites its request and appends
/// its changelog records: the same outputs as fresh buffers give.
#[test]
fn kept_buffers_give_what_fresh_ones_give() {
    let f = fixture(echo(&[orders(), payments()], true));
    let mut task = f.started(0);
    let mut fresh = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    let mut fetched = Fetched {
        records: vec![rec(0).0, rec(1).0],
        next_offset: 2,
        log_end: 2,
    };
    task.handle_fetched(&o, &mut fetched);
    assert!(fetched.records.is_empty());
    assert!(fetched.records.capacity() >= 2, "the list keeps its room");
    feed(&mut fresh, &o, vec![rec(0), rec(1)], 2);
    fetched.records.push(rec(0).0);
    (fetched.next_offset, fetched.log_end) = (1, 1);
    task.handle_fetched(&p, &mut fetched);
    feed(&mut fresh, &p, vec![rec(0)], 1);

    let mut ready = vec![tp(REFUNDS, 1)];
    task.deliverable(0, &mut ready).unwrap();
    assert_eq!(ready, [o.clone(), p.clone()]);
    assert_eq!(ready, fresh.ready().unwrap());

    // What the driver has not sent yet: a record of an earlier delivery.
    let earlier = changelog_record(0, &key_slot("a"), Some(1), T0);
    let mut produced = vec![earlier.clone()];
    task.deliver(&o, &mut produced).unwrap();
    task.deliver(&p, &mut produced).unwrap();
    let mut expected = vec![earlier];
    expected.extend(fresh.delivered(&o).unwrap());
    expected.extend(fresh.delivered(&p).unwrap());
    assert_eq!(produced, expected, "appended after what the driver held");

    let (tick, stamp) = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), stamp, "the stamp is the header's");
    assert_eq!(Some(tick), fresh.tick(T0 + INTERVAL_MS));

    let mut request = CommitRequest {
        group: "another".into(),
        offsets: vec![(tp(REFUNDS, 1), 9); 4],
        metadata: "stale".into(),
    };
    let mut changes = vec![changelog_record(0, &key_slot("z"), Some(9), T0)];
    task.prepare_commit(&mut request, &mut changes).unwrap();
    let (fresh_request, fresh_changes) = fresh.committing_changes().unwrap();
    assert_eq!(request, fresh_request);
    assert_eq!(
        changes[1..],
        fresh_changes[..],
        "appended after what the driver held"
    );
}
