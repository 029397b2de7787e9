//! A thin wrapper over rust-rdkafka with the operations of the in-memory
//! model (`parsley_sim::model::Cluster`) where the two overlap: topics,
//! transactional and plain producers, `read_committed` and
//! `read_uncommitted` fetches from an offset, watermarks, and committed group
//! offsets with their metadata. The model-fidelity tests run the model's
//! transactional cases through it against a real broker.
//!
//! Every call is `async`. librdkafka's transactional calls, metadata
//! requests, offset look-ups and consumer polls block, so they run on tokio's
//! blocking pool ([`tokio::task::spawn_blocking`]); each is bounded by
//! [`LiveConfig::timeout`]. The runtime must therefore be tokio's.
//!
//! | model (`Cluster`) | here |
//! |---|---|
//! | `create_topic`, `partitions` | [`LiveClient::create_topic`], [`LiveClient::partitions`] |
//! | `init_producer` | [`LiveClient::producer`] (creates the producer and runs `init_transactions`) |
//! | `begin`, `send`, `send_offsets`, `commit`, `abort` | [`TxnProducer`]'s methods of the same names |
//! | `append` | [`PlainProducer::append`] (idempotent, no transaction) |
//! | `fetch(tp, from, usize::MAX, isolation)` | [`LiveConsumer::fetch`] |
//! | `high_watermark`, `last_stable_offset` | [`LiveClient::watermarks`] |
//! | `committed(group, tp)` | [`LiveConsumer::committed`] |

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, ConsumerGroupMetadata};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header as KafkaHeader, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::sync::oneshot;

use parsley::record::{ConsumedRecord, Header, RecordData};
use parsley::task::CommittedOffset;
use parsley::tp::Tp;

use super::error::{is_fenced, is_fenced_code, LiveError, TxnErrorClass, TxnOp};

/// The environment variable the live tests read the broker address from;
/// `scripts/kafka/broker.sh start` prints it.
pub const BOOTSTRAP_ENV: &str = "KAFKA_BOOTSTRAP_SERVERS";

/// How long a blocking call may take unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a send waits for room in a full producer queue before failing.
const QUEUE_FULL_PATIENCE: Duration = Duration::from_secs(30);

/// How long [`LiveClient::new`] tries to reach the cluster before it says
/// which bootstrap address failed and why.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Kafka's and librdkafka's default `transaction.timeout.ms`.
pub const DEFAULT_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach the cluster and how long to wait for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveConfig {
    /// librdkafka's `bootstrap.servers`: `host:port` pairs, comma-separated.
    pub bootstrap_servers: String,
    /// The bound on every blocking call: transactional calls, metadata and
    /// offset requests, a whole [`LiveConsumer::fetch`].
    pub timeout: Duration,
    /// The producers' `transaction.timeout.ms`: the broker aborts (and
    /// fences) a transaction open longer than this.
    pub transaction_timeout: Duration,
    /// How long [`LiveClient::new`] tries to reach a bootstrap address.
    pub connect_timeout: Duration,
    /// Extra librdkafka properties for every client, applied last, so they
    /// override the adapter's own settings.
    pub properties: Vec<(String, String)>,
}

impl LiveConfig {
    /// The cluster at `bootstrap_servers`, with the default timeout and
    /// transaction timeout and no extra properties.
    pub fn new(bootstrap_servers: impl Into<String>) -> LiveConfig {
        LiveConfig {
            bootstrap_servers: bootstrap_servers.into(),
            timeout: DEFAULT_TIMEOUT,
            transaction_timeout: DEFAULT_TRANSACTION_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            properties: Vec::new(),
        }
    }

    /// The broker named by `KAFKA_BOOTSTRAP_SERVERS`, if it is set and not
    /// blank.
    pub fn from_env() -> Option<LiveConfig> {
        std::env::var(BOOTSTRAP_ENV)
            .ok()
            .filter(|servers| !servers.trim().is_empty())
            .map(LiveConfig::new)
    }

    /// The same with another bound on every blocking call.
    pub fn with_timeout(mut self, timeout: Duration) -> LiveConfig {
        self.timeout = timeout;
        self
    }

    /// The same with another `transaction.timeout.ms` for the producers.
    pub fn with_transaction_timeout(mut self, timeout: Duration) -> LiveConfig {
        self.transaction_timeout = timeout;
        self
    }

    /// The same with another bound on reaching the cluster at start.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> LiveConfig {
        self.connect_timeout = timeout;
        self
    }

    /// The same with one more librdkafka property for every client.
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> LiveConfig {
        self.properties.push((key.into(), value.into()));
        self
    }

    /// The runtime's own bound on a blocking librdkafka call: one and a half
    /// times [`LiveConfig::timeout`] plus a second. librdkafka is given
    /// `timeout` and usually keeps it, but a transactional call can block
    /// past it when the coordinator goes away (librdkafka issue 5456); a call
    /// still running at the deadline is abandoned ([`LiveError::Overran`]).
    pub fn deadline(&self) -> Duration {
        self.timeout + self.timeout / 2 + Duration::from_secs(1)
    }

    /// `settings` on top of the bootstrap servers and this instance's client
    /// id, then the user's properties. Every client the process makes
    /// carries `client.id` = `parsley-<instance>` ([`instance_name`]:
    /// `<host>-<pid>`), so the broker's logs, quotas and Kafka's own tools
    /// tell the processes apart, unless a setting or a property
    /// ([`LiveConfig::with_property`]) names another.
    ///
    /// [`instance_name`]: crate::instance::instance_name
    pub(crate) fn client_config(&self, settings: &[(&str, String)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        config.set("client.id", client_id());
        for (key, value) in settings {
            config.set(*key, value);
        }
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }
}

/// The `client.id` of every client this process makes unless configured
/// otherwise: `parsley-<host>-<pid>`.
pub fn client_id() -> String {
    format!("parsley-{}", crate::instance::instance_name())
}

/// For tests against a broker: the one `KAFKA_BOOTSTRAP_SERVERS` names.
/// Without it, `None` after a note on stderr, so a test can return early;
/// but when `CI` is set, a panic, so CI never skips a live test silently.
pub fn test_broker() -> Option<LiveConfig> {
    if let Some(config) = LiveConfig::from_env() {
        return Some(config);
    }
    let in_ci = std::env::var_os("CI").is_some_and(|value| !value.is_empty());
    assert!(
        !in_ci,
        "{BOOTSTRAP_ENV} is not set, but CI is: start the broker first with \
         `export \"$(bash scripts/kafka/broker.sh start)\"`"
    );
    eprintln!(
        "note: live test skipped: {BOOTSTRAP_ENV} is not set \
         (`export \"$(bash scripts/kafka/broker.sh start)\"` starts a broker)"
    );
    None
}

/// Which records a fetch may return: Kafka's `isolation.level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Records of committed transactions and plain records, below the last
    /// stable offset. What every Parsley consumer uses.
    ReadCommitted,
    /// Every data record up to the high watermark.
    ReadUncommitted,
}

impl Isolation {
    fn property(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// A tp's offsets as the broker reports them (ListOffsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Watermarks {
    /// The log start offset.
    pub low: u64,
    /// The log end offset.
    pub high_watermark: u64,
    /// The first offset of the earliest open transaction, or the high
    /// watermark.
    pub last_stable_offset: u64,
}

/// What [`LiveConsumer::fetch`] returned, with the fields of the model's
/// `Fetch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveFetch {
    /// Visible data records in offset order.
    pub records: Vec<ConsumedRecord>,
    /// The consumer's position after the fetch: past the last record and
    /// past any markers or aborted records skipped after it.
    pub next_offset: u64,
    /// The high watermark when the fetch began.
    pub high_watermark: u64,
    /// The last stable offset when the fetch began.
    pub last_stable_offset: u64,
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

pub(crate) fn kafka_partition(tp: &Tp) -> i32 {
    // Kafka's partitions are i32; one beyond that cannot exist, and the
    // broker answers UNKNOWN_TOPIC_OR_PARTITION for i32::MAX.
    i32::try_from(tp.partition).unwrap_or(i32::MAX)
}

pub(crate) fn kafka_offset(tp: &Tp, offset: u64) -> Result<Offset, LiveError> {
    i64::try_from(offset)
        .map(Offset::Offset)
        .map_err(|_| LiveError::OffsetTooLarge {
            tp: tp.clone(),
            offset,
        })
}

/// Offsets from the broker are never negative when valid; a negative one
/// (librdkafka's "no offset" sentinels) becomes `None`.
pub(crate) fn our_offset(offset: i64) -> Option<u64> {
    u64::try_from(offset).ok()
}

/// Runs a blocking librdkafka call on tokio's blocking pool.
async fn blocking<T, F>(what: impl Into<String>, call: F) -> Result<T, LiveError>
where
    F: FnOnce() -> Result<T, LiveError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(call)
        .await
        .map_err(|error| LiveError::Join {
            what: what.into(),
            reason: error.to_string(),
        })?
}

/// Runs a blocking librdkafka call on a thread of its own and waits for it
/// until `deadline`. A call still running then is abandoned: its thread is
/// left to finish (or not) and drops what it holds when it does, and the
/// caller gets [`LiveError::Overran`] and must replace the client. Thus no
/// task thread blocks on Kafka past a deadline, whatever librdkafka does.
pub(crate) fn bounded<T, F>(
    what: impl FnOnce() -> String,
    deadline: Duration,
    call: F,
) -> Result<T, LiveError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("parsley kafka call".into())
        .spawn(move || {
            // The caller may have given up: then nobody listens.
            let _ = reply.send(call());
        });
    if let Err(error) = spawned {
        return Err(LiveError::Join {
            what: what(),
            reason: format!("the call's thread could not start: {error}"),
        });
    }
    match answer.recv_timeout(deadline) {
        Ok(value) => Ok(value),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(LiveError::Overran {
            what: what(),
            deadline,
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(LiveError::Join {
            what: what(),
            reason: "the call's thread panicked".into(),
        }),
    }
}

// ----- librdkafka's log -----

/// The context of every client made here: librdkafka's log lines and
/// global errors go to `tracing` under the target `librdkafka`, at the level
/// librdkafka gives them ([`tracing_level`]), so `PARSLEY_LOG`'s
/// `librdkafka=…` directive filters all of them; and an error librdkafka
/// both logs and reports (a broker connection that failed, say) is printed
/// once, not twice.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogContext;

impl ClientContext for LogContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        log_librdkafka(level, fac, log_message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        error_librdkafka(&error, reason);
    }

    // Only the clients made with `statistics.interval.ms` report any: the
    // runtime's task consumers.
    fn stats(&self, statistics: rdkafka::Statistics) {
        crate::stats::publish(&statistics);
    }
}

impl ConsumerContext for LogContext {}

/// librdkafka's syslog level as a `tracing` level: emergency to error are
/// errors, warning a warning, notice and info info, debug debug.
pub fn tracing_level(level: RDKafkaLogLevel) -> tracing::Level {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => tracing::Level::ERROR,
        RDKafkaLogLevel::Warning => tracing::Level::WARN,
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => tracing::Level::INFO,
        RDKafkaLogLevel::Debug => tracing::Level::DEBUG,
    }
}

/// One event under the target `librdkafka` at `level`.
macro_rules! librdkafka_event {
    ($level:expr, $($rest:tt)+) => {
        match $level {
            tracing::Level::ERROR => tracing::event!(target: "librdkafka", tracing::Level::ERROR, $($rest)+),
            tracing::Level::WARN => tracing::event!(target: "librdkafka", tracing::Level::WARN, $($rest)+),
            tracing::Level::INFO => tracing::event!(target: "librdkafka", tracing::Level::INFO, $($rest)+),
            tracing::Level::DEBUG => tracing::event!(target: "librdkafka", tracing::Level::DEBUG, $($rest)+),
            tracing::Level::TRACE => tracing::event!(target: "librdkafka", tracing::Level::TRACE, $($rest)+),
        }
    };
}

/// What a client context does with one of librdkafka's log lines: logs it
/// under the target `librdkafka` at its level ([`tracing_level`]), unless it
/// repeats an error just reported through [`error_librdkafka`]. For
/// `ClientContext::log` of every context in the crate.
pub(crate) fn log_librdkafka(level: RDKafkaLogLevel, fac: &str, message: &str) {
    if echoes().log_line(Instant::now(), message) {
        librdkafka_event!(tracing_level(level), facility = fac, "{message}");
    }
}

/// What a client context does with one of librdkafka's global errors: logs
/// it under the target `librdkafka`, as an error if it is fatal and a
/// warning otherwise (librdkafka retries the rest by itself), unless a log
/// line just said the same. For `ClientContext::error` of every context in
/// the crate.
pub(crate) fn error_librdkafka(error: &KafkaError, reason: &str) {
    if !echoes().error_line(Instant::now(), reason) {
        return;
    }
    let fatal = error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal);
    let level = if fatal {
        tracing::Level::ERROR
    } else {
        tracing::Level::WARN
    };
    librdkafka_event!(level, error = %error, "{reason}");
}

fn echoes() -> std::sync::MutexGuard<'static, Echoes> {
    static ECHOES: Mutex<Echoes> = Mutex::new(Echoes::new());
    ECHOES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// librdkafka says most failures twice: once as a log line (`FAIL`,
/// `ERROR`, …) and once as a global error whose reason is the same text.
/// This remembers what was said in the last few seconds, so the second
/// saying is dropped whichever comes first.
#[derive(Debug)]
struct Echoes {
    /// (when, log line) and (when, error reason), newest last.
    lines: std::collections::VecDeque<(Instant, bool, String)>,
}

impl Echoes {
    /// How long a line is remembered.
    const WINDOW: Duration = Duration::from_secs(5);
    /// How many lines are remembered.
    const KEEP: usize = 64;

    const fn new() -> Echoes {
        Echoes {
            lines: std::collections::VecDeque::new(),
        }
    }

    fn forget_old(&mut self, now: Instant) {
        while self.lines.len() >= Self::KEEP
            || self
                .lines
                .front()
                .is_some_and(|(at, _, _)| now.saturating_duration_since(*at) > Self::WINDOW)
        {
            self.lines.pop_front();
        }
    }

    /// Whether a log line is to be printed: not when it repeats an error
    /// reason said in the window.
    fn log_line(&mut self, now: Instant, message: &str) -> bool {
        self.forget_old(now);
        let echo = self
            .lines
            .iter()
            .any(|(_, error, reason)| *error && !reason.is_empty() && message.contains(reason));
        self.lines.push_back((now, false, message.to_owned()));
        !echo
    }

    /// Whether an error is to be printed: not when a log line in the window
    /// said it (or the same error was just printed).
    fn error_line(&mut self, now: Instant, reason: &str) -> bool {
        self.forget_old(now);
        let echo = self.lines.iter().any(|(_, error, line)| {
            if *error {
                line == reason
            } else {
                !reason.is_empty() && line.contains(reason)
            }
        });
        self.lines.push_back((now, true, reason.to_owned()));
        !echo
    }
}

// ----- offset probes -----

/// Two group-less consumers, one per isolation level, for ListOffsets: a
/// `read_committed` ListOffsets(latest) answers the last stable offset, a
/// `read_uncommitted` one the high watermark.
pub(crate) struct Probes {
    committed: Arc<BaseConsumer<LogContext>>,
    uncommitted: Arc<BaseConsumer<LogContext>>,
    timeout: Duration,
    deadline: Duration,
}

impl Probes {
    pub(crate) fn new(config: &LiveConfig) -> Result<Probes, LiveError> {
        let probe = |isolation: Isolation| {
            config
                .client_config(&[
                    ("isolation.level", isolation.property().into()),
                    ("enable.auto.commit", "false".into()),
                ])
                .create_with_context::<_, BaseConsumer<LogContext>>(LogContext)
                .map_err(|source| LiveError::Client {
                    client: "offset probe consumer",
                    source: Box::new(source),
                })
        };
        Ok(Probes {
            committed: Arc::new(probe(Isolation::ReadCommitted)?),
            uncommitted: Arc::new(probe(Isolation::ReadUncommitted)?),
            timeout: config.timeout,
            deadline: config.deadline(),
        })
    }

    /// ListOffsets for `tp` at both isolation levels, each bounded by the
    /// runtime's deadline ([`bounded`]).
    pub(crate) fn watermarks(&self, tp: &Tp) -> Result<Watermarks, LiveError> {
        let query = |consumer: &Arc<BaseConsumer<LogContext>>| {
            let (consumer, topic, partition, timeout) = (
                Arc::clone(consumer),
                tp.topic.as_str().to_owned(),
                kafka_partition(tp),
                self.timeout,
            );
            bounded(
                || format!("reading the watermarks of {tp}"),
                self.deadline,
                move || consumer.fetch_watermarks(&topic, partition, timeout),
            )?
            .map_err(|source| LiveError::Watermarks {
                tp: tp.clone(),
                source: Box::new(source),
            })
        };
        let (low, high) = query(&self.uncommitted)?;
        let (_, stable) = query(&self.committed)?;
        Ok(Watermarks {
            low: our_offset(low).unwrap_or(0),
            high_watermark: our_offset(high).unwrap_or(0),
            last_stable_offset: our_offset(stable).unwrap_or(0),
        })
    }

    /// The topic's partition count, or `None` if the broker does not know it.
    pub(crate) fn partitions(&self, topic: &str) -> Result<Option<(u32, bool)>, LiveError> {
        let metadata = self
            .uncommitted
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|source| LiveError::Metadata {
                topic: topic.to_owned(),
                source: Box::new(source),
            })?;
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Ok(None);
        };
        if found.error().is_some() || found.partitions().is_empty() {
            return Ok(None);
        }
        let led = found
            .partitions()
            .iter()
            .all(|partition| partition.error().is_none() && partition.leader() >= 0);
        Ok(Some((found.partitions().len() as u32, led)))
    }
}

// ----- the client -----

/// The entry point: an admin client and offset probes for one cluster, and
/// the factory of producers and consumers.
pub struct LiveClient {
    config: LiveConfig,
    admin: Arc<AdminClient<LogContext>>,
    probes: Arc<Probes>,
}

impl LiveClient {
    /// Reaches the cluster `config` names, then creates the admin client and
    /// the offset probes. A cluster none of whose bootstrap addresses accepts
    /// a connection and answers Kafka's `ApiVersions` within
    /// [`LiveConfig::connect_timeout`] is an [`LiveError::Unreachable`]
    /// naming each address and its cause ([`crate::reach`]).
    pub fn new(config: LiveConfig) -> Result<LiveClient, LiveError> {
        let protocol = config
            .properties
            .iter()
            .rev()
            .find(|(key, _)| key == "security.protocol")
            .map(|(_, value)| value.as_str());
        let depth = super::reach::Depth::for_protocol(protocol);
        super::reach::probe(&config.bootstrap_servers, config.connect_timeout, depth).map_err(
            |failures| LiveError::Unreachable {
                bootstrap: config.bootstrap_servers.clone(),
                within: config.connect_timeout,
                failures,
            },
        )?;
        let admin = config
            .client_config(&[])
            .create_with_context::<_, AdminClient<LogContext>>(LogContext)
            .map_err(|source| LiveError::Client {
                client: "admin",
                source: Box::new(source),
            })?;
        let probes = Probes::new(&config)?;
        Ok(LiveClient {
            config,
            admin: Arc::new(admin),
            probes: Arc::new(probes),
        })
    }

    /// The configuration every client it makes is created with.
    pub fn config(&self) -> &LiveConfig {
        &self.config
    }

    /// Creates `topic` with `partitions` partitions and the broker's default
    /// replication factor, and waits until every partition has a leader, so
    /// the next produce does not race the topic's creation.
    pub async fn create_topic(&self, topic: &str, partitions: u32) -> Result<(), LiveError> {
        self.create_topic_with(topic, partitions, &[]).await
    }

    /// [`LiveClient::create_topic`] with topic configuration: `settings` are
    /// `kafka-topics.sh --config` pairs such as `cleanup.policy=compact`.
    pub async fn create_topic_with(
        &self,
        topic: &str,
        partitions: u32,
        settings: &[(String, String)],
    ) -> Result<(), LiveError> {
        if partitions == 0 {
            return Err(LiveError::InvalidPartitionCount {
                topic: topic.to_owned(),
            });
        }
        let count = i32::try_from(partitions).map_err(|_| LiveError::CreateTopic {
            topic: topic.to_owned(),
            partitions,
            reason: "Kafka allows at most 2^31 - 1 partitions".into(),
        })?;
        let mut new = NewTopic::new(topic, count, TopicReplication::Fixed(-1));
        for (key, value) in settings {
            new = new.set(key, value);
        }
        let options = AdminOptions::new()
            .operation_timeout(Some(self.config.timeout))
            .request_timeout(Some(self.config.timeout));
        let failed = |reason: String| LiveError::CreateTopic {
            topic: topic.to_owned(),
            partitions,
            reason,
        };
        let results = self
            .admin
            .create_topics([&new], &options)
            .await
            .map_err(|error| failed(error.to_string()))?;
        for result in results {
            match result {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    return Err(LiveError::TopicExists {
                        topic: topic.to_owned(),
                    })
                }
                Err((_, code)) => return Err(failed(code.to_string())),
            }
        }
        let deadline = Instant::now() + self.config.timeout;
        loop {
            let probes = Arc::clone(&self.probes);
            let name = topic.to_owned();
            let found = blocking(format!("metadata of `{topic}`"), move || {
                probes.partitions(&name)
            })
            .await?;
            if found == Some((partitions, true)) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LiveError::TopicNotReady {
                    topic: topic.to_owned(),
                    partitions,
                    timeout: self.config.timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The partition count of `topic`, or `None` if it does not exist.
    pub async fn partitions(&self, topic: &str) -> Result<Option<u32>, LiveError> {
        let probes = Arc::clone(&self.probes);
        let name = topic.to_owned();
        let found = blocking(format!("metadata of `{topic}`"), move || {
            probes.partitions(&name)
        })
        .await?;
        Ok(found.map(|(count, _)| count))
    }

    /// The log start, high watermark and last stable offset of `tp`.
    pub async fn watermarks(&self, tp: &Tp) -> Result<Watermarks, LiveError> {
        let probes = Arc::clone(&self.probes);
        let at = tp.clone();
        blocking(format!("watermarks of {tp}"), move || {
            probes.watermarks(&at)
        })
        .await
    }

    /// Waits until the last stable offset of `tp` is at least `target`.
    ///
    /// Kafka acknowledges a commit or an abort once the coordinator has
    /// logged its decision; it writes the markers, which move the LSO and
    /// make the records visible to `read_committed`, a moment later. The
    /// model does both at once, so a test that compares the two waits here
    /// for the markers first.
    pub async fn wait_stable(&self, tp: &Tp, target: u64) -> Result<Watermarks, LiveError> {
        let deadline = Instant::now() + self.config.timeout;
        loop {
            let marks = self.watermarks(tp).await?;
            if marks.last_stable_offset >= target {
                return Ok(marks);
            }
            if Instant::now() >= deadline {
                return Err(LiveError::NotStable {
                    tp: tp.clone(),
                    target,
                    last_stable_offset: marks.last_stable_offset,
                    timeout: self.config.timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A transactional producer for `transactional_id`, initialised: like the
    /// model's `init_producer`, this fences every older producer with the
    /// same id and aborts its open transaction (X4).
    pub async fn producer(&self, transactional_id: &str) -> Result<TxnProducer, LiveError> {
        let producer = TxnProducer::new(&self.config, transactional_id)?;
        producer.init().await?;
        Ok(producer)
    }

    /// The live members of consumer group `group`, as its coordinator
    /// describes them (empty for a group with none, or none at all): each
    /// one's client id, host and assigned partitions.
    pub async fn group_members(&self, group: &str) -> Result<Vec<GroupMember>, LiveError> {
        let probes = Arc::clone(&self.probes);
        let (name, timeout, deadline) = (
            group.to_owned(),
            self.config.timeout,
            self.config.deadline(),
        );
        let what = format!("describing group `{group}`");
        let described = blocking(what.clone(), move || {
            bounded(
                || what,
                deadline,
                move || {
                    probes
                        .uncommitted
                        .fetch_group_list(Some(&name), timeout)
                        .map(|list| {
                            list.groups()
                                .iter()
                                .filter(|info| info.name() == name)
                                .flat_map(|info| info.members())
                                .map(|member| GroupMember {
                                    client_id: member.client_id().to_owned(),
                                    client_host: member.client_host().to_owned(),
                                    assignment: member
                                        .assignment()
                                        .filter(|bytes| !bytes.is_empty())
                                        .map(decode_assignment),
                                })
                                .collect::<Vec<_>>()
                        })
                },
            )
        })
        .await?;
        described.map_err(|source| LiveError::Group {
            group: group.to_owned(),
            source: Box::new(source),
        })
    }

    /// An idempotent producer outside any transaction.
    pub fn plain_producer(&self) -> Result<PlainProducer, LiveError> {
        PlainProducer::new(&self.config)
    }

    /// A consumer of `group` (whose committed offsets it reads) at
    /// `isolation`, assigned by hand: no subscription, no rebalances, no
    /// automatic commits.
    pub fn consumer(&self, group: &str, isolation: Isolation) -> Result<LiveConsumer, LiveError> {
        LiveConsumer::new(&self.config, Arc::clone(&self.probes), group, isolation)
    }
}

/// A member's assigned partitions, per topic.
pub type Assigned = Vec<(String, Vec<i32>)>;

/// One live member of a consumer group ([`LiveClient::group_members`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    /// Its `client.id`.
    pub client_id: String,
    /// The host it connects from, as the broker sees it (`/127.0.0.1`).
    pub client_host: String,
    /// Its assignment, decoded ([`decode_assignment`]); `None` while it has
    /// none (the group is rebalancing).
    pub assignment: Option<Result<Assigned, String>>,
}

/// Decodes a member's assignment in Kafka's consumer protocol
/// (`ConsumerProtocolAssignment`): an i16 version, an i32 topic count, per
/// topic an i16-length UTF-8 name, an i32 partition count and the i32
/// partitions, then user data (ignored, as are the fields later versions
/// add). All big-endian. An error names what was cut short or malformed.
pub fn decode_assignment(bytes: &[u8]) -> Result<Assigned, String> {
    struct Reader<'a>(&'a [u8], usize);
    impl Reader<'_> {
        fn take(&mut self, count: usize, what: &str) -> Result<&[u8], String> {
            let end = self.1.checked_add(count).filter(|end| *end <= self.0.len());
            let Some(end) = end else {
                return Err(format!(
                    "the assignment ends at byte {} in the middle of {what} ({count} byte(s) needed)",
                    self.0.len()
                ));
            };
            let taken = &self.0[self.1..end];
            self.1 = end;
            Ok(taken)
        }
        fn i16(&mut self, what: &str) -> Result<i16, String> {
            let bytes = self.take(2, what)?;
            Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
        }
        fn i32(&mut self, what: &str) -> Result<i32, String> {
            let bytes = self.take(4, what)?;
            Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        }
        fn count(&mut self, what: &str) -> Result<usize, String> {
            let count = self.i32(what)?;
            // -1 is a null array: none.
            Ok(usize::try_from(count.max(0)).unwrap_or(0))
        }
    }
    let mut reader = Reader(bytes, 0);
    let version = reader.i16("the version")?;
    if version < 0 {
        return Err(format!("the assignment has version {version}"));
    }
    let topics = reader.count("the topic count")?;
    let mut assignment = Vec::new();
    for _ in 0..topics {
        let length = reader.i16("a topic name's length")?;
        let length =
            usize::try_from(length).map_err(|_| format!("a topic name has length {length}"))?;
        let name = std::str::from_utf8(reader.take(length, "a topic name")?)
            .map_err(|error| format!("a topic name is not UTF-8: {error}"))?
            .to_owned();
        let partitions = reader.count("a partition count")?;
        let mut list = Vec::with_capacity(partitions.min(bytes.len() / 4));
        for _ in 0..partitions {
            list.push(reader.i32("a partition")?);
        }
        assignment.push((name, list));
    }
    Ok(assignment)
}

// ----- producing -----

type Reply = Result<i64, KafkaError>;

/// Routes each delivery report to the [`Delivery`] waiting for it.
struct DeliveryContext;

impl ClientContext for DeliveryContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
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

type KafkaProducer = ThreadedProducer<DeliveryContext>;

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
    pub async fn wait(self) -> Result<u64, LiveError> {
        let reply = match self.bound {
            None => self.reply.await,
            Some((until, deadline)) => {
                match tokio::time::timeout_at(until.into(), self.reply).await {
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
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    for header in &record.headers {
        headers = headers.insert(KafkaHeader {
            key: &header.name,
            value: Some(header.value.as_ref()),
        });
    }
    let mut base: BaseRecord<'_, [u8], [u8], _> =
        BaseRecord::with_opaque_to(tp.topic.as_str(), waiter)
            .partition(kafka_partition(tp))
            .headers(headers);
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
    let deadline = Instant::now() + QUEUE_FULL_PATIENCE;
    loop {
        match producer.send(base) {
            Ok(()) => break,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned))
                if Instant::now() < deadline =>
            {
                base = returned;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((source, _)) => return Err(send_failure(producer, name, tp, source)),
        }
    }
    Ok(())
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
}

impl TxnProducer {
    /// Creates the producer without initialising it; see [`TxnProducer::init`].
    pub fn new(config: &LiveConfig, transactional_id: &str) -> Result<TxnProducer, LiveError> {
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
                ("statistics.interval.ms", crate::stats::INTERVAL_MS.into()),
            ])
            .create_with_context::<_, KafkaProducer>(DeliveryContext)
            .map_err(|source| LiveError::Client {
                client: "transactional producer",
                source: Box::new(source),
            })?;
        Ok(TxnProducer {
            inner: Arc::new(inner),
            transactional_id: transactional_id.to_owned(),
            config: config.clone(),
            groups: Mutex::new(HashMap::new()),
            nobody: Arc::new(Waiter::Nobody),
        })
    }

    /// The producer's `transactional.id`; for a task,
    /// `<app>-<stage>-<partition>`.
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    fn failure(&self, op: TxnOp, source: KafkaError) -> LiveError {
        LiveError::Transaction {
            transactional_id: self.transactional_id.clone(),
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
        let stall = super::faults::take(op, &self.transactional_id);
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

    /// [`TxnProducer::commit`] on this thread (blocks).
    pub fn commit_blocking(&self) -> Result<(), LiveError> {
        self.call_here(TxnOp::Commit, |producer, timeout| {
            producer.commit_transaction(timeout)
        })
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
        self.inner
            .begin_transaction()
            .map_err(|source| self.failure(TxnOp::Begin, source))
    }

    /// Queues a record in the open transaction without waiting for it.
    pub fn enqueue(&self, tp: &Tp, record: &RecordData) -> Result<Delivery, LiveError> {
        enqueue(&self.inner, &self.transactional_id, tp, record)
    }

    /// Queues a record in the open transaction with no delivery report:
    /// [`TxnProducer::commit`] flushes it and fails if it failed. What the
    /// runtime sends with; nothing is allocated per record beyond
    /// librdkafka's own copy.
    pub fn enqueue_unreported(&self, tp: &Tp, record: &RecordData) -> Result<(), LiveError> {
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
        self.call(TxnOp::Commit, |producer, timeout| {
            producer.commit_transaction(timeout)
        })
        .await
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
            .create_with_context::<_, KafkaProducer>(DeliveryContext)
            .map_err(|source| LiveError::Client {
                client: "plain producer",
                source: Box::new(source),
            })?;
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

// ----- consuming -----

/// A hand-assigned consumer of one group at one isolation level.
pub struct LiveConsumer {
    inner: Arc<BaseConsumer<LogContext>>,
    probes: Arc<Probes>,
    group: String,
    isolation: Isolation,
    timeout: Duration,
}

impl LiveConsumer {
    fn new(
        config: &LiveConfig,
        probes: Arc<Probes>,
        group: &str,
        isolation: Isolation,
    ) -> Result<LiveConsumer, LiveError> {
        let inner = config
            .client_config(&[
                ("group.id", group.to_owned()),
                ("isolation.level", isolation.property().into()),
                ("enable.auto.commit", "false".into()),
                ("enable.auto.offset.store", "false".into()),
                // A fetch starts at an offset the caller checked; if it is
                // out of range after all, fail rather than jump elsewhere.
                ("auto.offset.reset", "error".into()),
                // The broker holds an empty fetch this long: keep it short,
                // since a fetch polls until it reaches its target offset.
                ("fetch.wait.max.ms", "50".into()),
            ])
            .create_with_context::<_, BaseConsumer<LogContext>>(LogContext)
            .map_err(|source| LiveError::Client {
                client: "consumer",
                source: Box::new(source),
            })?;
        Ok(LiveConsumer {
            inner: Arc::new(inner),
            probes,
            group: group.to_owned(),
            isolation,
            timeout: config.timeout,
        })
    }

    /// The consumer group whose committed offsets it reads.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The isolation level its fetches and committed-offset reads use.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// Fetches every record of `tp` from `from` that is visible now: up to
    /// the last stable offset for `read_committed`, the high watermark for
    /// `read_uncommitted`, both read when the fetch begins. Like the model's
    /// fetch, `from` may be at the high watermark (an empty fetch) but not
    /// beyond it; `from` at or past the last stable offset returns nothing
    /// and leaves the position at `from`.
    ///
    /// The consumer polls until its position reaches that offset, so markers
    /// and aborted records after the last returned record are skipped too;
    /// not reaching it within the timeout is [`LiveError::FetchIncomplete`].
    /// `&mut self`: the fetch reassigns the consumer to `tp` alone.
    pub async fn fetch(&mut self, tp: &Tp, from: u64) -> Result<LiveFetch, LiveError> {
        let consumer = Arc::clone(&self.inner);
        let probes = Arc::clone(&self.probes);
        let (isolation, timeout, at) = (self.isolation, self.timeout, tp.clone());
        blocking(format!("fetch of {tp} from {from}"), move || {
            fetch_visible(&consumer, &probes, isolation, &at, from, timeout)
        })
        .await
    }

    /// The consumer's position on `tp`: the offset it fetches next, if it has
    /// one.
    pub fn position(&self, tp: &Tp) -> Option<u64> {
        position_of(&self.inner, tp)
    }

    /// The group's committed offsets (with metadata) on `tps`, in order;
    /// `None` where the group has none.
    ///
    /// A `read_committed` consumer asks the broker for *stable* offsets
    /// (KIP-447): while a transaction with offsets for the group is open, the
    /// broker answers UNSTABLE_OFFSET_COMMIT and librdkafka retries until the
    /// transaction ends or the timeout passes. A `read_uncommitted` consumer
    /// gets the last committed offsets at once.
    pub async fn committed(&self, tps: &[Tp]) -> Result<Vec<Option<CommittedOffset>>, LiveError> {
        let consumer = Arc::clone(&self.inner);
        let (group, timeout, tps) = (self.group.clone(), self.timeout, tps.to_vec());
        blocking(
            format!("committed offsets of `{}`", self.group),
            move || committed_offsets(&consumer, &group, &tps, timeout),
        )
        .await
    }
}

fn position_of<C: ConsumerContext>(consumer: &BaseConsumer<C>, tp: &Tp) -> Option<u64> {
    let positions = consumer.position().ok()?;
    let element = positions.find_partition(tp.topic.as_str(), kafka_partition(tp))?;
    match element.offset() {
        Offset::Offset(offset) => our_offset(offset),
        _ => None,
    }
}

pub(crate) fn fetch_visible<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    probes: &Probes,
    isolation: Isolation,
    tp: &Tp,
    from: u64,
    timeout: Duration,
) -> Result<LiveFetch, LiveError> {
    let marks = probes.watermarks(tp)?;
    if from > marks.high_watermark {
        return Err(LiveError::OffsetOutOfRange {
            tp: tp.clone(),
            offset: from,
            high_watermark: marks.high_watermark,
        });
    }
    let target = match isolation {
        Isolation::ReadCommitted => marks.last_stable_offset,
        Isolation::ReadUncommitted => marks.high_watermark,
    };
    let mut fetched = LiveFetch {
        records: Vec::new(),
        next_offset: from,
        high_watermark: marks.high_watermark,
        last_stable_offset: marks.last_stable_offset,
    };
    if from >= target {
        return Ok(fetched);
    }
    let failed = |source: KafkaError| LiveError::Fetch {
        tp: tp.clone(),
        from,
        source: Box::new(source),
    };
    let mut assignment = TopicPartitionList::with_capacity(1);
    assignment
        .add_partition_offset(
            tp.topic.as_str(),
            kafka_partition(tp),
            kafka_offset(tp, from)?,
        )
        .map_err(failed)?;
    consumer.assign(&assignment).map_err(failed)?;
    let deadline = Instant::now() + timeout;
    let outcome = loop {
        let position = position_of(consumer, tp);
        if let Some(position) = position.filter(|&position| position >= target) {
            fetched.next_offset = position;
            break Ok(fetched);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(LiveError::FetchIncomplete {
                tp: tp.clone(),
                from,
                target,
                position,
                records: fetched.records.len(),
                timeout,
            });
        }
        match consumer.poll(left.min(Duration::from_millis(100))) {
            None | Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Ok(message)) => {
                if message.topic() == tp.topic.as_str()
                    && message.partition() == kafka_partition(tp)
                {
                    fetched.records.push(consumed(&message));
                }
            }
            Some(Err(source)) => break Err(failed(source)),
        }
    };
    // Stop fetching in the background; the next fetch assigns afresh.
    let _ = consumer.unassign();
    outcome
}

pub(crate) fn consumed(message: &BorrowedMessage<'_>) -> ConsumedRecord {
    let headers = message
        .headers()
        .map(|headers| {
            headers
                .iter()
                .map(|header| Header {
                    name: header.key.to_owned().into(),
                    // The core writes no null header values; read one as empty.
                    value: header.value.map(Bytes::copy_from_slice).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    ConsumedRecord {
        offset: our_offset(message.offset()).unwrap_or(0),
        data: RecordData {
            key: message.key().map(Bytes::copy_from_slice),
            value: message.payload().map(Bytes::copy_from_slice),
            headers,
            timestamp: message.timestamp().to_millis().unwrap_or(-1),
        },
    }
}

pub(crate) fn committed_offsets<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    group: &str,
    tps: &[Tp],
    timeout: Duration,
) -> Result<Vec<Option<CommittedOffset>>, LiveError> {
    let failed = |source: KafkaError| LiveError::Committed {
        group: group.to_owned(),
        tps: tps.to_vec(),
        source: Box::new(source),
    };
    let mut list = TopicPartitionList::with_capacity(tps.len());
    for tp in tps {
        list.add_partition(tp.topic.as_str(), kafka_partition(tp));
    }
    let answer = consumer.committed_offsets(list, timeout).map_err(failed)?;
    tps.iter()
        .map(|tp| {
            let Some(element) = answer.find_partition(tp.topic.as_str(), kafka_partition(tp))
            else {
                return Ok(None);
            };
            element.error().map_err(failed)?;
            Ok(match element.offset() {
                Offset::Offset(offset) => our_offset(offset)
                    .map(|offset| CommittedOffset::new(offset, element.metadata())),
                _ => None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_call_returns_what_the_call_returns() {
        let answer = bounded(|| "adding".into(), Duration::from_secs(5), || 2 + 2);
        assert_eq!(answer.expect("in time"), 4);
    }

    /// Issue 13's wedge, without a broker: a call that ignores its own
    /// timeout is abandoned at the deadline, and the caller is told which.
    #[test]
    fn a_call_past_its_deadline_is_abandoned_and_named() {
        let started = Instant::now();
        let answer = bounded(
            || "send_offsets_to_transaction of `app-stage-0`".into(),
            Duration::from_millis(50),
            || std::thread::sleep(Duration::from_secs(3)),
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the caller did not wait for the call"
        );
        let error = answer.expect_err("overran");
        assert!(matches!(error, LiveError::Overran { .. }), "{error:?}");
        assert!(error.is_transient());
        let text = error.to_string();
        assert!(
            text.contains("send_offsets_to_transaction of `app-stage-0`"),
            "{text}"
        );
        assert!(
            text.contains("0.05s") && text.contains("abandoned"),
            "{text}"
        );
    }

    #[test]
    fn a_call_that_panics_is_an_error_not_a_panic() {
        let answer: Result<(), LiveError> = bounded(
            || "probing".into(),
            Duration::from_secs(5),
            || panic!("boom"),
        );
        let error = answer.expect_err("panicked");
        assert!(matches!(error, LiveError::Join { .. }), "{error:?}");
    }

    /// Issue 21: every client carries the instance's client id, unless a
    /// setting or the user's property names another.
    #[test]
    fn every_client_carries_the_instance_client_id_unless_set() {
        let config = LiveConfig::new("localhost:9092");
        let expected = format!("parsley-{}", crate::instance::instance_name());
        assert_eq!(
            config.client_config(&[]).get("client.id"),
            Some(expected.as_str())
        );
        assert_eq!(client_id(), expected);
        let mine = config.client_config(&[("client.id", "membership".into())]);
        assert_eq!(mine.get("client.id"), Some("membership"));
        let user = LiveConfig::new("localhost:9092").with_property("client.id", "billing-7");
        assert_eq!(
            user.client_config(&[("client.id", "membership".into())])
                .get("client.id"),
            Some("billing-7")
        );
    }

    /// librdkafka's syslog levels land on tracing's levels.
    #[test]
    fn librdkafka_levels_map_to_tracing_levels() {
        use tracing::Level;
        for (level, expected) in [
            (RDKafkaLogLevel::Emerg, Level::ERROR),
            (RDKafkaLogLevel::Alert, Level::ERROR),
            (RDKafkaLogLevel::Critical, Level::ERROR),
            (RDKafkaLogLevel::Error, Level::ERROR),
            (RDKafkaLogLevel::Warning, Level::WARN),
            (RDKafkaLogLevel::Notice, Level::INFO),
            (RDKafkaLogLevel::Info, Level::INFO),
            (RDKafkaLogLevel::Debug, Level::DEBUG),
        ] {
            assert_eq!(tracing_level(level), expected, "{level:?}");
        }
    }

    /// A failure librdkafka says twice (a log line, then a global error
    /// with the same text, or the other way round) is printed once; another
    /// failure, or the same one after the window, is printed again.
    #[test]
    fn an_error_said_twice_is_printed_once() {
        let now = Instant::now();
        let reason = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)";
        let mut echoes = Echoes::new();
        assert!(echoes.log_line(now, &format!("[thrd:127.0.0.1:1/bootstrap]: {reason}")));
        assert!(!echoes.error_line(now, reason));
        let mut echoes = Echoes::new();
        assert!(echoes.error_line(now, reason));
        assert!(!echoes.log_line(now, &format!("[thrd:127.0.0.1:1/bootstrap]: {reason}")));
        assert!(
            !echoes.error_line(now, reason),
            "the same error again at once"
        );
        assert!(echoes.error_line(now, "1/1 brokers are down"));
        let later = now + Echoes::WINDOW + Duration::from_secs(1);
        assert!(echoes.error_line(later, reason));
    }

    /// librdkafka's lines reach tracing under the target `librdkafka` at
    /// their level, and an error it also logged is printed once.
    #[test]
    fn librdkafka_lines_are_logged_under_its_target_once() {
        use std::io::Write as _;
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().write(bytes)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info,librdkafka=warn"))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let reason = "test-capture:1/bootstrap: Connect failed: Connection refused";
            LogContext.log(
                RDKafkaLogLevel::Error,
                "FAIL",
                &format!("[thrd:x]: {reason}"),
            );
            LogContext.error(
                KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure),
                reason,
            );
            LogContext.log(
                RDKafkaLogLevel::Notice,
                "CONFWARN",
                "test-capture: a notice",
            );
            LogContext.error(
                KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
                "test-capture: 1/1 brokers are down",
            );
        });
        let _ = captured.clone().flush();
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("test-capture"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("ERROR librdkafka") && lines[0].contains("facility=\"FAIL\""),
            "{text}"
        );
        assert!(
            lines[1].contains("WARN librdkafka") && lines[1].contains("brokers are down"),
            "{text}"
        );
    }

    /// The consumer protocol's assignment decodes to topics and
    /// partitions; a cut one names where it ends.
    #[test]
    fn an_assignment_decodes_and_a_cut_one_is_named() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1i16.to_be_bytes());
        bytes.extend_from_slice(&2i32.to_be_bytes());
        for (topic, partitions) in [("app.instances", vec![0i32, 3]), ("x", vec![])] {
            bytes.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            bytes.extend_from_slice(topic.as_bytes());
            bytes.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for partition in partitions {
                bytes.extend_from_slice(&partition.to_be_bytes());
            }
        }
        bytes.extend_from_slice(&(-1i32).to_be_bytes()); // no user data
        assert_eq!(
            decode_assignment(&bytes),
            Ok(vec![
                ("app.instances".to_string(), vec![0, 3]),
                ("x".to_string(), vec![])
            ])
        );
        let error = decode_assignment(&bytes[..20]).unwrap_err();
        assert!(error.contains("ends at byte 20"), "{error}");
        assert_eq!(decode_assignment(&[0, 0, 0, 0, 0, 0]), Ok(vec![]));
    }

    #[test]
    fn the_deadline_is_past_librdkafkas_own_timeout() {
        let config = LiveConfig::new("localhost:9092").with_timeout(Duration::from_secs(10));
        assert_eq!(config.deadline(), Duration::from_secs(16));
        assert!(LiveConfig::new("x:1").deadline() > DEFAULT_TIMEOUT);
    }
}
