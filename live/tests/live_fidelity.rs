//! Model fidelity: the transactional cases of `fidelity/cases.rs`, the
//! table the in-memory model runs too (`sim/tests/model_fidelity.rs`), run
//! here against a real broker through the live client
//! (`parsley_live::LiveClient` and its producers and consumers).
//!
//! `parsley-live` imports nothing of `parsley-sim`, not even in its tests:
//! the table is a file both test crates include, written against the
//! `Backend` trait that [`Broker`] implements here. The trait is
//! synchronous; the broker's backend runs each of the client's async calls
//! to completion on one tokio runtime shared by the tests.
//!
//! Two cases stay here, broker only, because they time what only a broker
//! does at wall-clock time: the coordinator's transaction timeout, and the
//! lag of the markers after a commit returns. The model runs its own cases
//! for both at simulated time (`sim/src/model/tests/`).
//!
//! The broker: `export "$(bash scripts/kafka/broker.sh start)"` sets
//! `KAFKA_BOOTSTRAP_SERVERS`. Without it these tests print a note and pass,
//! unless `CI` is set, where they fail. Every case makes its own topics,
//! groups and transactional ids, so they run in parallel on one broker.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parsley::CommittedOffset;
use parsley::{Isolation, RecordData, Tp};
use parsley_live::{
    LiveClient, LiveConfig, LiveConsumer, LiveError, PlainProducer, TxnErrorClass, TxnProducer,
};
use rdkafka::error::RDKafkaErrorCode;

#[path = "../../fidelity/cases.rs"]
mod cases;
mod support;

use cases::{
    committed_view, offsets_and_values, pairs, tp, Backend, Failed, Fetched, Kind, Logged,
};
use support::{live_config, now_ms, unique};

/// How long a `read_committed` lookup of committed offsets waits for them
/// to be stable: librdkafka retries UNSTABLE_OFFSET_COMMIT until its
/// timeout, so a lookup still failing after this long met offsets pending
/// in an undecided transaction. A commit's markers land within tens of
/// milliseconds (see `markers_land_after_commit_returns_…`).
const STABLE_LOOKUP: Duration = Duration::from_secs(3);

/// The runtime every case's async calls run on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

fn wait<F: Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

/// The broker as a `Backend`: one case's corner of it, under a prefix no
/// other case or run uses, with the model's topics `in` (1 partition) and
/// `out` (2).
struct Broker {
    client: LiveClient,
    prefix: String,
    plain: Option<PlainProducer>,
    /// One consumer per isolation level, as a task has: every fetch moves
    /// it to the fetched tp and offset.
    read_committed: Option<LiveConsumer>,
    read_uncommitted: Option<LiveConsumer>,
    /// The client of `read_committed` offset lookups ([`STABLE_LOOKUP`]).
    stable: Option<LiveClient>,
}

impl Broker {
    /// The broker the tests run on, or `None` (after a note) to skip.
    fn start() -> Option<Broker> {
        live_config().map(Broker::new)
    }

    fn new(config: LiveConfig) -> Broker {
        let client = LiveClient::new(config).expect("live client");
        let mut broker = Broker {
            client,
            prefix: unique("case"),
            plain: None,
            read_committed: None,
            read_uncommitted: None,
            stable: None,
        };
        broker.create_topic("in", 1).expect("create in");
        broker.create_topic("out", 2).expect("create out");
        broker
    }

    fn reader(&mut self, isolation: Isolation) -> &mut LiveConsumer {
        let group = self.name(&format!("reader-{}", isolation.property()));
        let slot = match isolation {
            Isolation::ReadCommitted => &mut self.read_committed,
            Isolation::ReadUncommitted => &mut self.read_uncommitted,
        };
        slot.get_or_insert_with(|| self.client.consumer(&group, isolation).expect("consumer"))
    }
}

/// A refusal of the broker, classed as the table asserts it.
fn failed(error: LiveError) -> Failed {
    let kind = match &error {
        _ if error.txn_class() == Some(TxnErrorClass::Fatal) && error.is_fenced() => Kind::Fenced,
        LiveError::OffsetOutOfRange {
            offset,
            high_watermark,
            ..
        } => Kind::OffsetOutOfRange {
            offset: *offset,
            high_watermark: *high_watermark,
        },
        LiveError::TopicExists { .. } => Kind::TopicExists,
        LiveError::InvalidPartitionCount { .. } => Kind::InvalidPartitionCount,
        _ if error.code() == Some(RDKafkaErrorCode::OffsetMetadataTooLarge)
            && error.txn_class() == Some(TxnErrorClass::RequiresAbort)
            && !error.is_fenced() =>
        {
            Kind::MetadataTooLarge
        }
        _ => Kind::Other,
    };
    Failed {
        kind,
        message: error.to_string(),
    }
}

impl Backend for Broker {
    type Producer = TxnProducer;

    fn name(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn timestamp(&self) -> i64 {
        // A record with timestamp 0 would be older than any retention and
        // could be deleted.
        now_ms()
    }

    fn create_topic(&mut self, topic: &str, partitions: u32) -> Result<(), Failed> {
        wait(self.client.create_topic(&self.name(topic), partitions)).map_err(failed)
    }

    fn partitions(&mut self, topic: &str) -> Option<u32> {
        wait(self.client.partitions(&self.name(topic))).expect("partitions")
    }

    fn init_producer(&mut self, transactional_id: &str) -> TxnProducer {
        wait(self.client.producer(&self.name(transactional_id))).expect("init producer")
    }

    fn begin(&mut self, producer: &TxnProducer) -> Result<(), Failed> {
        producer.begin().map_err(failed)
    }

    fn send(
        &mut self,
        producer: &TxnProducer,
        tp: &Tp,
        record: &RecordData,
    ) -> Result<u64, Failed> {
        wait(producer.send(tp, record)).map_err(failed)
    }

    fn send_offsets(
        &mut self,
        producer: &TxnProducer,
        group: &str,
        offsets: &[(Tp, CommittedOffset)],
    ) -> Result<(), Failed> {
        wait(producer.send_offsets(&self.name(group), offsets)).map_err(failed)
    }

    fn commit(&mut self, producer: &TxnProducer) -> Result<(), Failed> {
        wait(producer.commit()).map_err(failed)
    }

    fn abort(&mut self, producer: &TxnProducer) -> Result<(), Failed> {
        wait(producer.abort()).map_err(failed)
    }

    fn append(&mut self, tp: &Tp, record: &RecordData) -> Result<u64, Failed> {
        let client = &self.client;
        let plain = self
            .plain
            .get_or_insert_with(|| client.plain_producer().expect("plain producer"));
        wait(plain.append(tp, record)).map_err(failed)
    }

    fn fetch(&mut self, tp: &Tp, from: u64, isolation: Isolation) -> Result<Fetched, Failed> {
        let fetch = wait(self.reader(isolation).fetch(tp, from)).map_err(failed)?;
        Ok(Fetched {
            records: fetch.records,
            next_offset: fetch.next_offset,
            high_watermark: fetch.high_watermark,
            last_stable_offset: fetch.last_stable_offset,
        })
    }

    fn high_watermark(&mut self, tp: &Tp) -> u64 {
        wait(self.client.watermarks(tp))
            .expect("watermarks")
            .high_watermark
    }

    fn last_stable_offset(&mut self, tp: &Tp) -> u64 {
        wait(self.client.watermarks(tp))
            .expect("watermarks")
            .last_stable_offset
    }

    fn wait_stable(&mut self, tp: &Tp, target: u64) -> u64 {
        let started = Instant::now();
        let marks = wait(self.client.wait_stable(tp, target)).expect("stable");
        let waited = started.elapsed();
        if waited > Duration::from_millis(5) {
            eprintln!("note: {tp}: the LSO reached {target} {waited:?} after the call returned");
        }
        marks.last_stable_offset
    }

    fn wait_high_watermark(&mut self, tp: &Tp, target: u64) {
        let started = Instant::now();
        while self.high_watermark(tp) < target {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{tp}: the high watermark never reached {target}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn committed(
        &mut self,
        group: &str,
        tp: &Tp,
        isolation: Isolation,
    ) -> Result<Option<CommittedOffset>, Failed> {
        let group = self.name(group);
        let client = match isolation {
            Isolation::ReadUncommitted => &self.client,
            Isolation::ReadCommitted => {
                let config = self.client.config().clone().with_timeout(STABLE_LOOKUP);
                self.stable
                    .get_or_insert_with(|| LiveClient::new(config).expect("live client"))
            }
        };
        let consumer = client.consumer(&group, isolation).expect("consumer");
        let started = Instant::now();
        match wait(consumer.committed(std::slice::from_ref(tp))) {
            Ok(mut found) => Ok(found.pop().expect("one answer per tp")),
            Err(error)
                if isolation == Isolation::ReadCommitted
                    && error.code() == Some(RDKafkaErrorCode::OperationTimedOut) =>
            {
                eprintln!(
                    "note: read_committed committed() of `{group}` on {tp}: {error} after {:?}",
                    started.elapsed()
                );
                Err(Failed {
                    kind: Kind::UnstableOffset,
                    message: error.to_string(),
                })
            }
            Err(error) => Err(failed(error)),
        }
    }

    fn log(&mut self, _tp: &Tp) -> Option<Vec<Logged>> {
        None
    }

    fn open_transactions(&mut self) -> Option<Vec<String>> {
        None
    }
}

macro_rules! run {
    ($case:ident) => {
        #[test]
        fn $case() {
            if let Some(mut broker) = Broker::start() {
                cases::$case(&mut broker);
            }
        }
    };
}

cases::for_each_case!(run);

// ----- broker only -----

/// Broker only (wall-clock time; the model's
/// `stall_clears_when_the_transaction_times_out` and
/// `timed_out_producer_is_fenced_until_reinitialised` run at simulated
/// time, to the millisecond): with a 3 s `transaction.timeout.ms` the
/// broker aborts the hanging transaction (marker at 4), bumps the
/// producer's epoch, so its next send and its commit fail fenced, and a
/// re-initialised producer's record lands at 5.
#[test]
fn stall_clears_when_the_transaction_times_out() {
    let Some(config) = live_config() else {
        return;
    };
    let timeout = Duration::from_secs(3);
    let mut b = Broker::new(config.with_transaction_timeout(timeout));
    let t = tp(&b, "in", 0);
    let before = Instant::now();
    let hang = cases::hanging(&mut b);
    // The transaction began after `before`: if well under the timeout has
    // passed since, the broker cannot have aborted it yet (on a machine so
    // slow that it may have, the check would be a race, so it is skipped).
    let lso = b.last_stable_offset(&t);
    if before.elapsed() < timeout - Duration::from_secs(1) {
        assert_eq!(lso, 0, "not a moment before the timeout");
    }
    let started = Instant::now();
    assert_eq!(b.wait_stable(&t, 5), 5);
    eprintln!(
        "note: the broker aborted the timed-out transaction {:?} after the check",
        started.elapsed()
    );
    assert_eq!(b.high_watermark(&t), 5);
    assert_eq!(
        committed_view(&mut b, &t),
        pairs(&[(1, "plain"), (2, "other")])
    );

    let late = cases::rec(&b, "late");
    for (call, result) in [
        ("send", b.send(&hang, &t, &late).map(drop)),
        ("commit", b.commit(&hang)),
    ] {
        let error = result.expect_err(call);
        assert_eq!(error.kind, Kind::Fenced, "{call}: {error}");
    }

    let again = b.init_producer("hang");
    b.begin(&again).unwrap();
    let record = cases::rec(&b, "again");
    assert_eq!(b.send(&again, &t, &record).unwrap(), 5);
    b.commit(&again).unwrap();
    b.wait_stable(&t, 7);
    assert_eq!(
        committed_view(&mut b, &t),
        pairs(&[(1, "plain"), (2, "other"), (5, "again")])
    );
}

/// Broker only (the lag is the broker's; the model ends a transaction with
/// its markers written at once or, told to, later: its
/// `a_commit_with_markers_written_later_becomes_visible_when_they_are`): a
/// broker answers the commit before its markers are on the partitions.
/// Until they are, the partition's last stable offset stays where the
/// transaction began and a `read_committed` fetch sees none of its records;
/// then it sees them all, never part. Over 20 transactions the lag after
/// `commit` returned is measured (the simulator's `marker_lag_ms` default
/// comes from such figures) and stays bounded.
#[test]
fn markers_land_after_commit_returns_and_pin_the_lso_until_then() {
    let Some(mut b) = Broker::start() else {
        return;
    };
    let t = tp(&b, "out", 0);
    let p = b.init_producer("lag");
    let (a, c) = (cases::rec(&b, "a"), cases::rec(&b, "b"));
    let mut lags = Vec::new();
    for _ in 0..20 {
        b.begin(&p).unwrap();
        let first = b.send(&p, &t, &a).unwrap();
        let last = b.send(&p, &t, &c).unwrap();
        b.commit(&p).unwrap();
        let returned = Instant::now();
        loop {
            let lso = b.last_stable_offset(&t);
            assert!(
                lso == first || lso > last,
                "the LSO {lso} lies inside the transaction [{first}, {last}]"
            );
            let seen = b
                .fetch(&t, first, Isolation::ReadCommitted)
                .expect("fetch")
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
    let values = offsets_and_values(&b.fetch(&t, 0, Isolation::ReadCommitted).expect("fetch"));
    assert_eq!(values.len(), 40, "every transaction's two records");
}
