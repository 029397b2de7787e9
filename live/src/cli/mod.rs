//! The operator commands over a [`Registry`] of applications, in one call
//! from a user's `main`:
//!
//! ```no_run
//! use parsley::{Parsley, Stage, Topic};
//! use parsley_live::cli::{LiveApp, Registry};
//!
//! fn main() -> std::process::ExitCode {
//!     let registry = Registry::new().app("copy", |settings| {
//!         let orders: Topic<String, i64> = Topic::new(settings.topic("orders"));
//!         let copies: Topic<String, i64> = Topic::new(settings.topic("copies"));
//!         let out = copies.clone();
//!         let copy = Stage::named("copy")
//!             .on(&orders, move |order| vec![out.send(order.key().cloned(), *order.value())])
//!             .into(&copies)
//!             .build();
//!         Ok(LiveApp::new(Parsley::named(settings.topic("shop")).stage(copy).build()?))
//!     });
//!     parsley_live::cli::main(registry)
//! }
//! ```
//!
//! The commands:
//!
//! - `setup APP` creates the topics the topic contracts lists (C4);
//! - `produce APP` writes input records, for an application registered with
//!   a [`LiveApp::producer`]: `--count` of them at once, or `--rate N` per
//!   second (`--duration D` for N x D records), and `--wait D` to ride out
//!   an unreachable cluster (see [Producing at a rate](#producing-at-a-rate));
//! - `run APP` runs an instance until SIGINT or SIGTERM, then commits what
//!   is pending and exits; instances share the tasks through Kafka's group
//!   membership (`--instance INDEX/COUNT` for a static share instead);
//! - `status APP` prints each task's committed position, log end and lag,
//!   its owner (the instance the group `<app>.instances` assigns it to, `-`
//!   for none) and state (as the owner last reported it, `unowned` if none
//!   ever did), read from the cluster whether or not an instance runs;
//!   `--json` prints the same as one JSON document;
//! - `skip APP` gets a stopped task past one named record: the record is
//!   dead-lettered as skipped in the task's transaction (X5);
//! - `query APP STAGE KEY` prints a stateful stage's committed state of
//!   one key, as JSON, asked of the instance that owns the key's task (the
//!   instances serve queries on their `--metrics` address and advertise it
//!   to their group, `--advertise` to name another); exit 2 for an unknown
//!   or stateless stage or an unreadable key, 1 for a task restoring or
//!   moving;
//! - `audit APP` reads the committed topics back with `read_committed` at a
//!   consistent cut (the group offsets first, then every log to its last
//!   stable offset, [`crate::read_committed`]) and runs the log-only checks
//!   of [`parsley::audit`] on them; the application may be running.
//!
//! The cluster is `--bootstrap`, or `KAFKA_BOOTSTRAP_SERVERS`. A bootstrap
//! address must accept a connection and answer Kafka's `ApiVersions` within
//! 10 s. Logs go to stderr, filtered by `PARSLEY_LOG`
//! (`tracing_subscriber::EnvFilter`'s syntax, default
//! `info,librdkafka=warn`); librdkafka's own lines come under the target
//! `librdkafka`, at their level, once.
//!
//! # Settings checked at start
//!
//! A value out of range is refused before anything runs (exit 2, naming
//! the flag, the value and the range):
//!
//! | flag | range | why |
//! |---|---|---|
//! | `run --session-timeout-ms` | 6000..=300000 | the broker's default `group.min.session.timeout.ms` and `group.max.session.timeout.ms`: a broker refuses to let an instance join outside them |
//! | `run --commit-interval-ms` | 1..=30000 | above 0; at most half the producers' 60 s transaction timeout, past which the broker aborts a transaction |
//! | `setup --partitions` | 1.. | a topic has at least one partition |
//! | `produce --keys` | 1.. | records need a key to go to |
//! | `produce --rate` | 1.. | records per second; `--duration` needs it, and excludes `--count` |
//! | `run --metrics` | `HOST:PORT` that resolves | e.g. `localhost:9464` or `0.0.0.0:9464` |
//!
//! A broker configured with other session bounds than Kafka's defaults
//! still refuses a session timeout outside its own; this range is the
//! default one.
//!
//! # Exit codes
//!
//! One meaning per code, whatever the command:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done (or interrupted by SIGINT or SIGTERM) |
//! | 1 | the command acted and failed: a task stopped on an error, a skip that started did not complete, the audit found violations, a producer failed |
//! | 2 | refused before acting: bad arguments, an unknown application or stage, a cluster the application cannot use as it is (a missing or mis-sized topic, C3), a skip refused (no dead-letter topic, a tp the task does not consume, an offset beyond the log end or delivered already) |
//! | 3 | fenced by another owner (the tasks moved): with a static share (`--instance`), or a skip whose task was taken by an instance meanwhile; with group membership tasks move all the time, and a fence is not reported |
//! | 4 | the cluster is unreachable: no bootstrap address answered |
//! | 5 | TLS: the handshake failed (an untrusted or expired certificate, one for another host, a listener that does not speak TLS), a plaintext client at a TLS listener, or the client's own key or certificate cannot be read or decrypted (`ssl.key.password`) |
//! | 6 | the broker does not enable the client's SASL mechanism |
//! | 7 | the broker refused the client's credentials |
//! | 8 | not authorized: the cluster's authorizer refused an operation (an ACL is missing); the message names the principal, the operation and the resource |
//! | 9 | the audit is inconclusive: it found no violation, but a task was not checked (its search ran out of `--search-steps`, or a partition it needs was not read); the notes name the task and why |
//!
//! # Secured clusters
//!
//! Every command takes client properties for every client it makes, as
//! Kafka's tools and kcat do: `--command-config FILE` (or
//! `PARSLEY_COMMAND_CONFIG`), then `PARSLEY_CLIENT_<KEY>` variables, then
//! `-X KEY=VALUE`, later ones winning ([`crate::client::properties`]).
//! `setup APP --print-acls PRINCIPAL` prints the `kafka-acls.sh` lines the
//! application needs without touching the cluster, and
//! with `--producer` those `produce` needs.
//!
//! # Producing at a rate
//!
//! `produce --rate N` calls the application's producer once per batch of
//! a tenth of a second's records (at least one), each with its own seed
//! (batch 0 with `--seed`), so every registered producer is paced without
//! a change. A batch falls due when the records before it would have gone
//! at the rate; up to 16 batches may be under way at once, and batches a
//! slow cluster held back go at once when it answers again: the count is
//! what was asked and the rate a ceiling, as with Kafka's
//! `kafka-producer-perf-test --throughput`.
//!
//! `--wait D` rides out an unreachable cluster for up to `D`: the first
//! connection (and an answer Kafka says to retry) is tried again every
//! second, and the client's bound on each call is at least `D`, so each
//! record waits up to `D` for the cluster in the idempotent producer that
//! sent it (`message.timeout.ms`, Kafka's `delivery.timeout.ms`). Past it
//! the command fails with the code it has without `--wait` (4 unreachable
//! before anything was appended, 1 for a failed batch), saying how long it
//! waited and how many records were appended. **What holds:** the runner
//! never sends a batch again; a record is retried only by the idempotent
//! producer that first sent it, so each is appended at most once (Kafka's
//! idempotence: no duplicate and no reordering per partition within one
//! producer session), and a batch that failed may be partly appended. The
//! guarantee is the producer's: one that makes an idempotent client per
//! call, as [`LiveClient::plain_producer`] does, has it.
//!
//! `skip` checks everything it can before it starts the task (whose
//! producer fences the instance running it, X4): the stage, its dead-letter
//! topic, the tp, and the offset against the tp's log end and the stage's
//! committed position. `setup` refuses, before creating anything, a topic
//! that exists with another partition count than the application needs.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use parsley::Assembly;
use parsley::TaskId;
use parsley::{App, Tp};

use parsley::SkipError;

mod produce;
mod query;
mod skip;
mod status;

use crate::status::{task_owners, TaskOwner, TaskStatus};
use crate::{
    assemble_on, create_topics, membership_topic, read_committed, skip_record, task_status,
    FailurePolicy, GroupMembership, InstanceShare, Isolation, LiveClient, LiveConfig, LiveError,
    Runtime, RuntimeConfig, RuntimeError, BOOTSTRAP_ENV,
};

/// An error of a user's application factory or producer
/// ([`parsley::BoxError`]).
pub use parsley::BoxError;

/// What a registered producer returns: how many records it wrote.
pub type ProduceFuture = Pin<Box<dyn Future<Output = Result<usize, BoxError>> + Send>>;

type Build = Box<dyn Fn(&Settings) -> Result<LiveApp, BoxError> + Send + Sync>;
type Produce = Arc<dyn Fn(ProduceRequest) -> ProduceFuture + Send + Sync>;

/// The applications a runner knows, by name.
#[derive(Default)]
pub struct Registry {
    entries: Vec<(String, Build)>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers `name`: `build` makes the application from the command
    /// line's [`Settings`] (its namespace and `--set` values).
    pub fn app(
        mut self,
        name: impl Into<String>,
        build: impl Fn(&Settings) -> Result<LiveApp, BoxError> + Send + Sync + 'static,
    ) -> Registry {
        self.entries.push((name.into(), Box::new(build)));
        self
    }

    /// The applications' names, in the order they were registered.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(name, _)| name.as_str()).collect()
    }

    fn build(&self, name: &str, settings: &Settings) -> Result<LiveApp, String> {
        let Some((_, build)) = self.entries.iter().find(|(known, _)| known == name) else {
            return Err(format!(
                "unknown application {name:?}: expected one of {}",
                self.names().join(", ")
            ));
        };
        build(settings).map_err(|error| format!("application {name:?} cannot be built: {error}"))
    }
}

/// An application as the runner runs it, and how to produce its inputs.
pub struct LiveApp {
    app: App,
    producer: Option<Produce>,
}

impl fmt::Debug for LiveApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveApp")
            .field("app", &self.app.id())
            .field("producer", &self.producer.is_some())
            .finish()
    }
}

impl LiveApp {
    /// Runs `app`; `produce` refuses it until a producer is given.
    pub fn new(app: App) -> LiveApp {
        LiveApp {
            app,
            producer: None,
        }
    }

    /// What `produce APP` does: write `count` records over `keys` keys from
    /// `seed`, and return how many it wrote. With `--rate` it is called once
    /// per batch, several batches possibly at once ([Producing at a
    /// rate](self#producing-at-a-rate)).
    pub fn producer(
        mut self,
        produce: impl Fn(ProduceRequest) -> ProduceFuture + Send + Sync + 'static,
    ) -> LiveApp {
        self.producer = Some(Arc::new(produce));
        self
    }

    /// The application.
    pub fn app(&self) -> &App {
        &self.app
    }
}

/// What `produce` asks of a registered producer.
pub struct ProduceRequest {
    /// The cluster.
    pub client: LiveClient,
    /// The application's assembly on it (C3).
    pub assembly: Assembly,
    /// How many records (`--count`).
    pub count: usize,
    /// Over how many keys (`--keys`).
    pub keys: usize,
    /// The seed of the plan (`--seed`).
    pub seed: u64,
}

impl fmt::Debug for ProduceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProduceRequest")
            .field("count", &self.count)
            .field("keys", &self.keys)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

/// What the command line tells an application's factory.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `--namespace`: a prefix for the application id and every topic, so
    /// that several runs share one cluster.
    pub namespace: String,
    /// `--set KEY=VALUE`, in the order given (a later one wins).
    pub values: BTreeMap<String, String>,
}

impl Settings {
    /// `name` under the namespace.
    pub fn topic(&self, name: &str) -> String {
        format!("{}{name}", self.namespace)
    }

    /// The value of `--set KEY=...`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// `--set KEY=MILLISECONDS` as a duration, or `default`; an error names
    /// the key and the value that is not a number.
    pub fn millis(&self, key: &str, default: Duration) -> Result<Duration, BoxError> {
        match self.get(key) {
            None => Ok(default),
            Some(text) => text
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|error| {
                    format!("--set {key}={text}: not a number of milliseconds ({error})").into()
                }),
        }
    }
}

#[derive(Parser)]
#[command(
    version,
    about = "Runs Parsley applications on a Kafka cluster",
    after_help = "Exit codes (every command): 0 done or interrupted; 1 the command acted \
                  and failed (a task failed, a skip did not complete, the audit found \
                  violations); 2 refused before acting (bad arguments, a cluster the \
                  application cannot use, a refused skip); 3 fenced by another owner; \
                  4 cluster unreachable; 5 TLS (handshake failed, a plaintext client at a TLS \
                  listener, an unusable client key); 6 SASL mechanism not \
                  enabled; 7 credentials refused; 8 not authorized (an ACL is missing); \
                  9 the audit is inconclusive (a task not checked). query: 2 for an unknown \
                  stage, a stateless one or an unreadable key; 1 for a task restoring or \
                  moving (ask again).\n\n\
                  Example:\n  \
                  setup APP --partitions 4\n  \
                  produce APP --rate 200 --duration 60s --wait 5m\n  \
                  run APP          # Ctrl-C stops it gracefully\n  \
                  status APP\n  \
                  query APP STAGE KEY\n  \
                  audit APP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the application's topics (existing ones are left alone).
    Setup(SetupArgs),
    /// Produce input records (applications registered with a producer):
    /// --count at once, or --rate per second for --duration; --wait rides
    /// out an unreachable cluster.
    Produce(ProduceArgs),
    /// Run an instance of the application until SIGINT or SIGTERM.
    Run(RunArgs),
    /// Read the committed topics back at a consistent cut and check their
    /// stamps and outputs; the application may be running.
    ///
    /// The cut: each stage group's committed offsets are read first, then
    /// every log up to its last stable offset, then the offsets again. What
    /// the offsets of the cut, the records below them and what committed
    /// with them claim is judged; what the application committed after the
    /// offsets were read (ticks, timer fires, outputs still in flight) lies
    /// beyond the cut and is no violation. The summary names the cut per tp
    /// (each group's committed offset, where the log was read to) and how
    /// many records lay beyond it. Of an application at rest the cut is
    /// everything. Exit 0 clean, 1 violations found, 9 inconclusive (no
    /// violation found, but a task was not checked: the notes say why).
    Audit(AuditArgs),
    /// Print each task's committed position, log end, lag, owner and state,
    /// read from the cluster (whether or not an instance runs).
    Status(StatusArgs),
    /// Get a stopped task past one record (X5): dead-letter the record at
    /// TOPIC-PARTITION@OFFSET as skipped, in the task's own transaction, and
    /// commit; then start the instances again. The stage must declare a
    /// dead-letter topic.
    Skip(SkipArgs),
    /// Read a stateful stage's committed state of one key, from the
    /// instance that owns the key's task (found through the instances'
    /// group; instances serve queries on their --metrics address). Prints
    /// one JSON document: the answer, or the typed error.
    Query(QueryArgs),
}

#[derive(Args)]
struct QueryArgs {
    #[command(flatten)]
    common: Common,
    /// The stage, stateful.
    #[arg(index = 2)]
    stage: String,
    /// The key: its text in the stage's key codec's form (Utf8: the text;
    /// I64: a decimal number; Json: compact JSON), or `base64:` and the
    /// key's bytes.
    #[arg(index = 3)]
    key: String,
    /// Ask the instance whose endpoints are at HOST:PORT, instead of the
    /// owner the group names; it answers or redirects to the owner.
    #[arg(long, value_name = "HOST:PORT")]
    at: Option<String>,
}

#[derive(Args)]
struct Common {
    /// The application, by its name in the runner's registry.
    app: String,
    /// Prefix of the application id and every topic, so runs can share a
    /// cluster (applications that honour it).
    #[arg(long, default_value = "")]
    namespace: String,
    /// Bootstrap servers [default: the client properties' bootstrap.servers,
    /// else $KAFKA_BOOTSTRAP_SERVERS].
    #[arg(long)]
    bootstrap: Option<String>,
    /// A setting for the application's factory, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    settings: Vec<(String, String)>,
    /// Client properties for every client of the command (security.protocol,
    /// sasl.*, ssl.*), as Kafka's tools take them [default:
    /// $PARSLEY_COMMAND_CONFIG]; a Java client's sasl.jaas.config for PLAIN
    /// or SCRAM is read as sasl.username and sasl.password.
    #[arg(long, value_name = "FILE")]
    command_config: Option<std::path::PathBuf>,
    /// One librdkafka client property, KEY=VALUE (repeatable), over the
    /// file and the PARSLEY_CLIENT_* variables (as kcat's -X).
    #[arg(short = 'X', value_name = "KEY=VALUE", value_parser = crate::client::properties::flag_arg)]
    properties: Vec<crate::client::properties::Property>,
}

#[derive(Args)]
struct AuditArgs {
    #[command(flatten)]
    common: Common,
    /// How many deliveries one task's search may try before the task is
    /// reported inconclusive (exit 9); raise it for a long history the
    /// search could not finish.
    #[arg(long, value_name = "N", default_value_t = parsley::audit::AuditOptions::default().search_steps)]
    search_steps: u64,
}

#[derive(Args)]
struct StatusArgs {
    #[command(flatten)]
    common: Common,
    /// Print one JSON document instead of the table: per task its owner,
    /// state, since when, and per tp the committed offset, log end, lag and
    /// whether the lag was counted exactly.
    #[arg(long)]
    json: bool,
}

/// The partitions a source or sink gets when `setup` creates it without
/// `--partitions`.
const DEFAULT_PARTITIONS: u32 = 4;

#[derive(Args)]
struct SetupArgs {
    #[command(flatten)]
    common: Common,
    /// Partitions of each source and sink topic to create [default: 4].
    /// Given, an existing source or sink with another count is refused;
    /// left out, existing ones are used as they are.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(i32::MAX)))]
    partitions: Option<u32>,
    /// Create nothing: print the `kafka-acls.sh` lines that allow PRINCIPAL
    /// (`User:NAME`, or a bare NAME) exactly what the application's commands
    /// need, read from the application without the cluster.
    #[arg(long, value_name = "PRINCIPAL", conflicts_with = "partitions")]
    print_acls: Option<String>,
    /// With --print-acls: print what `produce` needs instead (Write on the
    /// application's inputs, Describe on its other topics), as
    /// kafka-acls.sh's --producer.
    #[arg(long, requires = "print_acls")]
    producer: bool,
}

#[derive(Args)]
struct ProduceArgs {
    #[command(flatten)]
    common: Common,
    /// How many records [default: 1000, or RATE x DURATION with --duration].
    #[arg(long, conflicts_with = "duration")]
    count: Option<usize>,
    /// Over how many keys.
    #[arg(long, default_value_t = 16, value_parser = parse_keys)]
    keys: usize,
    /// The seed of the plan; with --rate, batch i is planned from its own
    /// seed derived from this one and i (batch 0 from this one).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Records per second: the records go in batches of a tenth of a
    /// second's worth (at least one), each when it falls due; a batch
    /// late behind a slow cluster is followed at once by the ones due
    /// meanwhile, so the count is kept and the rate is a ceiling.
    #[arg(long, value_name = "RECORDS_PER_SECOND", value_parser = parse_rate)]
    rate: Option<u64>,
    /// With --rate: produce RATE x DURATION records over this long, e.g.
    /// `3s`, `500ms`, `2m` (a bare number is seconds).
    #[arg(long, requires = "rate", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Ride out an unreachable cluster for up to this long instead of
    /// failing at once (exit 4): the first connection is retried every
    /// second, and each batch's records are retried by its idempotent
    /// producer for up to this long (Kafka's delivery.timeout.ms). A batch
    /// is never sent twice. E.g. `3m`.
    #[arg(long, value_parser = parse_duration)]
    wait: Option<Duration>,
}

/// `--on-failure`: what a task's failure does to the instance's others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OnFailure {
    /// Stop the instance's other tasks gracefully and exit 1 (Kafka
    /// Streams' SHUTDOWN_CLIENT).
    StopInstance,
    /// Keep the other tasks running; the failed one stays stopped until the
    /// instance restarts.
    KeepOthersRunning,
}

impl From<OnFailure> for FailurePolicy {
    fn from(choice: OnFailure) -> FailurePolicy {
        match choice {
            OnFailure::StopInstance => FailurePolicy::StopInstance,
            OnFailure::KeepOthersRunning => FailurePolicy::KeepOthersRunning,
        }
    }
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// A static share of the tasks, `INDEX/COUNT`. Without it the instances
    /// share the tasks by joining the group `<app>.instances`, and tasks move
    /// between them when one stops, dies or starts.
    #[arg(long, value_parser = parse_share)]
    instance: Option<InstanceShare>,
    /// With group membership: how long the broker waits for a silent
    /// instance before its tasks move to the others, in milliseconds;
    /// within the broker's default bounds (group.min/max.session.timeout.ms).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(6_000..=300_000))]
    session_timeout_ms: u64,
    /// The commit interval, in milliseconds (X2); at most half the
    /// producers' 60 s transaction timeout.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=30_000))]
    commit_interval_ms: u64,
    /// What a task's failure does to the instance's other tasks.
    #[arg(long, value_enum, default_value_t = OnFailure::StopInstance)]
    on_failure: OnFailure,
    /// Serve the tasks' figures (counters, held records, consumer lag,
    /// commit latency) in the Prometheus text format on HOST:PORT, e.g.
    /// `localhost:9464` or `0.0.0.0:9464`, at any path.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_address)]
    metrics: Option<std::net::SocketAddr>,
    /// Where the other instances and `query` reach this instance's
    /// endpoints (its `/query` among them), as it advertises in its task
    /// reports [default: the --metrics address, an unspecified IP such as
    /// 0.0.0.0 replaced by the host's name].
    #[arg(long, value_name = "HOST:PORT", requires = "metrics")]
    advertise: Option<String>,
    /// Where the tasks keep their local state stores, each in
    /// `DIR/<app>/<stage>-<partition>`, so that a restart restores only the
    /// changelog after a store's checkpoint. Default: `parsley` in the
    /// system's temporary directory.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,
    /// How many changelog records a task's local store applies between two
    /// checkpoints (an fsync of the store, then the checkpoint file): fewer
    /// restore less at a restart and sync more often.
    #[arg(long, value_name = "RECORDS", default_value_t = crate::state::CHECKPOINT_EVERY as u64, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_every: u64,
}

#[derive(Args)]
struct SkipArgs {
    #[command(flatten)]
    common: Common,
    /// The stage whose task stopped.
    #[arg(long)]
    stage: String,
    /// The topic of the record to skip (a source of the stage), without
    /// the namespace.
    #[arg(long)]
    topic: String,
    /// Its partition, which is the task's.
    #[arg(long)]
    partition: u32,
    /// Its offset, as the task's stop error names it.
    #[arg(long)]
    offset: u64,
}

fn parse_share(text: &str) -> Result<InstanceShare, String> {
    let (index, count) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not INDEX/COUNT"))?;
    let number = |part: &str| {
        part.trim()
            .parse::<u32>()
            .map_err(|error| format!("`{part}` in `{text}`: {error}"))
    };
    InstanceShare::new(number(index)?, number(count)?).map_err(|error| error.to_string())
}

/// `HOST:PORT` resolved to its first socket address.
fn parse_address(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let mut found = text
        .to_socket_addrs()
        .map_err(|error| format!("`{text}` is not a HOST:PORT that resolves: {error}"))?;
    found
        .next()
        .ok_or_else(|| format!("`{text}` resolves to no address"))
}

fn parse_rate(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("0 is not in 1..: a rate is at least one record per second".into()),
        Ok(rate) => Ok(rate),
        Err(error) => Err(format!(
            "`{text}` is not a number of records per second: {error}"
        )),
    }
}

/// A duration as humantime reads it (`500ms`, `3s`, `2m`, `1h 30m`), or a
/// bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(trimmed)
        .map_err(|error| format!("`{text}` is not a duration such as 500ms, 3s, 2m or 1h: {error}"))
}

fn parse_keys(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 is not in 1..: records need at least one key".into()),
        Ok(keys) => Ok(keys),
        Err(error) => Err(format!("`{text}`: {error}")),
    }
}

fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("`{text}` is not KEY=VALUE")),
    }
}

/// The command acted and failed: a task stopped on an error, a skip did
/// not complete, the audit found violations.
const EXIT_FAILED: u8 = 1;
/// Refused before acting: bad arguments, or a cluster the application
/// cannot use as it is.
const EXIT_UNUSABLE: u8 = 2;
/// Fenced by a newer owner (X4).
const EXIT_FENCED: u8 = 3;
/// No bootstrap address could be reached.
const EXIT_UNREACHABLE: u8 = 4;
/// TLS: the handshake failed (an untrusted or expired certificate, one for
/// another host, a listener that does not speak TLS), a plaintext client at
/// a TLS listener, or the client's own key or certificate is unusable.
const EXIT_TLS: u8 = 5;
/// The broker does not enable the client's SASL mechanism.
const EXIT_MECHANISM: u8 = 6;
/// The broker refused the client's credentials.
const EXIT_CREDENTIALS: u8 = 7;
/// The cluster's authorizer refused an operation: an ACL is missing.
const EXIT_NOT_AUTHORIZED: u8 = 8;
/// The audit found no violation but could not check every task.
const EXIT_INCONCLUSIVE: u8 = 9;

/// The principal the command's clients authenticate as, for messages
/// about a missing ACL.
static PRINCIPAL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The live adapter's error inside `error`, if there is one.
fn live_error_of(error: &RuntimeError) -> Option<&LiveError> {
    if let RuntimeError::Live(live) = error {
        return Some(live);
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(live) = cause.downcast_ref::<LiveError>() {
            return Some(live);
        }
        source = cause.source();
    }
    None
}

/// The exit code of a security failure (5 TLS, 6 SASL mechanism, 7
/// credentials, 8 a missing ACL), if `error` is one.
fn security_code(error: &RuntimeError) -> Option<u8> {
    let live = live_error_of(error)?;
    if let LiveError::Unreachable { failures, .. } = live {
        // A plaintext client at a TLS listener reached it: the mismatch is
        // the TLS configuration's.
        let tls = !failures.is_empty()
            && failures
                .iter()
                .all(|failure| failure.cause == crate::reach::UnreachableCause::SpeaksTls);
        return tls.then_some(EXIT_TLS);
    }
    if let LiveError::Secure { failure, .. } = live {
        use crate::reach::SecureFailure;
        return Some(match failure {
            SecureFailure::Tls { .. } | SecureFailure::ClientIdentity { .. } => EXIT_TLS,
            SecureFailure::Mechanism { .. } => EXIT_MECHANISM,
            SecureFailure::Credentials { .. } => EXIT_CREDENTIALS,
            SecureFailure::NoAnswer { .. } => EXIT_UNREACHABLE,
        });
    }
    live.denied().map(|_| EXIT_NOT_AUTHORIZED)
}

/// `error` as said on stderr: with the principal, the resource and the
/// operation when the cluster's authorizer refused it.
fn said(error: &RuntimeError, text: String) -> String {
    match live_error_of(error).and_then(LiveError::denied) {
        Some(denied) => format!(
            "{text}\nnot authorized: no ACL allows {} {denied} (`setup APP --print-acls PRINCIPAL` prints the ACLs the application needs)",
            PRINCIPAL.get().map_or("this client's principal", String::as_str)
        ),
        None => text,
    }
}

fn fail(message: impl fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_UNUSABLE)
}

/// The exit code of a command that failed before it acted: 4 when the
/// cluster is unreachable, 5 to 8 for its security, else 2.
fn refused_code(error: &RuntimeError) -> u8 {
    if let Some(code) = security_code(error) {
        code
    } else if error.is_unreachable() {
        EXIT_UNREACHABLE
    } else {
        EXIT_UNUSABLE
    }
}

/// The exit code of a command that acted and failed with `error`: 4
/// unreachable, 5 to 8 its security, 2 refused before anything was done,
/// 3 fenced, else 1.
fn acted_code(error: &RuntimeError) -> u8 {
    if let Some(code) = security_code(error) {
        code
    } else if error.is_unreachable() {
        EXIT_UNREACHABLE
    } else if error.is_refusal() {
        EXIT_UNUSABLE
    } else if error.is_fenced() {
        EXIT_FENCED
    } else {
        EXIT_FAILED
    }
}

/// Says `error` on stderr and returns the exit code of a command refused
/// before it acted.
fn refuse(error: impl Into<RuntimeError>) -> ExitCode {
    let error = error.into();
    eprintln!("error: {}", said(&error, error.to_string()));
    ExitCode::from(refused_code(&error))
}

/// Runs the command line over `registry`'s applications and returns the
/// exit code; see the [module docs](self).
pub fn main(registry: Registry) -> ExitCode {
    install_logs();
    let cli = parse_with(&registry, std::env::args_os());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(format!("cannot start the async runtime: {error}")),
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Setup(args) => setup(&registry, args).await,
            Command::Produce(args) => produce::produce(&registry, args).await,
            Command::Run(args) => run(&registry, args).await,
            Command::Audit(args) => audit(&registry, args).await,
            Command::Status(args) => status::status(&registry, args).await,
            Command::Skip(args) => skip::skip(&registry, args).await,
            Command::Query(args) => query::query(&registry, args).await,
        }
    })
}

/// The command line, with the registry's applications named in the help
/// (`--help` and each command's): the runner's applications are known only
/// at run time.
fn parse_with(registry: &Registry, args: impl IntoIterator<Item = std::ffi::OsString>) -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let command = with_applications(Cli::command(), registry);
    let kept = kept_words(&command, registry);
    let matches = command
        .try_get_matches_from(&args)
        .unwrap_or_else(|error| exit_redacted(error, &args, &kept));
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| exit_redacted(error, &args, &kept))
}

/// The words of a command line clap's errors may quote as they are: the
/// commands and the registry's applications.
fn kept_words(command: &clap::Command, registry: &Registry) -> Vec<String> {
    let mut kept: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    kept.extend(registry.names().into_iter().map(String::from));
    kept
}

/// Exits with clap's error, every word of `args` it could quote that may
/// be a secret redacted ([`redact_words`]). Help and version go out as clap
/// writes them.
fn exit_redacted(error: clap::Error, args: &[std::ffi::OsString], kept: &[String]) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        error.exit()
    }
    let text = redact_words(&error.render().to_string(), args, kept);
    eprint!("{text}");
    std::process::exit(error.exit_code())
}

/// `text` with the words of `args` that may be secrets replaced by
/// [`REDACTED`](crate::client::properties::REDACTED): the value of every
/// `-X KEY=VALUE`; the word after an `-X KEY` given without its `=` (so
/// `-X sasl.password hunter2` makes `hunter2` a stray argument clap would
/// quote); and the value of any `KEY=VALUE` whose key looks like a secret
/// ([`is_secret`](crate::client::properties::is_secret)). Other values,
/// such as an out-of-range `--session-timeout-ms`, are quoted as given.
fn redact_words(text: &str, args: &[std::ffi::OsString], kept: &[String]) -> String {
    use crate::client::properties::{is_secret, REDACTED};
    let args: Vec<String> = args
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let mut secrets: Vec<&str> = Vec::new();
    for (at, arg) in args.iter().enumerate().skip(1) {
        let property = match arg.strip_prefix("-X") {
            Some("") => args.get(at + 1).map(String::as_str),
            Some(attached) => Some(attached.strip_prefix('=').unwrap_or(attached)),
            None => None,
        };
        match property.map(|property| property.split_once('=')) {
            Some(Some((_, value))) => secrets.push(value),
            // `-X KEY` without its `=`: the next word may be the value.
            Some(None) => {
                let next = args.get(at + 1 + usize::from(arg == "-X"));
                if let Some(next) = next.filter(|next| !next.starts_with('-')) {
                    secrets.push(next);
                }
            }
            None => {
                if let Some((key, value)) = arg.split_once('=') {
                    if is_secret(key.trim_start_matches('-')) {
                        secrets.push(value);
                    }
                }
            }
        }
    }
    // Longest first, so that a secret holding another is replaced whole;
    // a command or an application's name is never taken for one.
    secrets.retain(|secret| !secret.is_empty() && !kept.iter().any(|word| word == secret));
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    let mut text = text.to_string();
    for secret in secrets {
        text = text.replace(secret, REDACTED);
    }
    text
}

/// `command` with `APP`'s help naming the registry's applications.
fn with_applications(command: clap::Command, registry: &Registry) -> clap::Command {
    let names = registry.names().join(", ");
    let listed = format!("Applications: {names}");
    let help = format!("The application, one of: {names}");
    let mut command = command.before_help(listed.clone());
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in subcommands {
        let help = help.clone();
        let listed = listed.clone();
        command = command.mut_subcommand(name, move |sub| {
            // Moved to the end of the arguments, `app` keeps the first
            // place by its index: `query APP STAGE KEY`.
            sub.mut_arg("app", move |arg| arg.help(help).index(1))
                .before_help(listed)
        });
    }
    command
}

/// The runtime's logs (task starts, retries, aborts, fencing, stops) and
/// librdkafka's warnings go to stderr; `PARSLEY_LOG` filters them.
fn install_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PARSLEY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,librdkafka=warn"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// The client and the application, or the exit code of what failed, said
/// on stderr.
fn client_and_app(registry: &Registry, common: &Common) -> Result<(LiveClient, LiveApp), ExitCode> {
    let app = registry
        .build(&common.app, &settings_of(common))
        .map_err(fail)?;
    let client = LiveClient::new(live_config(common)?).map_err(client_error)?;
    Ok((client, app))
}

/// The cluster's configuration from the command line: `--bootstrap` (or
/// `KAFKA_BOOTSTRAP_SERVERS`), and the client properties of
/// `--command-config` (or `PARSLEY_COMMAND_CONFIG`), `PARSLEY_CLIENT_*` and
/// `-X`, later ones winning ([`crate::client::properties`]).
fn live_config(common: &Common) -> Result<LiveConfig, ExitCode> {
    let mut found =
        crate::client::properties::gather(common.command_config.as_deref(), &common.properties)
            .map_err(|error| fail(format!("client properties: {error}")))?;
    // As Kafka's tools: --bootstrap over the file's bootstrap.servers.
    let from_properties = crate::client::properties::take_bootstrap(&mut found);
    let bootstrap = match (&common.bootstrap, from_properties) {
        (Some(servers), _) => servers.clone(),
        (None, Some(property)) if !property.value.trim().is_empty() => {
            tracing::info!(bootstrap = %property.value, from = %property.origin, "bootstrap servers from the client properties");
            property.value
        }
        (None, _) => bootstrap_of(common)?,
    };
    let config = LiveConfig::new(bootstrap).with_properties(found);
    if config
        .property("ssl.endpoint.identification.algorithm")
        .is_some_and(|algorithm| algorithm.eq_ignore_ascii_case("none"))
        && config.security_protocol().ends_with("ssl")
    {
        tracing::warn!("the broker's host name is not checked against its certificate (ssl.endpoint.identification.algorithm is empty or none), as a Java client with that setting does");
    }
    if let Some(principal) = config.principal() {
        let _ = PRINCIPAL.set(principal);
    }
    Ok(config)
}

/// The application factory's settings from the command line.
fn settings_of(common: &Common) -> Settings {
    Settings {
        namespace: common.namespace.clone(),
        values: common.settings.iter().cloned().collect(),
    }
}

/// `--bootstrap`, or `KAFKA_BOOTSTRAP_SERVERS`, or exit 2 said on stderr.
fn bootstrap_of(common: &Common) -> Result<String, ExitCode> {
    match &common.bootstrap {
        Some(servers) => Ok(servers.clone()),
        None => std::env::var(BOOTSTRAP_ENV)
            .ok()
            .filter(|servers| !servers.trim().is_empty())
            .ok_or_else(|| {
                fail(format!(
                    "no --bootstrap, no bootstrap.servers in the client properties and no \
                     {BOOTSTRAP_ENV}"
                ))
            }),
    }
}

/// A client that could not be made, said on stderr: exit 4 unreachable,
/// else 2.
fn client_error(error: LiveError) -> ExitCode {
    refuse(error)
}

/// The client, the application and its assembly on the cluster (C3).
async fn assembled(
    registry: &Registry,
    common: &Common,
) -> Result<(LiveClient, LiveApp, Assembly), ExitCode> {
    let (client, app) = client_and_app(registry, common)?;
    let assembly = assemble_on(&client, &app.app).await.map_err(refuse)?;
    Ok((client, app, assembly))
}

async fn setup(registry: &Registry, args: SetupArgs) -> ExitCode {
    if let Some(principal) = &args.print_acls {
        let app = match registry.build(&args.common.app, &settings_of(&args.common)) {
            Ok(app) => app,
            Err(error) => return fail(error),
        };
        let bootstrap = args
            .common
            .bootstrap
            .clone()
            .or_else(|| std::env::var(BOOTSTRAP_ENV).ok())
            .filter(|servers| !servers.trim().is_empty())
            .unwrap_or_else(|| "BOOTSTRAP".into());
        let principal = crate::acls::principal(principal);
        if args.producer {
            print!(
                "{}",
                crate::acls::print_producer(&app.app, &principal, &bootstrap)
            );
        } else {
            print!("{}", crate::acls::print(&app.app, &principal, &bootstrap));
        }
        return ExitCode::SUCCESS;
    }
    let (client, app) = match client_and_app(registry, &args.common) {
        Ok(found) => found,
        Err(code) => return code,
    };
    // Asked for, a partition count is demanded of every source and sink.
    let demanded: BTreeMap<String, u32> = match args.partitions {
        Some(partitions) => parsley::TopicContract::list(&app.app)
            .iter()
            .filter(|contract| contract.partitions == parsley::PartitionRule::Any)
            .map(|contract| (contract.name.to_string(), partitions))
            .collect(),
        None => BTreeMap::new(),
    };
    let default = args.partitions.unwrap_or(DEFAULT_PARTITIONS);
    match create_topics(&client, &app.app, default, &demanded).await {
        Ok(topics) => {
            for topic in topics {
                let what = if topic.created { "created" } else { "exists" };
                println!("{what} {} ({} partitions)", topic.topic, topic.partitions);
            }
            ExitCode::SUCCESS
        }
        Err(error) => refuse(error),
    }
}
/// The address an instance serving on `bound` advertises: `bound`, with
/// an unspecified IP (listening on every interface) replaced by the host's
/// name, which the other instances can resolve.
fn advertised(bound: std::net::SocketAddr) -> String {
    if bound.ip().is_unspecified() {
        let host = crate::instance_name()
            .rsplit_once('-')
            .map_or("localhost", |(host, _)| host);
        format!("{host}:{}", bound.port())
    } else {
        bound.to_string()
    }
}

async fn run(registry: &Registry, args: RunArgs) -> ExitCode {
    let (client, app) = match client_and_app(registry, &args.common) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let mut endpoints = None;
    if let Some(address) = args.metrics {
        match crate::endpoints::serve(address).await {
            Ok(serving) => {
                let at = serving.address();
                println!("metrics on http://{at}/metrics, health on http://{at}/health and http://{at}/ready, queries on http://{at}/query/<stage>/<key>");
                endpoints = Some(serving);
            }
            Err(error) => return fail(format!("--metrics {address}: {error}")),
        }
    }
    let config = RuntimeConfig::new(client.config().clone())
        .with_commit_interval(Duration::from_millis(args.commit_interval_ms))
        .with_failure_policy(args.on_failure.into());
    let config = match args.state_dir {
        Some(dir) => config.with_state_dir(dir),
        None => config,
    };
    let config =
        config.with_checkpoint_every(usize::try_from(args.checkpoint_every).unwrap_or(usize::MAX));
    let config = match (&args.advertise, &endpoints) {
        (Some(advertised), _) => config.with_query_endpoint(advertised.clone()),
        (None, Some(serving)) => config.with_query_endpoint(advertised(serving.address())),
        (None, None) => config,
    };
    let config = match args.instance {
        Some(share) => config.with_share(share),
        None => config.with_group(GroupMembership {
            session_timeout: Duration::from_millis(args.session_timeout_ms),
        }),
    };
    let app_id = app.app.id().to_owned();
    let runtime = match Runtime::start(Arc::new(app.app), config).await {
        Ok(runtime) => runtime,
        Err(error) => return refuse(error),
    };
    if let Some(endpoints) = &endpoints {
        endpoints.attach(runtime.health());
        endpoints.attach_queries(runtime.queries());
    }
    if args.instance.is_some() {
        let tasks: Vec<String> = runtime.tasks().iter().map(ToString::to_string).collect();
        println!("running tasks: {}", tasks.join(", "));
    } else {
        println!(
            "sharing the tasks with the other instances in group `{}`",
            membership_topic(&app_id)
        );
    }
    let membership_failure = runtime.membership_failure();
    let runs = runtime.run_until_signal().await;
    let (mut failed, mut fenced, mut denied) = (false, false, false);
    for run in runs {
        let delivered = run.metrics.records_delivered_total;
        let committed = run.metrics.transactions_committed_total;
        match run.outcome {
            Ok(()) => println!(
                "task {}: stopped, {delivered} delivered, {committed} commits",
                run.task
            ),
            Err(error) if error.is_fenced() => {
                // With group membership a fenced task moved, as tasks do.
                fenced |= args.instance.is_some();
                println!("task {}: fenced by a newer owner (X4)", run.task)
            }
            Err(error) if error.is_released() => {
                // The group moved it while the cluster was away: its next
                // owner resumes from the last commit. The error names the
                // task.
                println!("{error}")
            }
            Err(error) => {
                failed = true;
                denied |= security_code(&error) == Some(EXIT_NOT_AUTHORIZED);
                eprintln!("{}", said(&error, error.about_task(&run.task)));
            }
        }
    }
    let stopped_by = membership_failure
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(error) = stopped_by {
        let error = RuntimeError::from(error);
        failed = true;
        denied |= security_code(&error) == Some(EXIT_NOT_AUTHORIZED);
        eprintln!("error: {}", said(&error, error.to_string()));
    }
    if denied {
        ExitCode::from(EXIT_NOT_AUTHORIZED)
    } else if failed {
        ExitCode::from(EXIT_FAILED)
    } else if fenced {
        ExitCode::from(EXIT_FENCED)
    } else {
        ExitCode::SUCCESS
    }
}

async fn audit(registry: &Registry, args: AuditArgs) -> ExitCode {
    let (client, app, assembly) = match assembled(registry, &args.common).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let read = match read_committed(&client, &app.app, &assembly).await {
        Ok(read) => read,
        Err(error) => return refuse(error),
    };
    let options = parsley::audit::AuditOptions {
        search_steps: args.search_steps,
    };
    let report = parsley::audit::audit_with(&app.app, &assembly, &read.to_logs(), options);
    println!("{report}");
    if !report.is_clean() {
        ExitCode::from(EXIT_FAILED)
    } else if report.is_inconclusive() {
        ExitCode::from(EXIT_INCONCLUSIVE)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry names what it knows when asked for what it does not.
    #[test]
    fn an_unknown_application_is_named_with_the_known_ones() {
        let registry = Registry::new().app("copy", |_| Err("unused".into()));
        let error = registry.build("cpy", &Settings::default()).unwrap_err();
        assert_eq!(error, "unknown application \"cpy\": expected one of copy");
        let error = registry.build("copy", &Settings::default()).unwrap_err();
        assert_eq!(error, "application \"copy\" cannot be built: unused");
    }

    /// `--help` and every command's help name the registered applications.
    #[test]
    fn help_lists_the_registered_applications() {
        use clap::CommandFactory;
        let registry = Registry::new()
            .app("copy", |_| Err("unused".into()))
            .app("balances", |_| Err("unused".into()));
        let mut command = with_applications(Cli::command(), &registry);
        let help = command.render_help().to_string();
        assert!(help.contains("Applications: copy, balances"), "{help}");
        let run = command
            .find_subcommand_mut("run")
            .expect("run")
            .render_help()
            .to_string();
        assert!(run.contains("one of: copy, balances"), "{run}");
        let parsed = parse_with(
            &registry,
            ["parsley-live", "status", "copy"].map(Into::into),
        );
        assert!(matches!(parsed.command, Command::Status(_)));
    }

    /// `query APP STAGE KEY` reads its three words in that order.
    #[test]
    fn query_takes_the_application_then_the_stage_then_the_key() {
        let registry = Registry::new().app("balances", |_| Err("unused".into()));
        let parsed = parse_with(
            &registry,
            [
                "parsley-live",
                "query",
                "balances",
                "totals",
                "account-7",
                "--at",
                "127.0.0.1:9464",
            ]
            .map(Into::into),
        );
        let Command::Query(args) = parsed.command else {
            panic!("a query")
        };
        assert_eq!(
            (
                args.common.app.as_str(),
                args.stage.as_str(),
                args.key.as_str(),
                args.at.as_deref()
            ),
            ("balances", "totals", "account-7", Some("127.0.0.1:9464"))
        );
    }

    /// A secret given where clap expects none (`-X sasl.password hunter2`,
    /// a space for the `=`) is not echoed by clap's error, nor the value of
    /// any KEY=VALUE; the command and the application still are.
    #[test]
    fn a_command_line_error_never_echoes_a_secret() {
        use clap::CommandFactory;
        let registry = Registry::new().app("copy", |_| Err("unused".into()));
        let command = with_applications(Cli::command(), &registry);
        let kept = kept_words(&command, &registry);
        let mut echoed = 0;
        for line in [
            &[
                "parsley-live",
                "run",
                "copy",
                "-X",
                "sasl.password",
                "hunter2",
            ][..],
            &[
                "parsley-live",
                "run",
                "copy",
                "hunter2",
                "-X",
                "sasl.pasword=hunter2",
            ],
            &["parsley-live", "run", "copy", "--sasl-password=hunter2"],
        ] {
            let args: Vec<std::ffi::OsString> = line.iter().map(Into::into).collect();
            let error = command
                .clone()
                .try_get_matches_from(&args)
                .expect_err("a malformed command line");
            let told = error.render().to_string();
            let redacted = redact_words(&told, &args, &kept);
            assert!(!redacted.contains("hunter2"), "{line:?}: {redacted}");
            assert!(
                redacted.contains("run") || redacted.contains("copy") || redacted.contains("error")
            );
            echoed += usize::from(told.contains("hunter2"));
        }
        assert!(echoed > 0, "clap's own errors would have echoed the secret");
        // A value that is no secret is quoted as given.
        let args: Vec<std::ffi::OsString> =
            ["parsley-live", "run", "copy", "--commit-interval-ms", "0"]
                .iter()
                .map(Into::into)
                .collect();
        let told = command
            .clone()
            .try_get_matches_from(&args)
            .expect_err("out of range")
            .render()
            .to_string();
        assert_eq!(redact_words(&told, &args, &kept), told);
    }

    /// Durations read as humantime does, a bare number as seconds; a bad
    /// one is named.
    #[test]
    fn durations_read_as_humantime_does() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        let error = parse_duration("soon").unwrap_err();
        assert!(error.contains("`soon`"), "{error}");
    }

    /// `--set` values are KEY=VALUE, and a duration names a bad one.
    #[test]
    fn settings_parse_and_name_what_is_wrong() {
        assert_eq!(
            parse_setting("tick-ms=250"),
            Ok(("tick-ms".into(), "250".into()))
        );
        assert!(parse_setting("tick-ms").is_err());
        assert!(parse_setting("=3").is_err());
        let settings = Settings {
            namespace: "t1-".into(),
            values: [("tick-ms".to_string(), "soon".to_string())].into(),
        };
        assert_eq!(settings.topic("orders"), "t1-orders");
        let error = settings
            .millis("tick-ms", Duration::from_secs(1))
            .unwrap_err();
        assert!(error.to_string().contains("--set tick-ms=soon"), "{error}");
        assert_eq!(
            Settings::default()
                .millis("tick-ms", Duration::from_secs(1))
                .unwrap(),
            Duration::from_secs(1)
        );
    }
}
