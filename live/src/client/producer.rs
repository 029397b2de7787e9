//! Producing: transactional producers ([`TxnProducer`]), idempotent plain
//! ones ([`PlainProducer`]), and the delivery of a record ([`Delivery`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerGroupMetadata};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, TopicPartitionList};
use tokio::sync::oneshot;

use parsley::CommittedOffset;
use parsley::RecordData;
use parsley::Tp;

use super::log::{error_librdkafka, log_librdkafka, LogContext};
use super::offsets::{kafka_offset, kafka_partition, our_offset};
use super::pump::PumpedProducer;
use super::util::{blocking, bounded};
use super::LiveConfig;
use crate::error::{is_fenced, is_fenced_code, JoinFailure, LiveError, TxnErrorClass, TxnOp};

/// How long a send waits for room in a full producer queue before failing.
const QUEUE_FULL_PATIENCE: Duration = Duration::from_secs(30);

/// librdkafka's own `linger.ms`, for producers whose sends are awaited one
/// by one ([`TxnProducer::send`]).
const DEFAULT_LINGER: Duration = Duration::from_millis(5);

/// `linger.ms` of a runtime task's producer (librdkafka's default is 5 ms).
/// Its records are not awaited one by one, only at the commit, and
/// `commit_transaction` flushes: whatever still lingers is sent at once,
/// and nothing becomes visible before the commit anyway. So lingering up
/// to the default commit interval costs a commit at most one produce round
/// trip, and fewer, larger produce requests cost librdkafka's threads less
/// CPU per record (the order pipeline's live bench: about 15 % less CPU for
/// the whole process). Kafka Streams sets the same 100 ms on its producers.
pub(crate) const TASK_LINGER: Duration = Duration::from_millis(100);

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

type Reply = Result<i64, KafkaError>;

/// Routes each delivery report to the [`Delivery`] waiting for it; for a
/// transactional producer, explains librdkafka's retries of
/// `InitProducerId` while the coordinator completes an earlier owner's
/// transaction ([`PidWait`]).
#[derive(Default)]
struct DeliveryContext {
    pid_wait: Option<PidWait>,
}

/// A transactional producer's explanation of librdkafka's `GETPID`
/// warnings: when the coordinator answers `InitProducerId` with
/// CONCURRENT_TRANSACTIONS, librdkafka logs "Failed to acquire
/// transactional PID … concurrent operation on the same transaction …:
/// retrying" at WARN every 500 ms until the earlier owner's open
/// transaction is aborted or committed. That is the normal course of a
/// failover, not a fault: the first such line is explained once at INFO,
/// naming the task and the transactional id, and the repeats go to DEBUG.
struct PidWait {
    transactional_id: String,
    /// What the producer is for, e.g. `task balances/2`.
    owner: String,
    said: std::sync::atomic::AtomicBool,
    /// Who owned the task before, asked of the cluster on the first such
    /// line, on a thread of its own (the log line comes on librdkafka's
    /// thread, which must not block).
    previous: Option<PreviousOwner>,
}

/// Looks up who last owned a producer's task: the instance that last
/// reported it to the instances' group, and in which state.
pub(crate) type PreviousOwner = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// The explanation of a wait for an earlier owner's transaction, for the
/// producer of `owner` with `transactional_id`; `previous` names that
/// earlier owner when it is known.
fn pid_wait_explanation(owner: &str, transactional_id: &str, previous: Option<&str>) -> String {
    let previous = previous.map_or_else(
        || "a previous owner".to_string(),
        |previous| format!("its previous owner, {previous},"),
    );
    format!(
        "{owner}: waiting for Kafka's transaction coordinator to finish the transaction \
         {previous} left open on transactional id `{transactional_id}` (it died, or lost the \
         task mid-transaction, or was committing it): the coordinator aborts an open one, \
         and until its markers are written it answers this producer's InitProducerId with \
         CONCURRENT_TRANSACTIONS; librdkafka retries every 500 ms, and its repeated `Failed \
         to acquire transactional PID` warnings are logged at DEBUG"
    )
}

impl PidWait {
    /// librdkafka's text for Kafka's CONCURRENT_TRANSACTIONS.
    const CONCURRENT: &'static str = "concurrent operation on the same transaction";

    /// Whether `message` (of facility `fac`) is a retry of `InitProducerId`
    /// waiting for an earlier transaction, explained here instead of
    /// logged as librdkafka says it.
    fn explains(&self, fac: &str, message: &str) -> bool {
        if fac != "GETPID" || !message.contains(Self::CONCURRENT) {
            return false;
        }
        if self.said.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::debug!(target: "librdkafka", facility = fac, "{message}");
            return true;
        }
        let (owner, id) = (self.owner.clone(), self.transactional_id.clone());
        let say = move |previous: Option<String>| {
            let text = pid_wait_explanation(&owner, &id, previous.as_deref());
            tracing::info!(transactional_id = %id, "{text}");
        };
        match self.previous.clone() {
            None => say(None),
            Some(lookup) => {
                let spawned = std::thread::Builder::new()
                    .name("parsley previous owner".into())
                    .spawn(move || say(lookup()));
                if let Err(error) = spawned {
                    tracing::debug!(error = %error, "the previous owner could not be looked up");
                }
            }
        }
        true
    }
}

/// Whether the process has explained librdkafka's `Failed to acquire
/// idempotence PID … retrying` once ([`explains_idempotence_pid`]).
static IDEMPOTENCE_PID_SAID: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether `message` (of facility `fac`) is an idempotent producer's retry
/// of `InitProducerId`, explained here instead of logged as librdkafka
/// says it: the first of the process at INFO, the repeats at DEBUG. A
/// cluster that is loading its transaction state (just started, or a
/// coordinator moving) answers COORDINATOR_LOAD_IN_PROGRESS or
/// NOT_COORDINATOR for a while, and `produce --rate` makes one producer
/// per batch, each of which met it; librdkafka retries by itself and sends
/// nothing until it has an id, so nothing is lost or doubled. Kafka's own
/// Java producer logs these retries at DEBUG.
fn explains_idempotence_pid(fac: &str, message: &str) -> bool {
    if fac != "GETPID" || !message.contains("idempotence PID") || !message.ends_with("retrying") {
        return false;
    }
    if IDEMPOTENCE_PID_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::debug!(target: "librdkafka", facility = fac, "{message}");
    } else {
        tracing::info!(
            "an idempotent producer is waiting for its producer id (InitProducerId) while the \
             cluster gets ready ({message}): librdkafka retries by itself and sends nothing \
             until it has one, so no record is lost or doubled; further such retries of this \
             process are logged at DEBUG"
        );
    }
    true
}

impl ClientContext for DeliveryContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if let Some(wait) = &self.pid_wait {
            if wait.explains(fac, log_message) {
                return;
            }
        }
        if explains_idempotence_pid(fac, log_message) {
            return;
        }
        log_librdkafka(level, fac, log_message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        error_librdkafka(&error, reason);
    }

    // Only the clients made with `statistics.interval.ms` report any: the
    // runtime's transactional producers.
    fn stats(&self, statistics: rdkafka::Statistics) {
        crate::stats::publish(&statistics);
    }
}

/// Who waits for a record's delivery report.
enum Waiter {
    /// Nobody: a transaction's commit fails if any of its records failed,
    /// so the runtime sends without a report per record. One shared
    /// instance serves every such record: no allocation per send.
    Nobody,
    /// A [`Delivery`].
    One(Mutex<Option<oneshot::Sender<Reply>>>),
}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = Arc<Waiter>;

    fn delivery(&self, result: &DeliveryResult<'_>, waiter: Self::DeliveryOpaque) {
        let Waiter::One(reply) = &*waiter else {
            return;
        };
        let outcome = match result {
            Ok(message) => Ok(message.offset()),
            Err((error, _)) => Err(error.clone()),
        };
        let taken = reply
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        // The receiver may be gone (a dropped Delivery): nobody is waiting.
        if let Some(reply) = taken {
            let _ = reply.send(outcome);
        }
    }
}

type KafkaProducer = PumpedProducer<DeliveryContext>;

/// Starts serving `producer`'s events (its delivery reports, log and
/// statistics) on a thread of its own.
fn pumped(
    client: &'static str,
    producer: Result<BaseProducer<DeliveryContext>, KafkaError>,
) -> Result<KafkaProducer, LiveError> {
    let producer = producer.map_err(|source| LiveError::Client {
        client,
        source: Box::new(source),
    })?;
    PumpedProducer::new(producer).map_err(|error| LiveError::Join {
        what: format!("starting the event thread of a {client}"),
        source: JoinFailure::Spawn(error),
    })
}

/// A record on its way: [`Delivery::wait`] gives the offset it landed at.
#[must_use = "a delivery tells where the record landed, or that it failed"]
pub struct Delivery {
    reply: oneshot::Receiver<Reply>,
    tp: Tp,
    producer: String,
    /// To ask, on failure, whether the producer failed fatally and why;
    /// weak, so a pending delivery does not keep a dropped producer alive.
    handle: Weak<KafkaProducer>,
    /// When waiting gives up, and the bound it was queued with.
    bound: Option<(Instant, Duration)>,
}

impl Delivery {
    /// Where the record is going.
    pub fn tp(&self) -> &Tp {
        &self.tp
    }

    /// Waits for the delivery report. Bounded by librdkafka's
    /// `message.timeout.ms`, which for a transactional producer is at most
    /// its transaction timeout; for a [`PlainProducer`] also by the runtime's
    /// deadline from when the record was queued ([`LiveError::Overran`]).
    pub async fn wait(mut self) -> Result<u64, LiveError> {
        let reply = match self.bound {
            None => (&mut self.reply).await,
            Some((until, deadline)) => {
                match tokio::time::timeout_at(until.into(), &mut self.reply).await {
                    Ok(reply) => reply,
                    Err(_) => {
                        return Err(LiveError::Overran {
                            what: format!(
                                "the delivery of a record to {} by producer `{}`",
                                self.tp, self.producer
                            ),
                            deadline,
                        })
                    }
                }
            }
        };
        self.settle(reply)
    }

    /// [`Delivery::wait`] on a thread that is not tokio's, for at most
    /// `deadline` ([`LiveError::Overran`] past it): for a record whose
    /// transaction has committed, whose report is on its way.
    pub fn wait_blocking(mut self, deadline: Duration) -> Result<u64, LiveError> {
        let until = Instant::now() + deadline;
        loop {
            match self.reply.try_recv() {
                Ok(reply) => return self.settle(Ok(reply)),
                Err(oneshot::error::TryRecvError::Closed) => {
                    return Err(LiveError::DeliveryLost {
                        producer: self.producer,
                        tp: self.tp,
                    })
                }
                Err(oneshot::error::TryRecvError::Empty) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(oneshot::error::TryRecvError::Empty) => {
                    return Err(LiveError::Overran {
                        what: format!(
                            "the delivery report of a record to {} by producer `{}`",
                            self.tp, self.producer
                        ),
                        deadline,
                    })
                }
            }
        }
    }

    /// The offset a delivery report gives, or why there is none.
    fn settle(self, reply: Result<Reply, oneshot::error::RecvError>) -> Result<u64, LiveError> {
        match reply {
            // With acks=all, which idempotence implies, the broker always
            // reports the offset; a missing one is not a place to guess.
            Ok(Ok(offset)) => our_offset(offset).ok_or(LiveError::NoOffset {
                producer: self.producer,
                tp: self.tp,
            }),
            Ok(Err(source)) => Err(match self.handle.upgrade() {
                Some(producer) => send_failure(&producer, &self.producer, &self.tp, source),
                None => LiveError::Send {
                    producer: self.producer,
                    tp: self.tp,
                    class: TxnErrorClass::of(&source),
                    fenced: is_fenced(&source),
                    source: Box::new(source),
                },
            }),
            Err(_) => Err(LiveError::DeliveryLost {
                producer: self.producer,
                tp: self.tp,
            }),
        }
    }
}

/// True when `source` says the producer was fenced, or when it is fatal and
/// the producer's remembered fatal error says so: after a fatal error
/// librdkafka fails every later call with the generic code `_FATAL`, and only
/// the remembered error tells that it was a fencing.
fn fenced(producer: &KafkaProducer, source: &KafkaError) -> bool {
    is_fenced(source)
        || (TxnErrorClass::of(source) == TxnErrorClass::Fatal
            && producer
                .client()
                .fatal_error()
                .is_some_and(|(code, _)| is_fenced_code(code)))
}

fn send_failure(producer: &KafkaProducer, name: &str, tp: &Tp, source: KafkaError) -> LiveError {
    LiveError::Send {
        producer: name.to_owned(),
        tp: tp.clone(),
        class: TxnErrorClass::of(&source),
        fenced: fenced(producer, &source),
        source: Box::new(source),
    }
}

/// Queues `record` for `tp` on `producer` with a report for a [`Delivery`];
/// never blocks.
fn enqueue(
    producer: &Arc<KafkaProducer>,
    name: &str,
    tp: &Tp,
    record: &RecordData,
) -> Result<Delivery, LiveError> {
    let (reply, wait) = oneshot::channel();
    let waiter = Arc::new(Waiter::One(Mutex::new(Some(reply))));
    queue(producer, name, tp, record, waiter)?;
    Ok(Delivery {
        reply: wait,
        tp: tp.clone(),
        producer: name.to_owned(),
        handle: Arc::downgrade(producer),
        bound: None,
    })
}

/// Queues `record` for `tp` on `producer`, reporting its delivery to
/// `waiter`; never blocks, but waits out a full local queue.
fn queue(
    producer: &Arc<KafkaProducer>,
    name: &str,
    tp: &Tp,
    record: &RecordData,
    waiter: Arc<Waiter>,
) -> Result<(), LiveError> {
    let mut base: BaseRecord<'_, [u8], [u8], _> =
        BaseRecord::with_opaque_to(tp.topic.as_str(), waiter).partition(kafka_partition(tp));
    // A record without headers (a changelog record) gets no header list:
    // librdkafka allocates one for an empty list too.
    if !record.headers.is_empty() {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for header in &record.headers {
            headers = headers.insert(KafkaHeader {
                key: &header.name,
                value: Some(header.value.as_ref()),
            });
        }
        base = base.headers(headers);
    }
    // Kafka's "no timestamp" is -1: let the producer stamp the time then.
    if record.timestamp >= 0 {
        base = base.timestamp(record.timestamp);
    }
    if let Some(key) = &record.key {
        base = base.key(key.as_ref());
    }
    if let Some(value) = &record.value {
        base = base.payload(value.as_ref());
    }
    // A full local queue is back-pressure, not a failure: wait for the
    // background thread to hand records to the broker, then retry.
    // The clock is read only once the queue is full: not per record.
    let mut deadline = None;
    loop {
        match producer.send(base) {
            Ok(()) => break,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned))
                if Instant::now()
                    < *deadline.get_or_insert_with(|| Instant::now() + QUEUE_FULL_PATIENCE) =>
            {
                base = returned;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((source, _)) => return Err(send_failure(producer, name, tp, source)),
        }
    }
    Ok(())
}

/// librdkafka's own flush: waits up to `timeout` for every queued record
/// to be acknowledged (the event thread, `pump.rs`, serves their reports).
/// Not rust-rdkafka's: that one polls the reports itself in 100-ms polls,
/// which the event thread leaves empty, so it returned only when a poll ran
/// out (up to 100 ms after the last acknowledgement), spinning through the
/// end of a poll an event cut short. Its outcome is not reported: a commit
/// flushes again, and fails with the record that failed.
fn flush(producer: &KafkaProducer, timeout: Duration) {
    let timeout = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the client is alive (borrowed), and `rd_kafka_flush` may be
    // called from any thread.
    let _ = unsafe { rdkafka::bindings::rd_kafka_flush(producer.client().native_ptr(), timeout) };
}

/// Commits the open transaction, librdkafka's flush first: rust-rdkafka's
/// `commit_transaction` flushes through its own (see [`flush`]), which then
/// finds nothing left to wait for.
fn commit(producer: &KafkaProducer, timeout: Duration) -> Result<(), KafkaError> {
    let started = Instant::now();
    flush(producer, timeout);
    producer.commit_transaction(timeout.saturating_sub(started.elapsed()))
}

/// A transactional producer: the model's producer handle plus its
/// transaction calls. Every error of a call carries its
/// [`TxnErrorClass`] and whether the producer was fenced.
pub struct TxnProducer {
    inner: Arc<KafkaProducer>,
    transactional_id: String,
    config: LiveConfig,
    /// `send_offsets_to_transaction` needs a group's metadata, which only a
    /// consumer of the group can make; made once per group.
    groups: Mutex<HashMap<String, Arc<ConsumerGroupMetadata>>>,
    /// The waiter of every record sent without a report.
    nobody: Arc<Waiter>,
    /// The topics the open transaction wrote to: a broker that refuses to
    /// add one of them (a missing `Write` ACL) does not say which.
    written: Mutex<Vec<String>>,
}

impl TxnProducer {
    /// Creates the producer without initialising it; see [`TxnProducer::init`].
    pub fn new(config: &LiveConfig, transactional_id: &str) -> Result<TxnProducer, LiveError> {
        let owner = format!("producer `{transactional_id}`");
        TxnProducer::owned_by(config, transactional_id, owner, None, DEFAULT_LINGER)
    }

    /// [`TxnProducer::new`] for what `owner` names (e.g. `task balances/2`),
    /// which the explanation of a wait for an earlier owner's transaction
    /// names.
    /// `previous` looks up who owned it before, when the explanation needs
    /// it. `linger` is librdkafka's `linger.ms`: how long a record may wait
    /// to be batched with later ones (a commit sends what waits at once).
    pub(crate) fn owned_by(
        config: &LiveConfig,
        transactional_id: &str,
        owner: String,
        previous: Option<PreviousOwner>,
        linger: Duration,
    ) -> Result<TxnProducer, LiveError> {
        let context = DeliveryContext {
            pid_wait: Some(PidWait {
                transactional_id: transactional_id.to_owned(),
                owner,
                said: std::sync::atomic::AtomicBool::new(false),
                previous,
            }),
        };
        let inner = config
            .client_config(&[
                ("transactional.id", transactional_id.to_owned()),
                ("transaction.timeout.ms", millis(config.transaction_timeout)),
                ("enable.idempotence", "true".into()),
                // A transaction begun right after a commit is refused with
                // CONCURRENT_TRANSACTIONS until the coordinator has written
                // the last one's markers, and librdkafka retries only after
                // `retry.backoff.ms`: 100 ms by default, a whole commit
                // interval lost; in the live benchmark most commits waited
                // it out. The Java producer retries this case after 20 ms.
                ("retry.backoff.ms", "10".into()),
                ("statistics.interval.ms", crate::stats::interval_ms()),
                ("linger.ms", millis(linger)),
            ])
            .create_with_context::<_, BaseProducer<DeliveryContext>>(context);
        let inner = pumped("transactional producer", inner)?;
        Ok(TxnProducer {
            inner: Arc::new(inner),
            transactional_id: transactional_id.to_owned(),
            config: config.clone(),
            groups: Mutex::new(HashMap::new()),
            nobody: Arc::new(Waiter::Nobody),
            written: Mutex::new(Vec::new()),
        })
    }

    /// The producer's `transactional.id`; for a task,
    /// `<app>-<stage>-<partition>`.
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    fn failure(&self, op: TxnOp, source: KafkaError) -> LiveError {
        let written = self
            .written
            .lock()
            .map(|written| written.clone())
            .unwrap_or_default();
        LiveError::Transaction {
            transactional_id: self.transactional_id.clone(),
            written,
            op,
            class: TxnErrorClass::of(&source),
            fenced: fenced(&self.inner, &source),
            source: Box::new(source),
        }
    }

    /// Runs a blocking transactional call with the configured timeout.
    async fn call(
        &self,
        op: TxnOp,
        call: impl FnOnce(&KafkaProducer, Duration) -> Result<(), KafkaError> + Send + 'static,
    ) -> Result<(), LiveError> {
        let inner = Arc::clone(&self.inner);
        let timeout = self.config.timeout;
        let result = blocking(format!("{op} of `{}`", self.transactional_id), move || {
            Ok(call(&inner, timeout))
        })
        .await?;
        result.map_err(|source| self.failure(op, source))
    }

    /// Runs a transactional call with the configured timeout and waits for
    /// it, blocking, until the runtime's deadline ([`bounded`]): past it,
    /// [`LiveError::Overran`], and this producer must be dropped. For
    /// drivers that run each task on a thread of its own.
    fn call_here(
        &self,
        op: TxnOp,
        call: impl FnOnce(&KafkaProducer, Duration) -> Result<(), KafkaError> + Send + 'static,
    ) -> Result<(), LiveError> {
        let inner = Arc::clone(&self.inner);
        let timeout = self.config.timeout;
        #[cfg(feature = "mutations")]
        let stall = crate::faults::take(op, &self.transactional_id);
        bounded(
            || format!("{op} of `{}`", self.transactional_id),
            self.config.deadline(),
            move || {
                #[cfg(feature = "mutations")]
                if let Some(stall) = stall {
                    std::thread::sleep(stall);
                }
                call(&inner, timeout)
            },
        )?
        .map_err(|source| self.failure(op, source))
    }

    /// [`TxnProducer::init`] on this thread (blocks).
    pub fn init_blocking(&self) -> Result<(), LiveError> {
        self.call_here(TxnOp::Init, |producer, timeout| {
            producer.init_transactions(timeout)
        })
    }

    /// [`TxnProducer::send_offsets`] on this thread (blocks).
    pub fn send_offsets_blocking(
        &self,
        group: &str,
        offsets: &[(Tp, CommittedOffset)],
    ) -> Result<(), LiveError> {
        let list = self.offset_list(offsets)?;
        // Not a `match` on the lookup: its guard would live through the arms.
        let known = self.lock_groups().get(group).cloned();
        let metadata = match known {
            Some(known) => known,
            None => {
                let made = Arc::new(group_metadata(&self.config, group)?);
                self.lock_groups()
                    .insert(group.to_owned(), Arc::clone(&made));
                made
            }
        };
        self.call_here(TxnOp::SendOffsets, move |producer, timeout| {
            producer.send_offsets_to_transaction(&list, &metadata, timeout)
        })
    }

    /// Sends whatever lingers in the producer's queue at once and waits, up
    /// to the configured timeout, until every queued record is acknowledged.
    /// A commit flushes too; flushing *before* the offsets go into the
    /// transaction keeps them pending only for the commit's own round trip,
    /// not for the linger and the produce round trips as well: a
    /// `read_committed` reader of the group's offsets (the audit, a task
    /// starting) is answered "unstable" until they are committed. Its
    /// failure is not reported here: the commit that follows flushes again,
    /// and fails with the record that failed.
    /// librdkafka's own flush ([`flush`]).
    pub(crate) fn flush_before_offsets(&self) {
        flush(&self.inner, self.config.timeout);
    }

    /// [`TxnProducer::commit`] on this thread (blocks).
    pub fn commit_blocking(&self) -> Result<(), LiveError> {
        self.call_here(TxnOp::Commit, commit)
    }

    /// [`TxnProducer::abort`] on this thread (blocks).
    pub fn abort_blocking(&self) -> Result<(), LiveError> {
        self.call_here(TxnOp::Abort, |producer, timeout| {
            producer.abort_transaction(timeout)
        })
    }

    fn offset_list(
        &self,
        offsets: &[(Tp, CommittedOffset)],
    ) -> Result<TopicPartitionList, LiveError> {
        let mut list = TopicPartitionList::with_capacity(offsets.len());
        for (tp, committed) in offsets {
            let offset = kafka_offset(tp, committed.offset)?;
            let mut element = list.add_partition(tp.topic.as_str(), kafka_partition(tp));
            element
                .set_offset(offset)
                .map_err(|source| self.failure(TxnOp::SendOffsets, source))?;
            element.set_metadata(&committed.metadata);
        }
        Ok(list)
    }

    /// `init_transactions`: registers the transactional id with the
    /// coordinator, fencing older producers and aborting their open
    /// transaction.
    pub async fn init(&self) -> Result<(), LiveError> {
        self.call(TxnOp::Init, |producer, timeout| {
            producer.init_transactions(timeout)
        })
        .await
    }

    /// Opens a transaction. Local to the producer: the broker learns of it
    /// with the first send or offsets.
    pub fn begin(&self) -> Result<(), LiveError> {
        if let Ok(mut written) = self.written.lock() {
            written.clear();
        }
        self.inner
            .begin_transaction()
            .map_err(|source| self.failure(TxnOp::Begin, source))
    }

    /// Queues a record in the open transaction without waiting for it.
    pub fn enqueue(&self, tp: &Tp, record: &RecordData) -> Result<Delivery, LiveError> {
        self.wrote(tp);
        enqueue(&self.inner, &self.transactional_id, tp, record)
    }

    /// Notes that the open transaction writes to `tp`'s topic.
    fn wrote(&self, tp: &Tp) {
        if let Ok(mut written) = self.written.lock() {
            if !written.iter().any(|topic| topic == tp.topic.as_str()) {
                written.push(tp.topic.as_str().to_owned());
            }
        }
    }

    /// Queues a record in the open transaction with no delivery report:
    /// [`TxnProducer::commit`] flushes it and fails if it failed. What the
    /// runtime sends with; nothing is allocated per record beyond
    /// librdkafka's own copy.
    pub fn enqueue_unreported(&self, tp: &Tp, record: &RecordData) -> Result<(), LiveError> {
        self.wrote(tp);
        queue(
            &self.inner,
            &self.transactional_id,
            tp,
            record,
            Arc::clone(&self.nobody),
        )
    }

    /// Sends a record in the open transaction and returns its offset.
    pub async fn send(&self, tp: &Tp, record: &RecordData) -> Result<u64, LiveError> {
        self.enqueue(tp, record)?.wait().await
    }

    /// Stages `group`'s offsets, each with its metadata string, in the open
    /// transaction: they become the group's committed offsets only if it
    /// commits.
    pub async fn send_offsets(
        &self,
        group: &str,
        offsets: &[(Tp, CommittedOffset)],
    ) -> Result<(), LiveError> {
        let list = self.offset_list(offsets)?;
        let metadata = self.group_metadata(group).await?;
        self.call(TxnOp::SendOffsets, move |producer, timeout| {
            producer.send_offsets_to_transaction(&list, &metadata, timeout)
        })
        .await
    }

    async fn group_metadata(&self, group: &str) -> Result<Arc<ConsumerGroupMetadata>, LiveError> {
        if let Some(known) = self.lock_groups().get(group) {
            return Ok(Arc::clone(known));
        }
        let config = self.config.clone();
        let name = group.to_owned();
        let metadata = blocking(format!("metadata of group `{group}`"), move || {
            group_metadata(&config, &name)
        })
        .await?;
        let metadata = Arc::new(metadata);
        self.lock_groups()
            .insert(group.to_owned(), Arc::clone(&metadata));
        Ok(metadata)
    }

    fn lock_groups(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ConsumerGroupMetadata>>> {
        // The map is only ever inserted into whole: a panic while holding the
        // lock cannot leave it half-written, so a poisoned lock is fine.
        self.groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Flushes the transaction's records and commits it: a commit marker on
    /// every partition it wrote to, and its group offsets applied.
    pub async fn commit(&self) -> Result<(), LiveError> {
        self.call(TxnOp::Commit, commit).await
    }

    /// Aborts the open transaction: queued records are purged, an abort
    /// marker goes on every partition it wrote to, its offsets are dropped.
    pub async fn abort(&self) -> Result<(), LiveError> {
        self.call(TxnOp::Abort, |producer, timeout| {
            producer.abort_transaction(timeout)
        })
        .await
    }
}

/// The metadata of `group` for `send_offsets_to_transaction`, from a
/// consumer that never joins: it carries the group id with no generation,
/// which the broker accepts from a producer whose consumer assigns partitions
/// by hand.
fn group_metadata(config: &LiveConfig, group: &str) -> Result<ConsumerGroupMetadata, LiveError> {
    let consumer = config
        .client_config(&[
            ("group.id", group.to_owned()),
            ("enable.auto.commit", "false".into()),
        ])
        .create_with_context::<_, BaseConsumer<LogContext>>(LogContext)
        .map_err(|source| LiveError::Client {
            client: "group metadata consumer",
            source: Box::new(source),
        })?;
    consumer.group_metadata().ok_or(LiveError::Client {
        client: "group metadata consumer",
        source: Box::new(KafkaError::ClientCreation(
            "the consumer has no group metadata".into(),
        )),
    })
}

/// An idempotent producer outside any transaction: the model's `append`.
///
/// Each record's delivery is bounded by the configured timeout
/// ([`LiveConfig::timeout`], librdkafka's `message.timeout.ms`), and waiting
/// for it by the runtime's deadline ([`LiveConfig::deadline`]): a broker that
/// dies mid-batch fails every record still on its way within that bound,
/// naming the tp, instead of librdkafka's default five minutes.
pub struct PlainProducer {
    inner: Arc<KafkaProducer>,
    deadline: Duration,
}

impl PlainProducer {
    /// Creates the producer; idempotent, with no transactional id.
    pub fn new(config: &LiveConfig) -> Result<PlainProducer, LiveError> {
        let inner = config
            .client_config(&[
                ("enable.idempotence", "true".into()),
                ("message.timeout.ms", millis(config.timeout)),
            ])
            .create_with_context::<_, BaseProducer<DeliveryContext>>(DeliveryContext::default());
        let inner = pumped("plain producer", inner)?;
        Ok(PlainProducer {
            inner: Arc::new(inner),
            deadline: config.deadline(),
        })
    }

    /// Queues a record without waiting for it.
    pub fn enqueue(&self, tp: &Tp, record: &RecordData) -> Result<Delivery, LiveError> {
        let mut delivery = enqueue(&self.inner, "plain", tp, record)?;
        delivery.bound = Some((Instant::now() + self.deadline, self.deadline));
        Ok(delivery)
    }

    /// Appends a record and returns its offset.
    pub async fn append(&self, tp: &Tp, record: &RecordData) -> Result<u64, LiveError> {
        self.enqueue(tp, record)?.wait().await
    }
}

#[cfg(test)]
mod pid_wait_tests {
    use super::*;

    /// Issue 29: librdkafka's `GETPID` warning during a failover (the
    /// coordinator still completing an earlier owner's transaction) is
    /// explained once at INFO, naming the task and the transactional id;
    /// its repeats go to DEBUG, and other lines pass through.
    #[test]
    fn concurrent_transactions_at_init_are_explained_once() {
        let wait = PidWait {
            transactional_id: "shop-balances-2".into(),
            owner: "task balances/2".into(),
            said: std::sync::atomic::AtomicBool::new(false),
            previous: None,
        };
        let line = "[thrd:main]: Failed to acquire transactional PID from broker \
                    TxnCoordinator/1: Broker: Producer attempted to update a transaction while \
                    another concurrent operation on the same transaction was ongoing: retrying";
        let text = crate::client::log::logged(|| {
            for _ in 0..6 {
                assert!(wait.explains("GETPID", line));
            }
            assert!(!wait.explains("GETPID", "Failed to acquire transactional PID: timed out"));
            assert!(!wait.explains("FAIL", line));
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(lines[0].contains(" INFO "), "{text}");
        assert!(lines[0].contains("task balances/2"), "{text}");
        assert!(lines[0].contains("`shop-balances-2`"), "{text}");
        assert!(lines[0].contains("CONCURRENT_TRANSACTIONS"), "{text}");
        assert!(lines[0].contains("a previous owner left open"), "{text}");
        // Known, the previous owner is named.
        let named = pid_wait_explanation(
            "task balances/2",
            "shop-balances-2",
            Some("instance host-1-42 (it last reported the task running)"),
        );
        assert!(
            named.contains("its previous owner, instance host-1-42 (it last reported the task running), left open on transactional id `shop-balances-2`"),
            "{named}"
        );
    }

    /// `produce`'s idempotent producers waiting for a producer id while the
    /// cluster loads: explained once per process at INFO, the rest DEBUG.
    #[test]
    fn idempotence_pid_retries_are_explained_once() {
        let line = "[thrd:main]: Failed to acquire idempotence PID from broker \
                    sasl_ssl://127.0.0.1:29095/1: Broker: Coordinator load in progress: retrying";
        let text = crate::client::log::logged(|| {
            for _ in 0..13 {
                assert!(explains_idempotence_pid("GETPID", line));
            }
            assert!(!explains_idempotence_pid(
                "GETPID",
                "Failed to acquire idempotence PID: fatal"
            ));
        });
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(" INFO ") && text.contains("Coordinator load in progress"),
            "{text}"
        );
        assert!(text.contains("no record is lost or doubled"), "{text}");
    }
}
