//! Ordering, determinism, the topic list, error messages: the model's own
//! bookkeeping (topic refusals are in the table, `fidelity/cases.rs`).

use parsley::Tp;

use super::fixtures::*;
use crate::model::*;

/// Model only: the append sequence is the model's bookkeeping, for its
/// checker; Kafka has none.
///
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

/// Model only: a broker's producer ids and timing differ from run to run.
///
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

/// Model only: a broker lists every topic of every test; the table's
/// `topics_are_created_once` pins the refusals on both.
///
/// The topic list is sorted by name, with partition counts; a topic refused
/// is not in it.
#[test]
fn topics_are_listed_sorted_by_name() {
    let mut c = Cluster::new();
    c.create_topic("zeta", 2).unwrap();
    c.create_topic("alpha", 1).unwrap();
    assert!(matches!(
        c.create_topic("zeta", 4),
        Err(ModelError::TopicExists { .. })
    ));
    assert!(matches!(
        c.create_topic("empty", 0),
        Err(ModelError::InvalidPartitionCount { .. })
    ));
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

/// Model only: these are the model's messages; the table asserts the few a
/// broker's client words alike (out of range, topic refusals).
///
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
