//! The transactional fidelity cases: what Kafka does, written once, run on
//! the in-memory model (`sim/tests/model_fidelity.rs`) and on a real broker
//! through the live client (`live/tests/live_fidelity.rs`).
//!
//! `parsley-sim` and `parsley-live` import nothing of each other, not even
//! in their tests, so the table is this file, which each of the two test
//! crates includes with `#[path = "../../fidelity/cases.rs"] mod cases;`
//! and runs over its own [`Backend`]: the model's over
//! `parsley_sim::model::Cluster`, the broker's over `parsley_live::LiveClient`
//! and its producers. [`for_each_case!`] lists the cases; each side turns
//! every name into a `#[test]` of the same name.
//!
//! A case states each observation once: the offsets records land at, what
//! `read_committed` and `read_uncommitted` return, the markers that take an
//! offset, the last stable offset (LSO), the high watermark, the group's
//! committed offsets, and the class of each refusal ([`Kind`]). Where only
//! one backend can observe something, the [`Backend`] method returns an
//! `Option` and the case says what it expects when there is an answer:
//! the model shows every entry of a log ([`Backend::log`]), a client of a
//! real broker reads no control batch.
//!
//! Kafka acknowledges a transaction's end before it writes the markers; the
//! model writes them at once. A case that reads right after an end first
//! waits for the LSO ([`Backend::wait_stable`]); on the model the wait
//! returns at once, and must, or the model is not Kafka's.

// Each side constructs only what its backend observes (the broker never
// builds a `Logged`), so some items are dead on one side.
#![allow(dead_code)]

use bytes::Bytes;
use parsley::CommittedOffset;
use parsley::{ConsumedRecord, Header, Isolation, RecordData, Tp};

// ----- the backend -----

/// The class of a refused call: what a case asserts of an error on both
/// backends. A backend maps its own errors here; anything else is
/// [`Kind::Other`], which no case expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The producer was fenced by a newer one with its transactional id
    /// (X4). On the broker, a fatal error flagged as fenced.
    Fenced,
    /// A fetch beyond the high watermark (`OFFSET_OUT_OF_RANGE`).
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The partition's high watermark.
        high_watermark: u64,
    },
    /// The topic to create exists already.
    TopicExists,
    /// A topic to create with no partition.
    InvalidPartitionCount,
    /// Offset metadata over `offset.metadata.max.bytes`; the transaction can
    /// still be aborted (on the broker: abortable, not fatal, not fenced).
    MetadataTooLarge,
    /// KIP-447: a stable (`read_committed`) lookup of a group's offset
    /// while a transaction holding it is undecided (`UNSTABLE_OFFSET_COMMIT`).
    UnstableOffset,
    /// Anything else.
    Other,
}

/// A refused call: its class and its message.
#[derive(Clone, Debug)]
pub struct Failed {
    /// What a case asserts.
    pub kind: Kind,
    /// The backend's message, which names what and where.
    pub message: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

/// A fetch's answer: the model's `Fetch`, the live client's `LiveFetch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// Visible data records in offset order.
    pub records: Vec<ConsumedRecord>,
    /// The position after the fetch: past the last record and past any
    /// markers or aborted records skipped after it, never past the LSO for
    /// `read_committed`.
    pub next_offset: u64,
    /// The high watermark when the fetch began.
    pub high_watermark: u64,
    /// The last stable offset when the fetch began.
    pub last_stable_offset: u64,
}

/// One offset of a log as the model keeps it (see [`Backend::log`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logged {
    /// A plain record, outside any transaction.
    Plain,
    /// A record of a committed transaction.
    Committed,
    /// A record of an aborted transaction.
    Aborted,
    /// A record of a transaction still open.
    Open,
    /// A commit marker.
    CommitMarker,
    /// An abort marker.
    AbortMarker,
}

/// What a case does to Kafka and reads back. A backend starts with the
/// model's two topics: `in` of 1 partition and `out` of 2.
///
/// Names (topics, groups, transactional ids) are the case's; a backend on a
/// shared broker makes them unique with [`Backend::name`], and every name a
/// case passes in goes through it.
pub trait Backend {
    /// A transactional producer.
    type Producer;

    /// The name `name` of the case has on this backend.
    fn name(&self, name: &str) -> String;
    /// The timestamp of a record the case builds: the model has no clock; a
    /// broker deletes records older than its retention.
    fn timestamp(&self) -> i64;

    /// Creates topic `topic`.
    fn create_topic(&mut self, topic: &str, partitions: u32) -> Result<(), Failed>;
    /// The partition count of `topic`, `None` if it does not exist.
    fn partitions(&mut self, topic: &str) -> Option<u32>;

    /// A transactional producer for `transactional_id`, initialised: this
    /// fences every older producer with that id and aborts its open
    /// transaction before it returns.
    fn init_producer(&mut self, transactional_id: &str) -> Self::Producer;
    /// Opens a transaction.
    fn begin(&mut self, producer: &Self::Producer) -> Result<(), Failed>;
    /// Sends a record in the open transaction; its offset.
    fn send(
        &mut self,
        producer: &Self::Producer,
        tp: &Tp,
        record: &RecordData,
    ) -> Result<u64, Failed>;
    /// Stages `group`'s offsets in the open transaction.
    fn send_offsets(
        &mut self,
        producer: &Self::Producer,
        group: &str,
        offsets: &[(Tp, CommittedOffset)],
    ) -> Result<(), Failed>;
    /// Commits the open transaction.
    fn commit(&mut self, producer: &Self::Producer) -> Result<(), Failed>;
    /// Aborts the open transaction.
    fn abort(&mut self, producer: &Self::Producer) -> Result<(), Failed>;
    /// Appends a record outside any transaction; its offset.
    fn append(&mut self, tp: &Tp, record: &RecordData) -> Result<u64, Failed>;

    /// Every record of `tp` from `from` visible at `isolation` now. The
    /// broker's backend fetches with one consumer per isolation level, as a
    /// task does: each fetch moves it to `tp` and `from`.
    fn fetch(&mut self, tp: &Tp, from: u64, isolation: Isolation) -> Result<Fetched, Failed>;
    /// The high watermark of `tp`.
    fn high_watermark(&mut self, tp: &Tp) -> u64;
    /// The last stable offset of `tp`.
    fn last_stable_offset(&mut self, tp: &Tp) -> u64;
    /// Waits until the LSO of `tp` is at least `target` (the markers of a
    /// transaction that just ended) and returns it. The model writes
    /// markers as the call that ends a transaction returns, so there it
    /// must be there already.
    fn wait_stable(&mut self, tp: &Tp, target: u64) -> u64;
    /// Waits until the high watermark of `tp` is at least `target` (a
    /// marker that the LSO cannot show, being held back); as
    /// [`Backend::wait_stable`] on the model.
    fn wait_high_watermark(&mut self, tp: &Tp, target: u64);
    /// `group`'s committed offset on `tp`: at `read_uncommitted` the last
    /// committed one at once, at `read_committed` the stable one (KIP-447),
    /// refused with [`Kind::UnstableOffset`] while a transaction holding the
    /// group's offset on `tp` is undecided.
    fn committed(
        &mut self,
        group: &str,
        tp: &Tp,
        isolation: Isolation,
    ) -> Result<Option<CommittedOffset>, Failed>;

    /// Every entry of `tp`'s log, markers included: the model's; `None` on
    /// the broker, whose clients read no control batch.
    fn log(&mut self, tp: &Tp) -> Option<Vec<Logged>>;
    /// The transactional ids with a transaction open, sorted: the model's
    /// coordinator; `None` on the broker.
    fn open_transactions(&mut self) -> Option<Vec<String>>;
}

// ----- helpers -----

/// Partition `partition` of the case's topic `topic`.
pub fn tp<B: Backend>(b: &B, topic: &str, partition: u32) -> Tp {
    Tp::new(b.name(topic), partition)
}

/// A record with value `value` and the backend's timestamp.
pub fn rec<B: Backend>(b: &B, value: &str) -> RecordData {
    RecordData {
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
        timestamp: b.timestamp(),
    }
}

/// Expected `(offset, value)` pairs.
pub fn pairs(items: &[(u64, &str)]) -> Vec<(u64, String)> {
    items.iter().map(|&(o, v)| (o, v.to_owned())).collect()
}

/// A fetch's records as `(offset, value)` pairs.
pub fn offsets_and_values(fetch: &Fetched) -> Vec<(u64, String)> {
    fetch
        .records
        .iter()
        .map(|r| {
            let value = r.data.value.as_deref().unwrap_or_default();
            (r.offset, String::from_utf8_lossy(value).into_owned())
        })
        .collect()
}

fn fetch<B: Backend>(b: &mut B, tp: &Tp, from: u64, isolation: Isolation) -> Fetched {
    b.fetch(tp, from, isolation)
        .unwrap_or_else(|e| panic!("fetch of {tp} from {from}: {e}"))
}

/// What `read_committed` returns of `tp` from offset 0.
pub fn committed_view<B: Backend>(b: &mut B, tp: &Tp) -> Vec<(u64, String)> {
    offsets_and_values(&fetch(b, tp, 0, Isolation::ReadCommitted))
}

/// What `read_uncommitted` returns of `tp` from offset 0.
pub fn uncommitted_view<B: Backend>(b: &mut B, tp: &Tp) -> Vec<(u64, String)> {
    offsets_and_values(&fetch(b, tp, 0, Isolation::ReadUncommitted))
}

/// Asserts `tp`'s log, where the backend shows it.
fn assert_log<B: Backend>(b: &mut B, tp: &Tp, expected: &[Logged]) {
    if let Some(log) = b.log(tp) {
        assert_eq!(log, expected, "the log of {tp}");
    }
}

/// Asserts the open transactions, where the backend shows them.
fn assert_open<B: Backend>(b: &mut B, expected: &[&str]) {
    if let Some(open) = b.open_transactions() {
        let expected: Vec<String> = expected.iter().map(|id| b.name(id)).collect();
        assert_eq!(open, expected, "the open transactions");
    }
}

fn committed_at<B: Backend>(b: &mut B, group: &str, tp: &Tp) -> Option<CommittedOffset> {
    b.committed(group, tp, Isolation::ReadCommitted)
        .unwrap_or_else(|e| panic!("committed offset of `{group}` on {tp}: {e}"))
}

use Logged::{
    AbortMarker, Aborted, CommitMarker, Committed as CommittedRecord, Open as OpenRecord, Plain,
};

// ----- the table -----

/// The table: `for_each_case!(run)` expands to `run!(case);` for every case
/// below, and each side's `run!` makes a `#[test]` of it over its backend.
macro_rules! for_each_case {
    ($run:ident) => {
        $run!(committed_record_after_one_aborted_record_lands_at_offset_2);
        $run!(committed_record_after_aborted_two_record_transaction_lands_at_offset_3);
        $run!(next_offset_moves_past_markers_and_aborted_records);
        $run!(markers_are_written_on_every_partition_the_transaction_touched);
        $run!(read_committed_sees_only_committed_read_uncommitted_sees_all);
        $run!(records_round_trip_with_key_headers_timestamp_and_tombstones);
        $run!(open_transaction_stalls_read_committed_at_the_lso);
        $run!(open_transaction_holds_back_only_the_partitions_it_wrote_to);
        $run!(lso_is_the_earliest_open_transaction);
        $run!(stall_clears_on_commit);
        $run!(stall_clears_on_abort);
        $run!(stall_clears_when_init_producer_fences_the_old_producer);
        $run!(fenced_producer_fails_and_its_open_transaction_is_aborted);
        $run!(group_offsets_are_invisible_until_commit);
        $run!(group_offsets_are_dropped_on_abort);
        $run!(transaction_touching_no_partition_commits_offsets);
        $run!(offset_metadata_over_the_broker_limit_is_refused);
        $run!(fetch_at_log_end_is_empty_and_beyond_is_out_of_range);
        $run!(topics_are_created_once);
    };
}
pub(crate) use for_each_case;

// ----- offsets: markers take offsets -----

/// Kafka: an abort marker takes an offset, so a committed record written
/// after one aborted record (offset 0) and its marker (offset 1) lands at
/// offset 2, and its commit marker at 3.
pub fn committed_record_after_one_aborted_record_lands_at_offset_2<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &rec(b, "x")).unwrap(), 0);
    b.abort(&p).unwrap();
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &rec(b, "y")).unwrap(), 2);
    b.commit(&p).unwrap();

    assert_eq!(b.wait_stable(&t, 4), 4);
    assert_log(
        b,
        &t,
        &[Aborted, AbortMarker, CommittedRecord, CommitMarker],
    );
    assert_eq!(committed_view(b, &t), pairs(&[(2, "y")]));
    assert_eq!(uncommitted_view(b, &t), pairs(&[(0, "x"), (2, "y")]));
    assert_eq!(b.high_watermark(&t), 4);
}

/// Kafka: after an aborted two-record transaction (offsets 0, 1) and its
/// marker (offset 2) the next committed record lands at offset 3.
pub fn committed_record_after_aborted_two_record_transaction_lands_at_offset_3<B: Backend>(
    b: &mut B,
) {
    let t = tp(b, "in", 0);
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &rec(b, "x1")).unwrap(), 0);
    assert_eq!(b.send(&p, &t, &rec(b, "x2")).unwrap(), 1);
    b.abort(&p).unwrap();
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &rec(b, "y")).unwrap(), 3);
    b.commit(&p).unwrap();
    assert_eq!(b.wait_stable(&t, 5), 5);
    assert_eq!(committed_view(b, &t), pairs(&[(3, "y")]));
    assert_log(
        b,
        &t,
        &[Aborted, Aborted, AbortMarker, CommittedRecord, CommitMarker],
    );
}

/// Kafka: the consumer's position moves past control markers and aborted
/// records it skipped, so it does not fetch them again; it never moves
/// beyond the LSO, and a fetch from an earlier offset starts there again.
/// `read_uncommitted` skips markers only.
pub fn next_offset_moves_past_markers_and_aborted_records<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &rec(b, "x1")).unwrap(), 0);
    assert_eq!(b.send(&p, &t, &rec(b, "x2")).unwrap(), 1);
    b.abort(&p).unwrap(); // 2
    b.wait_stable(&t, 3);
    let f = fetch(b, &t, 0, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!(f.next_offset, 3);

    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &rec(b, "y")).unwrap(), 3);
    b.commit(&p).unwrap(); // 4
    b.wait_stable(&t, 5);
    let f = fetch(b, &t, 0, Isolation::ReadCommitted);
    assert_eq!(offsets_and_values(&f), pairs(&[(3, "y")]));
    assert_eq!(f.next_offset, 5);

    // Another transaction opens at 5: the position stops at the LSO.
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &rec(b, "z")).unwrap(), 5);
    let f = fetch(b, &t, 4, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!((f.next_offset, f.last_stable_offset), (5, 5));
    // Back to the start: the consumer was at 5, now it reads from 0 again.
    let f = fetch(b, &t, 0, Isolation::ReadCommitted);
    assert_eq!(offsets_and_values(&f), pairs(&[(3, "y")]));
    assert_eq!(f.next_offset, 5);

    // read_uncommitted skips markers only.
    let f = fetch(b, &t, 0, Isolation::ReadUncommitted);
    assert_eq!(
        offsets_and_values(&f),
        pairs(&[(0, "x1"), (1, "x2"), (3, "y"), (5, "z")])
    );
    assert_eq!(f.next_offset, 6);
    b.abort(&p).unwrap();
}

/// Kafka: a transaction spanning several partitions writes one marker on
/// each it wrote to and none elsewhere; a plain record after the marker on
/// one partition is at the next offset.
pub fn markers_are_written_on_every_partition_the_transaction_touched<B: Backend>(b: &mut B) {
    let (o0, o1, i) = (tp(b, "out", 0), tp(b, "out", 1), tp(b, "in", 0));
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &o0, &rec(b, "a")).unwrap(), 0);
    assert_eq!(b.send(&p, &o1, &rec(b, "b")).unwrap(), 0);
    assert_eq!(b.send(&p, &o0, &rec(b, "c")).unwrap(), 1);
    b.commit(&p).unwrap();
    assert_eq!(b.wait_stable(&o0, 3), 3);
    assert_eq!(b.wait_stable(&o1, 2), 2);
    assert_log(b, &o0, &[CommittedRecord, CommittedRecord, CommitMarker]);
    assert_log(b, &o1, &[CommittedRecord, CommitMarker]);
    assert_eq!(
        b.high_watermark(&i),
        0,
        "a partition the transaction never touched"
    );
    assert_log(b, &i, &[]);
    assert_eq!(b.append(&o1, &rec(b, "d")).unwrap(), 2);
    assert_eq!(committed_view(b, &o0), pairs(&[(0, "a"), (1, "c")]));
    assert_eq!(committed_view(b, &o1), pairs(&[(0, "b"), (2, "d")]));
}

// ----- visibility -----

/// Kafka: a `read_committed` consumer sees plain records and committed
/// transactions only; `read_uncommitted` sees every data record, aborted
/// and still-open ones included, but never a control marker. plain@0,
/// committed@1 (marker 2), aborted@3 (marker 4), open@5.
pub fn read_committed_sees_only_committed_read_uncommitted_sees_all<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    assert_eq!(b.append(&t, &rec(b, "plain")).unwrap(), 0);

    let a = b.init_producer("a");
    b.begin(&a).unwrap();
    assert_eq!(b.send(&a, &t, &rec(b, "committed")).unwrap(), 1);
    b.commit(&a).unwrap();
    b.wait_stable(&t, 3);

    let c = b.init_producer("b");
    b.begin(&c).unwrap();
    assert_eq!(b.send(&c, &t, &rec(b, "aborted")).unwrap(), 3);
    b.abort(&c).unwrap();
    b.wait_stable(&t, 5);

    let open = b.init_producer("open");
    b.begin(&open).unwrap();
    assert_eq!(b.send(&open, &t, &rec(b, "open")).unwrap(), 5);

    assert_log(
        b,
        &t,
        &[
            Plain,
            CommittedRecord,
            CommitMarker,
            Aborted,
            AbortMarker,
            OpenRecord,
        ],
    );
    assert_eq!(
        committed_view(b, &t),
        pairs(&[(0, "plain"), (1, "committed")])
    );
    assert_eq!(
        uncommitted_view(b, &t),
        pairs(&[(0, "plain"), (1, "committed"), (3, "aborted"), (5, "open")])
    );
    assert_eq!((b.last_stable_offset(&t), b.high_watermark(&t)), (5, 6));
    b.abort(&open).unwrap();
}

/// Kafka stores a record as it was sent: key, value, headers (repeated
/// names, order kept), timestamp; a null value (a changelog tombstone)
/// stays null.
pub fn records_round_trip_with_key_headers_timestamp_and_tombstones<B: Backend>(b: &mut B) {
    let t = tp(b, "out", 1);
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
        timestamp: b.timestamp(),
    };
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &t, &full).unwrap(), 0);
    assert_eq!(b.send(&p, &t, &tombstone).unwrap(), 1);
    b.commit(&p).unwrap();
    b.wait_stable(&t, 3);
    let f = fetch(b, &t, 0, Isolation::ReadCommitted);
    let got: Vec<_> = f
        .records
        .iter()
        .map(|r| (r.offset, r.data.clone()))
        .collect();
    assert_eq!(got, vec![(0, full), (1, tombstone)]);
    assert_eq!(f.next_offset, 3);
}

// ----- the last stable offset and hanging transactions -----

/// The stall: producer `hang` opens a transaction on `in-0` at offset 0;
/// then a plain record (1) and a committed transaction of `other` (2,
/// marker 3) follow it. Returns the hanging producer.
pub fn hanging<B: Backend>(b: &mut B) -> B::Producer {
    let t = tp(b, "in", 0);
    let hang = b.init_producer("hang");
    b.begin(&hang).unwrap();
    assert_eq!(b.send(&hang, &t, &rec(b, "hanging")).unwrap(), 0);
    assert_eq!(b.append(&t, &rec(b, "plain")).unwrap(), 1);
    let other = b.init_producer("other");
    b.begin(&other).unwrap();
    assert_eq!(b.send(&other, &t, &rec(b, "other")).unwrap(), 2);
    b.commit(&other).unwrap();
    // The commit marker of `other` is at 3 once written: wait for it (the
    // LSO cannot show it, it stays at 0).
    b.wait_high_watermark(&t, 4);
    hang
}

/// Kafka: an open transaction pins the LSO at its first offset; nothing at
/// or after it is delivered to `read_committed`, not even other producers'
/// committed and plain records, while `read_uncommitted` sees them all.
pub fn open_transaction_stalls_read_committed_at_the_lso<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    let hang = hanging(b);

    let f = fetch(b, &t, 0, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!(
        (f.next_offset, f.last_stable_offset, f.high_watermark),
        (0, 0, 4)
    );
    assert_eq!(b.last_stable_offset(&t), 0);
    assert_eq!(
        uncommitted_view(b, &t),
        pairs(&[(0, "hanging"), (1, "plain"), (2, "other")])
    );
    assert_open(b, &["hang"]);
    // A consumer already past the LSO stays where it is.
    let f = fetch(b, &t, 2, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!(f.next_offset, 2);
    b.abort(&hang).unwrap();
}

/// Kafka: the LSO is per partition; an open transaction holds back only the
/// partitions it wrote to, and every one of them.
pub fn open_transaction_holds_back_only_the_partitions_it_wrote_to<B: Backend>(b: &mut B) {
    let (o0, o1, i) = (tp(b, "out", 0), tp(b, "out", 1), tp(b, "in", 0));
    assert_eq!(b.append(&o0, &rec(b, "before")).unwrap(), 0);
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    assert_eq!(b.send(&p, &o0, &rec(b, "x")).unwrap(), 1);
    assert_eq!(b.send(&p, &o1, &rec(b, "y")).unwrap(), 0);
    assert_eq!(b.append(&o1, &rec(b, "after")).unwrap(), 1);
    assert_eq!(b.append(&i, &rec(b, "elsewhere")).unwrap(), 0);
    assert_eq!(b.last_stable_offset(&o0), 1);
    assert_eq!(b.last_stable_offset(&o1), 0);
    assert_eq!(b.last_stable_offset(&i), 1);
    assert_eq!(committed_view(b, &o0), pairs(&[(0, "before")]));
    assert!(committed_view(b, &o1).is_empty());
    assert_eq!(committed_view(b, &i), pairs(&[(0, "elsewhere")]));
    b.abort(&p).unwrap();
}

/// Kafka: with two open transactions the LSO is the first offset of the
/// earliest; it advances to the next open one when the earliest ends.
pub fn lso_is_the_earliest_open_transaction<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    let a = b.init_producer("a");
    let c = b.init_producer("b");
    assert_eq!(b.append(&t, &rec(b, "p0")).unwrap(), 0);
    b.begin(&a).unwrap();
    b.begin(&c).unwrap();
    assert_eq!(b.send(&a, &t, &rec(b, "a1")).unwrap(), 1);
    assert_eq!(b.send(&c, &t, &rec(b, "b2")).unwrap(), 2);
    assert_eq!(b.send(&a, &t, &rec(b, "a3")).unwrap(), 3);
    assert_eq!(b.last_stable_offset(&t), 1);
    b.commit(&a).unwrap(); // marker at 4
    assert_eq!(b.wait_stable(&t, 2), 2);
    assert_eq!(committed_view(b, &t), pairs(&[(0, "p0"), (1, "a1")]));
    b.abort(&c).unwrap(); // marker at 5
    assert_eq!(b.wait_stable(&t, 6), 6);
    assert_eq!(
        committed_view(b, &t),
        pairs(&[(0, "p0"), (1, "a1"), (3, "a3")])
    );
    assert_log(
        b,
        &t,
        &[
            Plain,
            CommittedRecord,
            Aborted,
            CommittedRecord,
            CommitMarker,
            AbortMarker,
        ],
    );
}

/// Kafka: committing the hanging transaction releases the stall; its
/// records and everything after it become visible.
pub fn stall_clears_on_commit<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    let hang = hanging(b);
    b.commit(&hang).unwrap();
    assert_eq!(b.wait_stable(&t, 5), 5);
    assert_eq!(
        committed_view(b, &t),
        pairs(&[(0, "hanging"), (1, "plain"), (2, "other")])
    );
    assert_open(b, &[]);
}

/// Kafka: aborting the hanging transaction releases the stall; its records
/// stay invisible, everything after it becomes visible.
pub fn stall_clears_on_abort<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    let hang = hanging(b);
    b.abort(&hang).unwrap();
    assert_eq!(b.wait_stable(&t, 5), 5);
    assert_eq!(committed_view(b, &t), pairs(&[(1, "plain"), (2, "other")]));
    assert_open(b, &[]);
}

/// Kafka: a new producer initialised with the crashed one's transactional
/// id fences it and aborts its open transaction (marker at 4), releasing
/// the stall; it has done so by the time the new producer's init returns.
pub fn stall_clears_when_init_producer_fences_the_old_producer<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    let _hang = hanging(b);
    let _fresh = b.init_producer("hang");
    assert_eq!(
        b.last_stable_offset(&t),
        5,
        "init returns after the abort marker"
    );
    assert_eq!(b.high_watermark(&t), 5);
    assert_log(
        b,
        &t,
        &[Aborted, Plain, CommittedRecord, CommitMarker, AbortMarker],
    );
    assert_eq!(committed_view(b, &t), pairs(&[(1, "plain"), (2, "other")]));
    assert_open(b, &[]);
}

// ----- fencing -----

/// Kafka (`testFencingOnCommit`, `testFencingOnSend`): once a new producer
/// with the same transactional id is initialised, every call of the old one
/// fails with a fencing error naming the id (librdkafka remembers the fatal
/// error and fails every later call with it), its open transaction is
/// aborted, its offsets dropped, and the new one works.
pub fn fenced_producer_fails_and_its_open_transaction_is_aborted<B: Backend>(b: &mut B) {
    let t = tp(b, "out", 0);
    let input = tp(b, "in", 0);
    let old = b.init_producer("task-0");
    b.begin(&old).unwrap();
    assert_eq!(b.send(&old, &t, &rec(b, "zombie")).unwrap(), 0);
    b.send_offsets(&old, "g", &[(input.clone(), CommittedOffset::new(7, ""))])
        .unwrap();

    let new = b.init_producer("task-0");
    let error = b.commit(&old).expect_err("a fenced producer cannot commit");
    assert_eq!(error.kind, Kind::Fenced, "{error}");
    assert!(error.message.contains(&b.name("task-0")), "{error}");

    let later = [
        ("send", b.send(&old, &t, &rec(b, "more")).map(drop)),
        ("abort", b.abort(&old)),
        ("begin", b.begin(&old)),
        (
            "send_offsets",
            b.send_offsets(&old, "g", &[(input.clone(), CommittedOffset::new(8, ""))]),
        ),
    ];
    for (call, result) in later {
        let error = result.expect_err(call);
        assert_eq!(error.kind, Kind::Fenced, "{call}: {error}");
    }

    assert_log(b, &t, &[Aborted, AbortMarker]);
    assert_eq!(b.high_watermark(&t), 2);
    assert_eq!(uncommitted_view(b, &t), pairs(&[(0, "zombie")]));
    assert!(committed_view(b, &t).is_empty());
    assert_eq!(committed_at(b, "g", &input), None);

    b.begin(&new).unwrap();
    assert_eq!(b.send(&new, &t, &rec(b, "fresh")).unwrap(), 2);
    b.commit(&new).unwrap();
    b.wait_stable(&t, 4);
    assert_eq!(committed_view(b, &t), pairs(&[(2, "fresh")]));
}

// ----- group offsets -----

/// Kafka (`sendOffsetsToTransaction`): offsets sent to a transaction are
/// not the group's committed offsets until it commits; the metadata string
/// (a task's checkpoint) survives the round trip. While it is open a plain
/// lookup gives the old offsets (here none) and a stable one (KIP-447)
/// answers UNSTABLE_OFFSET_COMMIT; other groups answer at once.
pub fn group_offsets_are_invisible_until_commit<B: Backend>(b: &mut B) {
    let input = tp(b, "in", 0);
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    b.send(&p, &tp(b, "out", 0), &rec(b, "x")).unwrap();
    let metadata = "parsley1:00a1b2c3 checkpoint, with spaces and ünïcödé";
    b.send_offsets(
        &p,
        "g",
        &[(input.clone(), CommittedOffset::new(5, metadata))],
    )
    .unwrap();
    assert_eq!(
        b.committed("g", &input, Isolation::ReadUncommitted)
            .unwrap(),
        None
    );
    let pending = b
        .committed("g", &input, Isolation::ReadCommitted)
        .expect_err("pending offsets are not stable");
    assert_eq!(pending.kind, Kind::UnstableOffset, "{pending}");
    assert_eq!(committed_at(b, "other-group", &input), None);

    b.commit(&p).unwrap();
    assert_eq!(
        committed_at(b, "g", &input),
        Some(CommittedOffset::new(5, metadata))
    );
    assert_eq!(committed_at(b, "other-group", &input), None);
}

/// Kafka: offsets sent to an aborted transaction are discarded; the group
/// keeps its previously committed offsets.
pub fn group_offsets_are_dropped_on_abort<B: Backend>(b: &mut B) {
    let input = tp(b, "in", 0);
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    b.send_offsets(&p, "g", &[(input.clone(), CommittedOffset::new(3, ""))])
        .unwrap();
    b.commit(&p).unwrap();
    b.begin(&p).unwrap();
    b.send_offsets(&p, "g", &[(input.clone(), CommittedOffset::new(9, ""))])
        .unwrap();
    b.abort(&p).unwrap();
    assert_eq!(
        committed_at(b, "g", &input),
        Some(CommittedOffset::new(3, ""))
    );
}

/// Kafka: a transaction that only commits offsets (no records) commits fine
/// and writes no markers; the last `send_offsets` per tp wins; an empty
/// transaction commits too.
pub fn transaction_touching_no_partition_commits_offsets<B: Backend>(b: &mut B) {
    let input = tp(b, "in", 0);
    let p = b.init_producer("p");
    b.begin(&p).unwrap();
    b.send_offsets(&p, "g", &[(input.clone(), CommittedOffset::new(1, ""))])
        .unwrap();
    b.send_offsets(&p, "g", &[(input.clone(), CommittedOffset::new(2, ""))])
        .unwrap();
    b.commit(&p).unwrap();
    assert_eq!(
        committed_at(b, "g", &input),
        Some(CommittedOffset::new(2, ""))
    );
    for tp in [tp(b, "in", 0), tp(b, "out", 0), tp(b, "out", 1)] {
        assert_eq!(b.high_watermark(&tp), 0, "{tp} has no entries");
        assert_log(b, &tp, &[]);
    }
    b.begin(&p).unwrap();
    b.commit(&p).unwrap();
}

/// Kafka's `offset.metadata.max.bytes` (4096 by default): metadata of that
/// length commits; longer is refused, the transaction is aborted and the
/// group keeps its offset. A task's checkpoint must fit.
pub fn offset_metadata_over_the_broker_limit_is_refused<B: Backend>(b: &mut B) {
    let input = tp(b, "in", 0);
    let p = b.init_producer("p");
    let fits = "m".repeat(4096);
    b.begin(&p).unwrap();
    b.send_offsets(
        &p,
        "g",
        &[(input.clone(), CommittedOffset::new(1, fits.clone()))],
    )
    .unwrap();
    b.commit(&p).unwrap();
    assert_eq!(
        committed_at(b, "g", &input),
        Some(CommittedOffset::new(1, fits.clone()))
    );

    b.begin(&p).unwrap();
    let error = b
        .send_offsets(
            &p,
            "g",
            &[(input.clone(), CommittedOffset::new(2, "m".repeat(4097)))],
        )
        .expect_err("metadata over the limit");
    assert_eq!(error.kind, Kind::MetadataTooLarge, "{error}");
    b.abort(&p).unwrap();
    assert_eq!(
        committed_at(b, "g", &input),
        Some(CommittedOffset::new(1, fits))
    );
}

// ----- fetch edges, topics -----

/// Kafka: fetching at the log end is an empty fetch; beyond it is
/// `OFFSET_OUT_OF_RANGE`, and the message says where.
pub fn fetch_at_log_end_is_empty_and_beyond_is_out_of_range<B: Backend>(b: &mut B) {
    let t = tp(b, "in", 0);
    assert_eq!(b.append(&t, &rec(b, "a")).unwrap(), 0);
    let f = fetch(b, &t, 1, Isolation::ReadCommitted);
    assert!(f.records.is_empty());
    assert_eq!((f.next_offset, f.high_watermark), (1, 1));
    let error = b
        .fetch(&t, 2, Isolation::ReadUncommitted)
        .expect_err("beyond the log end");
    assert_eq!(
        error.kind,
        Kind::OffsetOutOfRange {
            offset: 2,
            high_watermark: 1
        }
    );
    assert_eq!(
        error.message,
        format!("offset 2 is out of range for {t}: the high watermark is 1")
    );
}

/// Kafka: duplicates and empty topics are refused, with messages naming the
/// topic; partition counts read back, unknown topics have none.
pub fn topics_are_created_once<B: Backend>(b: &mut B) {
    let error = b.create_topic("out", 4).unwrap_err();
    assert_eq!(error.kind, Kind::TopicExists, "{error}");
    assert_eq!(
        error.message,
        format!("topic `{}` already exists", b.name("out"))
    );
    let error = b.create_topic("empty", 0).unwrap_err();
    assert_eq!(error.kind, Kind::InvalidPartitionCount, "{error}");
    assert_eq!(
        error.message,
        format!("topic `{}` needs at least one partition", b.name("empty"))
    );
    assert_eq!(b.partitions("out"), Some(2));
    assert_eq!(b.partitions("in"), Some(1));
    assert_eq!(b.partitions("nope"), None);
}
