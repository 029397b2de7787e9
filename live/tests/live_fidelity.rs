//! Model fidelity: the transactional cases of the in-memory Kafka model
//! (`sim/src/model/tests/`), run against a real broker through the live
//! adapter, asserting the same observations.
//!
//! The root crate cannot depend on `parsley-sim` (it depends on us), so each
//! test cites the model test it mirrors and repeats its expected numbers;
//! when a model test changes, the test here must change with it, or one of
//! the two is no longer faithful.
//!
//! Where the real broker does something the model does not, the test pins
//! the broker's behaviour and says so (search for "Broker, not model").
//!
//! The broker: `export "$(bash scripts/kafka/broker.sh start)"` sets
//! `KAFKA_BOOTSTRAP_SERVERS`. Without it these tests print a note and pass,
//! unless `CI` is set, where they fail. Every test makes its own topics,
//! groups and transactional ids, so they run in parallel on one broker.

use std::time::{Duration, Instant};

use bytes::Bytes;
use parsley::task::CommittedOffset;
use parsley::{ConsumedRecord, Header, RecordData, Tp};
use parsley_live::{Isolation, LiveClient, LiveConfig, LiveError, TxnErrorClass, TxnProducer};
use rdkafka::error::RDKafkaErrorCode;

// ----- set-up -----

mod support;

use support::{live_config, now_ms, unique};

/// The model's `rec`, with the wall-clock time as timestamp: a record with
/// timestamp 0 would be older than any retention and could be deleted.
fn rec(value: &str) -> RecordData {
    RecordData {
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
        timestamp: now_ms(),
    }
}

fn pairs(items: &[(u64, &str)]) -> Vec<(u64, String)> {
    items.iter().map(|&(o, v)| (o, v.to_owned())).collect()
}

fn offsets_and_values(records: &[ConsumedRecord]) -> Vec<(u64, String)> {
    records
        .iter()
        .map(|r| {
            let value = r.data.value.as_deref().unwrap_or_default();
            (r.offset, String::from_utf8_lossy(value).into_owned())
        })
        .collect()
}

/// One test's corner of the broker: the model's `cluster()` — a topic `in`
/// of 1 partition and `out` of 2 — under unique names, and helpers that read
/// like the model's tests.
struct World {
    client: LiveClient,
    input: String,
    output: String,
    group: String,
}

impl World {
    async fn new(config: LiveConfig) -> World {
        let client = LiveClient::new(config).expect("live client");
        let (input, output) = (unique("in"), unique("out"));
        client.create_topic(&input, 1).await.expect("create in");
        client.create_topic(&output, 2).await.expect("create out");
        World {
            client,
            input,
            output,
            group: unique("group"),
        }
    }

    fn input(&self) -> Tp {
        Tp::new(self.input.as_str(), 0)
    }

    fn out(&self, partition: u32) -> Tp {
        Tp::new(self.output.as_str(), partition)
    }

    /// A transactional id of this test: `name` made unique.
    fn txn_id(&self, name: &str) -> String {
        format!("{}-{name}", self.group)
    }

    async fn producer(&self, name: &str) -> TxnProducer {
        self.client
            .producer(&self.txn_id(name))
            .await
            .expect("init producer")
    }

    /// Everything visible at `isolation` from `from`, as the model's fetch
    /// with `usize::MAX` records.
    async fn fetch(&self, tp: &Tp, from: u64, isolation: Isolation) -> parsley_live::LiveFetch {
        let mut consumer = self
            .client
            .consumer(&unique("reader"), isolation)
            .expect("consumer");
        consumer.fetch(tp, from).await.expect("fetch")
    }

    async fn committed_view(&self, tp: &Tp) -> Vec<(u64, String)> {
        offsets_and_values(&self.fetch(tp, 0, Isolation::ReadCommitted).await.records)
    }

    async fn uncommitted_view(&self, tp: &Tp) -> Vec<(u64, String)> {
        offsets_and_values(&self.fetch(tp, 0, Isolation::ReadUncommitted).await.records)
    }

    /// Waits for the markers of a transaction that just ended (see
    /// [`LiveClient::wait_stable`]) and returns the LSO, or fails the test.
    async fn settle(&self, tp: &Tp, lso: u64) -> u64 {
        let started = Instant::now();
        let marks = self.client.wait_stable(tp, lso).await.expect("stable");
        let waited = started.elapsed();
        if waited > Duration::from_millis(5) {
            eprintln!("note: {tp}: the LSO reached {lso} {waited:?} after the call returned");
        }
        marks.last_stable_offset
    }

    async fn hwm(&self, tp: &Tp) -> u64 {
        self.client
            .watermarks(tp)
            .await
            .expect("watermarks")
            .high_watermark
    }

    async fn lso(&self, tp: &Tp) -> u64 {
        self.client
            .watermarks(tp)
            .await
            .expect("watermarks")
            .last_stable_offset
    }

    async fn committed(
        &self,
        group: &str,
        tp: &Tp,
        isolation: Isolation,
    ) -> Option<CommittedOffset> {
        let consumer = self.client.consumer(group, isolation).expect("consumer");
        let mut found = consumer
            .committed(std::slice::from_ref(tp))
            .await
            .expect("committed offsets");
        found.pop().expect("one answer per tp")
    }
}

/// `let world = world!();` sets up a [`World`] or returns early (skip).
macro_rules! world {
    () => {
        match live_config() {
            Some(config) => World::new(config).await,
            None => return,
        }
    };
}

// ----- offsets: markers take offsets -----

/// Mirrors `committed_record_after_one_aborted_record_lands_at_offset_2`:
/// x at 0 aborted, its marker at 1, y at 2, its marker at 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_record_after_one_aborted_record_lands_at_offset_2() {
    let w = world!();
    let t = w.input();
    let p = w.producer("p").await;
    p.begin().unwrap();
    assert_eq!(p.send(&t, &rec("x")).await.unwrap(), 0);
    p.abort().await.unwrap();
    p.begin().unwrap();
    assert_eq!(p.send(&t, &rec("y")).await.unwrap(), 2);
    p.commit().await.unwrap();

    assert_eq!(w.settle(&t, 4).await, 4);
    assert_eq!(w.committed_view(&t).await, pairs(&[(2, "y")]));
    assert_eq!(w.uncommitted_view(&t).await, pairs(&[(0, "x"), (2, "y")]));
    assert_eq!(w.hwm(&t).await, 4);
}

/// Mirrors `committed_record_after_aborted_two_record_transaction_lands_at_offset_3`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_record_after_aborted_two_record_transaction_lands_at_offset_3() {
    let w = world!();
    let t = w.input();
    let p = w.producer("p").await;
    p.begin().unwrap();
    assert_eq!(p.send(&t, &rec("x1")).await.unwrap(), 0);
    assert_eq!(p.send(&t, &rec("x2")).await.unwrap(), 1);
    p.abort().await.unwrap();
    p.begin().unwrap();
    assert_eq!(p.send(&t, &rec("y")).await.unwrap(), 3);
    p.commit().await.unwrap();
    w.settle(&t, 5).await;
    assert_eq!(w.committed_view(&t).await, pairs(&[(3, "y")]));
}

/// Mirrors `next_offset_moves_past_markers_and_aborted_records`: the
/// position moves past skipped markers and aborted records, never past the
/// LSO; `read_uncommitted` skips markers only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_offset_moves_past_markers_and_aborted_records() {
    let w = world!();
    let t = w.input();
    let p = w.producer("p").await;
    // One consumer for every read_committed fetch, as a task has: each fetch
    // reassigns it, and its position must follow the new start offset.
    let mut reader = w
        .client
        .consumer(&w.group, Isolation::ReadCommitted)
        .unwrap();
    p.begin().unwrap();
    p.send(&t, &rec("x1")).await.unwrap(); // 0
    p.send(&t, &rec("x2")).await.unwrap(); // 1
    p.abort().await.unwrap(); // 2
    w.settle(&t, 3).await;
    let f = reader.fetch(&t, 0).await.unwrap();
    assert!(f.records.is_empty());
    assert_eq!(f.next_offset, 3);

    p.begin().unwrap();
    p.send(&t, &rec("y")).await.unwrap(); // 3
    p.commit().await.unwrap(); // 4
    w.settle(&t, 5).await;
    let f = reader.fetch(&t, 0).await.unwrap();
    assert_eq!(offsets_and_values(&f.records), pairs(&[(3, "y")]));
    assert_eq!(f.next_offset, 5);

    // Another transaction opens at 5: the position stops at the LSO.
    p.begin().unwrap();
    p.send(&t, &rec("z")).await.unwrap(); // 5
    let f = reader.fetch(&t, 4).await.unwrap();
    assert!(f.records.is_empty());
    assert_eq!((f.next_offset, f.last_stable_offset), (5, 5));
    // Back to the start: the consumer was at 5, now it reads from 0 again.
    let f = reader.fetch(&t, 0).await.unwrap();
    assert_eq!(offsets_and_values(&f.records), pairs(&[(3, "y")]));
    assert_eq!(f.next_offset, 5);

    // read_uncommitted skips markers only.
    let f = w.fetch(&t, 0, Isolation::ReadUncommitted).await;
    assert_eq!(
        offsets_and_values(&f.records),
        pairs(&[(0, "x1"), (1, "x2"), (3, "y"), (5, "z")])
    );
    assert_eq!(f.next_offset, 6);
    p.abort().await.unwrap();
}

/// Mirrors `markers_are_written_on_every_partition_the_transaction_touched`:
/// out-0 gets [txn, txn, COMMIT], out-1 [txn, COMMIT], so a plain record
/// after the marker on out-1 is at offset 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_are_written_on_every_partition_the_transaction_touched() {
    let w = world!();
    let (o0, o1, i) = (w.out(0), w.out(1), w.input());
    let p = w.producer("p").await;
    p.begin().unwrap();
    assert_eq!(p.send(&o0, &rec("a")).await.unwrap(), 0);
    assert_eq!(p.send(&o1, &rec("b")).await.unwrap(), 0);
    assert_eq!(p.send(&o0, &rec("c")).await.unwrap(), 1);
    p.commit().await.unwrap();
    assert_eq!(w.settle(&o0, 3).await, 3);
    assert_eq!(w.settle(&o1, 2).await, 2);
    assert_eq!(
        w.hwm(&i).await,
        0,
        "a partition the transaction never touched"
    );
    let plain = w.client.plain_producer().unwrap();
    assert_eq!(plain.append(&o1, &rec("d")).await.unwrap(), 2);
    assert_eq!(w.committed_view(&o0).await, pairs(&[(0, "a"), (1, "c")]));
    assert_eq!(w.committed_view(&o1).await, pairs(&[(0, "b"), (2, "d")]));
}

// ----- visibility -----

/// Mirrors `read_committed_sees_only_committed_read_uncommitted_sees_all`:
/// plain@0, committed@1 (marker 2), aborted@3 (marker 4), open@5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_sees_only_committed_read_uncommitted_sees_all() {
    let w = world!();
    let t = w.input();
    let plain = w.client.plain_producer().unwrap();
    assert_eq!(plain.append(&t, &rec("plain")).await.unwrap(), 0);

    let a = w.producer("a").await;
    a.begin().unwrap();
    assert_eq!(a.send(&t, &rec("committed")).await.unwrap(), 1);
    a.commit().await.unwrap();
    w.settle(&t, 3).await;

    let b = w.producer("b").await;
    b.begin().unwrap();
    assert_eq!(b.send(&t, &rec("aborted")).await.unwrap(), 3);
    b.abort().await.unwrap();
    w.settle(&t, 5).await;

    let open = w.producer("open").await;
    open.begin().unwrap();
    assert_eq!(open.send(&t, &rec("open")).await.unwrap(), 5);

    assert_eq!(
        w.committed_view(&t).await,
        pairs(&[(0, "plain"), (1, "committed")])
    );
    assert_eq!(
        w.uncommitted_view(&t).await,
        pairs(&[(0, "plain"), (1, "committed"), (3, "aborted"), (5, "open")])
    );
    assert_eq!((w.lso(&t).await, w.hwm(&t).await), (5, 6));
    open.abort().await.unwrap();
}

/// Not in the model's tests, but what the model stores: a record comes back
/// as it was sent — key, value, headers (repeated names, order kept),
/// timestamp — and a null value (a changelog tombstone) stays null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_round_trip_with_key_headers_timestamp_and_tombstones() {
    let w = world!();
    let t = w.out(1);
    let full = RecordData {
        key: Some(Bytes::from_static(b"key")),
        value: Some(Bytes::from_static(b"\x00\x01binary\xff")),
        headers: vec![
            Header {
                name: "parsley-stamp".into(),
                value: Bytes::from_static(b"\x01\x02\x03"),
            },
            Header {
                name: "dup".into(),
                value: Bytes::from_static(b"first"),
            },
            Header {
                name: "dup".into(),
                value: Bytes::from_static(b"second"),
            },
        ],
        timestamp: 1_700_000_000_123,
    };
    let tombstone = RecordData {
        key: Some(Bytes::from_static(b"gone")),
        value: None,
        headers: Vec::new(),
        timestamp: now_ms(),
    };
    let p = w.producer("p").await;
    p.begin().unwrap();
    assert_eq!(p.send(&t, &full).await.unwrap(), 0);
    assert_eq!(p.send(&t, &tombstone).await.unwrap(), 1);
    p.commit().await.unwrap();
    w.settle(&t, 3).await;
    let f = w.fetch(&t, 0, Isolation::ReadCommitted).await;
    let got: Vec<_> = f
        .records
        .iter()
        .map(|r| (r.offset, r.data.clone()))
        .collect();
    assert_eq!(got, vec![(0, full), (1, tombstone)]);
    assert_eq!(f.next_offset, 3);
}

// ----- the last stable offset and hanging transactions -----

/// The model's `hanging`: producer `hang` opens a transaction on `in-0` at
/// offset 0; then a plain record (1) and a committed transaction of `other`
/// (2, marker 3) follow it.
async fn hanging(w: &World) -> TxnProducer {
    let t = w.input();
    let hang = w.producer("hang").await;
    hang.begin().unwrap();
    assert_eq!(hang.send(&t, &rec("hanging")).await.unwrap(), 0);
    let plain = w.client.plain_producer().unwrap();
    assert_eq!(plain.append(&t, &rec("plain")).await.unwrap(), 1);
    let other = w.producer("other").await;
    other.begin().unwrap();
    assert_eq!(other.send(&t, &rec("other")).await.unwrap(), 2);
    other.commit().await.unwrap();
    // The commit marker of `other` is at 3 once written: wait for it (the
    // LSO cannot show it, it stays at 0).
    let started = Instant::now();
    while w.hwm(&t).await < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "marker of `other`"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hang
}

/// Mirrors `open_transaction_stalls_read_committed_at_the_lso`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_transaction_stalls_read_committed_at_the_lso() {
    let w = world!();
    let t = w.input();
    let hang = hanging(&w).await;

    let f = w.fetch(&t, 0, Isolation::ReadCommitted).await;
    assert!(f.records.is_empty());
    assert_eq!(
        (f.next_offset, f.last_stable_offset, f.high_watermark),
        (0, 0, 4)
    );
    assert_eq!(w.lso(&t).await, 0);
    assert_eq!(
        w.uncommitted_view(&t).await,
        pairs(&[(0, "hanging"), (1, "plain"), (2, "other")])
    );
    // A consumer already past the LSO stays where it is.
    let f = w.fetch(&t, 2, Isolation::ReadCommitted).await;
    assert!(f.records.is_empty());
    assert_eq!(f.next_offset, 2);
    hang.abort().await.unwrap();
}

/// Mirrors `lso_is_the_earliest_open_transaction`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lso_is_the_earliest_open_transaction() {
    let w = world!();
    let t = w.input();
    let a = w.producer("a").await;
    let b = w.producer("b").await;
    let plain = w.client.plain_producer().unwrap();
    assert_eq!(plain.append(&t, &rec("p0")).await.unwrap(), 0);
    a.begin().unwrap();
    b.begin().unwrap();
    assert_eq!(a.send(&t, &rec("a1")).await.unwrap(), 1);
    assert_eq!(b.send(&t, &rec("b2")).await.unwrap(), 2);
    assert_eq!(a.send(&t, &rec("a3")).await.unwrap(), 3);
    assert_eq!(w.lso(&t).await, 1);
    a.commit().await.unwrap(); // marker at 4
    assert_eq!(w.settle(&t, 2).await, 2);
    assert_eq!(w.committed_view(&t).await, pairs(&[(0, "p0"), (1, "a1")]));
    b.abort().await.unwrap(); // marker at 5
    assert_eq!(w.settle(&t, 6).await, 6);
    assert_eq!(
        w.committed_view(&t).await,
        pairs(&[(0, "p0"), (1, "a1"), (3, "a3")])
    );
}

/// Mirrors `stall_clears_on_commit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_clears_on_commit() {
    let w = world!();
    let t = w.input();
    let hang = hanging(&w).await;
    hang.commit().await.unwrap();
    assert_eq!(w.settle(&t, 5).await, 5);
    assert_eq!(
        w.committed_view(&t).await,
        pairs(&[(0, "hanging"), (1, "plain"), (2, "other")])
    );
}

/// Mirrors `stall_clears_on_abort`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_clears_on_abort() {
    let w = world!();
    let t = w.input();
    let hang = hanging(&w).await;
    hang.abort().await.unwrap();
    assert_eq!(w.settle(&t, 5).await, 5);
    assert_eq!(
        w.committed_view(&t).await,
        pairs(&[(1, "plain"), (2, "other")])
    );
}

/// Mirrors `stall_clears_when_init_producer_fences_the_old_producer`: the
/// new producer's init aborts the old transaction (marker at 4), and it has
/// done so by the time init returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_clears_when_init_producer_fences_the_old_producer() {
    let w = world!();
    let t = w.input();
    let _hang = hanging(&w).await;
    let _fresh = w.producer("hang").await;
    assert_eq!(w.lso(&t).await, 5, "init returns after the abort marker");
    assert_eq!(w.hwm(&t).await, 5);
    assert_eq!(
        w.committed_view(&t).await,
        pairs(&[(1, "plain"), (2, "other")])
    );
}

/// Mirrors `stall_clears_when_the_transaction_times_out` and
/// `timed_out_producer_is_fenced_until_reinitialised`, with a 3 s
/// `transaction.timeout.ms` for the model's 10 s: the broker aborts the
/// hanging transaction (marker at 4), bumps the producer's epoch, so its next
/// send and its commit fail fenced, and a re-initialised producer's record
/// lands at 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_clears_when_the_transaction_times_out() {
    let Some(config) = live_config() else {
        return;
    };
    let timeout = Duration::from_secs(3);
    let w = World::new(config.with_transaction_timeout(timeout)).await;
    let t = w.input();
    let before = Instant::now();
    let hang = hanging(&w).await;
    // The transaction began after `before`: if well under the timeout has
    // passed since, the broker cannot have aborted it yet (on a machine so
    // slow that it may have, the check would be a race, so it is skipped).
    let lso = w.lso(&t).await;
    if before.elapsed() < timeout - Duration::from_secs(1) {
        assert_eq!(lso, 0, "not a moment before the timeout");
    }
    let started = Instant::now();
    assert_eq!(w.settle(&t, 5).await, 5);
    eprintln!(
        "note: the broker aborted the timed-out transaction {:?} after the check",
        started.elapsed()
    );
    assert_eq!(w.hwm(&t).await, 5);
    assert_eq!(
        w.committed_view(&t).await,
        pairs(&[(1, "plain"), (2, "other")])
    );

    for (call, result) in [
        ("send", hang.send(&t, &rec("late")).await.map(drop)),
        ("commit", hang.commit().await),
    ] {
        let error = result.expect_err(call);
        assert_eq!(
            error.txn_class(),
            Some(TxnErrorClass::Fatal),
            "{call}: {error}"
        );
        assert!(error.is_fenced(), "{call}: {error}");
    }

    let again = w.producer("hang").await;
    again.begin().unwrap();
    assert_eq!(again.send(&t, &rec("again")).await.unwrap(), 5);
    again.commit().await.unwrap();
    w.settle(&t, 7).await;
    assert_eq!(
        w.committed_view(&t).await,
        pairs(&[(1, "plain"), (2, "other"), (5, "again")])
    );
}

// ----- fencing -----

/// Mirrors `fenced_producer_fails_and_its_open_transaction_is_aborted`
/// (Kafka's `testFencingOnCommit`): once a new producer with the same
/// transactional id is initialised, the old one cannot commit — a fatal,
/// fenced error — its open transaction is aborted, its offsets dropped, and
/// the new one works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_producer_fails_and_its_open_transaction_is_aborted() {
    let w = world!();
    let t = w.out(0);
    let input = w.input();
    let old = w.producer("task-0").await;
    old.begin().unwrap();
    assert_eq!(old.send(&t, &rec("zombie")).await.unwrap(), 0);
    old.send_offsets(&w.group, &[(input.clone(), CommittedOffset::new(7, ""))])
        .await
        .unwrap();

    let new = w.producer("task-0").await;
    let error = old
        .commit()
        .await
        .expect_err("a fenced producer cannot commit");
    assert_eq!(error.txn_class(), Some(TxnErrorClass::Fatal), "{error}");
    assert!(error.is_fenced(), "{error}");
    assert!(error.to_string().contains(&w.txn_id("task-0")), "{error}");

    // The model fails every later call of the old handle with `Fenced`.
    // librdkafka remembers the fatal error: every transactional call fails
    // with it, fenced, without asking the broker.
    let later = [
        ("send", old.send(&t, &rec("more")).await.map(drop)),
        ("abort", old.abort().await),
        ("begin", old.begin()),
        (
            "send_offsets",
            old.send_offsets(&w.group, &[(input.clone(), CommittedOffset::new(8, ""))])
                .await,
        ),
    ];
    for (call, result) in later {
        let error: LiveError = result.expect_err(call);
        assert_eq!(
            error.txn_class(),
            Some(TxnErrorClass::Fatal),
            "{call}: {error}"
        );
        assert!(error.is_fenced(), "{call}: {error}");
    }

    // kinds: [txn, ABORT]
    assert_eq!(w.hwm(&t).await, 2);
    assert_eq!(w.uncommitted_view(&t).await, pairs(&[(0, "zombie")]));
    assert!(w.committed_view(&t).await.is_empty());
    assert_eq!(
        w.committed(&w.group, &input, Isolation::ReadCommitted)
            .await,
        None
    );

    new.begin().unwrap();
    assert_eq!(new.send(&t, &rec("fresh")).await.unwrap(), 2);
    new.commit().await.unwrap();
    w.settle(&t, 4).await;
    assert_eq!(w.committed_view(&t).await, pairs(&[(2, "fresh")]));
}

/// Mirrors `a_commit_with_markers_written_later_becomes_visible_when_they_are`:
/// a broker answers the commit before its markers are on the partitions.
/// Until they are, the partition's last stable offset stays where the
/// transaction began and a `read_committed` fetch sees none of its records;
/// then it sees them all, never part. Over 20 transactions the lag after
/// `commit` returned is measured (the simulator's `marker_lag_ms` default
/// comes from such figures) and stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_land_after_commit_returns_and_pin_the_lso_until_then() {
    let w = world!();
    let t = w.out(0);
    let p = w.producer("lag").await;
    let mut lags = Vec::new();
    for _ in 0..20 {
        p.begin().unwrap();
        let first = p.send(&t, &rec("a")).await.unwrap();
        let last = p.send(&t, &rec("b")).await.unwrap();
        p.commit().await.unwrap();
        let returned = Instant::now();
        loop {
            let lso = w.lso(&t).await;
            assert!(
                lso == first || lso > last,
                "the LSO {lso} lies inside the transaction [{first}, {last}]"
            );
            let seen = w
                .fetch(&t, first, Isolation::ReadCommitted)
                .await
                .records
                .len();
            if lso > last {
                assert_eq!(
                    seen, 2,
                    "the LSO passed the transaction: both records are visible"
                );
                break;
            }
            assert!(
                seen == 0 || seen == 2,
                "a transaction is visible whole or not at all: {seen}"
            );
            assert!(
                returned.elapsed() < Duration::from_secs(10),
                "the markers never landed"
            );
        }
        lags.push(returned.elapsed());
    }
    lags.sort();
    eprintln!(
        "note: markers visible after commit returned: min {:?}, median {:?}, max {:?} (includes one watermark query)",
        lags[0],
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
}

// ----- group offsets -----

/// Mirrors `group_offsets_are_invisible_until_commit`; the metadata string
/// (a task's checkpoint) survives the round trip.
///
/// Broker, not model: while the transaction is open, a `read_committed`
/// consumer does not get the old offsets at once as the model's
/// `committed` does — it asks for stable offsets (KIP-447) and the broker
/// answers UNSTABLE_OFFSET_COMMIT until the transaction ends. A
/// `read_uncommitted` consumer gets the old ones (here none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_are_invisible_until_commit() {
    let w = world!();
    let input = w.input();
    let p = w.producer("p").await;
    p.begin().unwrap();
    p.send(&w.out(0), &rec("x")).await.unwrap();
    let metadata = "parsley1:00a1b2c3 checkpoint, with spaces and ünïcödé";
    p.send_offsets(
        &w.group,
        &[(input.clone(), CommittedOffset::new(5, metadata))],
    )
    .await
    .unwrap();
    assert_eq!(
        w.committed(&w.group, &input, Isolation::ReadUncommitted)
            .await,
        None
    );

    let impatient = LiveClient::new(
        w.client
            .config()
            .clone()
            .with_timeout(Duration::from_secs(2)),
    )
    .unwrap()
    .consumer(&w.group, Isolation::ReadCommitted)
    .unwrap();
    let started = Instant::now();
    let stable = impatient.committed(std::slice::from_ref(&input)).await;
    eprintln!(
        "note: read_committed committed() with the offsets pending: {stable:?} after {:?}",
        started.elapsed()
    );
    let error = stable.expect_err("pending offsets are not stable");
    assert_eq!(
        error.code(),
        Some(RDKafkaErrorCode::OperationTimedOut),
        "{error}"
    );

    p.commit().await.unwrap();
    assert_eq!(
        w.committed(&w.group, &input, Isolation::ReadCommitted)
            .await,
        Some(CommittedOffset::new(5, metadata))
    );
    assert_eq!(
        w.committed(&unique("other-group"), &input, Isolation::ReadCommitted)
            .await,
        None
    );
}

/// Mirrors `group_offsets_are_dropped_on_abort`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_are_dropped_on_abort() {
    let w = world!();
    let input = w.input();
    let p = w.producer("p").await;
    p.begin().unwrap();
    p.send_offsets(&w.group, &[(input.clone(), CommittedOffset::new(3, ""))])
        .await
        .unwrap();
    p.commit().await.unwrap();
    p.begin().unwrap();
    p.send_offsets(&w.group, &[(input.clone(), CommittedOffset::new(9, ""))])
        .await
        .unwrap();
    p.abort().await.unwrap();
    assert_eq!(
        w.committed(&w.group, &input, Isolation::ReadCommitted)
            .await,
        Some(CommittedOffset::new(3, ""))
    );
}

/// Mirrors `transaction_touching_no_partition_commits_offsets`: offsets
/// alone commit and write no markers; the last `send_offsets` per tp wins;
/// an empty transaction commits too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_touching_no_partition_commits_offsets() {
    let w = world!();
    let input = w.input();
    let p = w.producer("p").await;
    p.begin().unwrap();
    p.send_offsets(&w.group, &[(input.clone(), CommittedOffset::new(1, ""))])
        .await
        .unwrap();
    p.send_offsets(&w.group, &[(input.clone(), CommittedOffset::new(2, ""))])
        .await
        .unwrap();
    p.commit().await.unwrap();
    assert_eq!(
        w.committed(&w.group, &input, Isolation::ReadCommitted)
            .await,
        Some(CommittedOffset::new(2, ""))
    );
    for tp in [w.input(), w.out(0), w.out(1)] {
        assert_eq!(w.hwm(&tp).await, 0, "{tp} has no entries");
    }
    p.begin().unwrap();
    p.commit().await.unwrap();
}

/// Broker, not model: the broker refuses offset metadata longer than
/// `offset.metadata.max.bytes` (4096 by default); the model takes any
/// length. A task's checkpoint (the hex of its history stamp) must fit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_metadata_over_the_broker_limit_is_refused() {
    let w = world!();
    let input = w.input();
    let p = w.producer("p").await;
    let fits = "m".repeat(4096);
    p.begin().unwrap();
    p.send_offsets(
        &w.group,
        &[(input.clone(), CommittedOffset::new(1, fits.clone()))],
    )
    .await
    .unwrap();
    p.commit().await.unwrap();
    assert_eq!(
        w.committed(&w.group, &input, Isolation::ReadCommitted)
            .await,
        Some(CommittedOffset::new(1, fits.clone()))
    );

    p.begin().unwrap();
    let error = p
        .send_offsets(
            &w.group,
            &[(input.clone(), CommittedOffset::new(2, "m".repeat(4097)))],
        )
        .await
        .expect_err("metadata over the limit");
    assert_eq!(
        error.txn_class(),
        Some(TxnErrorClass::RequiresAbort),
        "{error}"
    );
    assert_eq!(error.code(), Some(RDKafkaErrorCode::OffsetMetadataTooLarge));
    assert!(!error.is_fenced());
    p.abort().await.unwrap();
    assert_eq!(
        w.committed(&w.group, &input, Isolation::ReadCommitted)
            .await,
        Some(CommittedOffset::new(1, fits))
    );
}

// ----- fetch edges, topics -----

/// Mirrors `fetch_at_log_end_is_empty_and_beyond_is_out_of_range`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_at_log_end_is_empty_and_beyond_is_out_of_range() {
    let w = world!();
    let t = w.input();
    let plain = w.client.plain_producer().unwrap();
    assert_eq!(plain.append(&t, &rec("a")).await.unwrap(), 0);
    let f = w.fetch(&t, 1, Isolation::ReadCommitted).await;
    assert!(f.records.is_empty());
    assert_eq!((f.next_offset, f.high_watermark), (1, 1));
    let mut consumer = w
        .client
        .consumer(&w.group, Isolation::ReadUncommitted)
        .unwrap();
    let error = consumer.fetch(&t, 2).await.unwrap_err();
    assert!(
        matches!(
            error,
            LiveError::OffsetOutOfRange {
                offset: 2,
                high_watermark: 1,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        format!("offset 2 is out of range for {t}: the high watermark is 1")
    );
}

/// Mirrors `topics_are_created_once_and_listed_sorted` (the part a broker
/// shares): duplicates and empty topics are refused, partition counts read
/// back, unknown topics have none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_once() {
    let w = world!();
    let error = w.client.create_topic(&w.output, 4).await.unwrap_err();
    assert!(matches!(error, LiveError::TopicExists { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        format!("topic `{}` already exists", w.output)
    );
    let empty = unique("empty");
    let error = w.client.create_topic(&empty, 0).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("topic `{empty}` needs at least one partition")
    );
    assert_eq!(w.client.partitions(&w.output).await.unwrap(), Some(2));
    assert_eq!(w.client.partitions(&w.input).await.unwrap(), Some(1));
    assert_eq!(w.client.partitions(&unique("nope")).await.unwrap(), None);
}
