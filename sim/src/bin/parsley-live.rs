//! `parsley-live`: the example topologies on a real Kafka cluster.
//!
//! - `setup` creates the topics the contract probe lists (C4);
//! - `produce` writes a seeded plan of inputs;
//! - `run` runs an instance of the application until SIGINT or SIGTERM,
//!   then commits what is pending and exits; instances share the tasks
//!   through Kafka's group membership (`--instance INDEX/COUNT` for a
//!   static share instead);
//! - `skip` gets a stopped task past one named record: the record is
//!   dead-lettered as skipped in the task's transaction (X5);
//! - `audit` reads the committed topics back with `read_committed` and runs
//!   the log-only checks of the simulator's checker on them.
//!
//! The cluster is `--bootstrap`, or `KAFKA_BOOTSTRAP_SERVERS`.
//! Exit codes: 0 done (or interrupted), 1 a task failed or the audit found
//! violations, 2 bad arguments or a cluster that cannot be used, 3 fenced by
//! another owner with a static share (the tasks moved: not a failure of
//! this instance, but not done either; with group membership tasks move all
//! the time, and a fence is not reported), 4 the cluster is unreachable.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use parsley::assembly::Assembly;
use parsley::live::{
    assemble_on, create_topics, membership_topic, skip_record, GroupMembership, InstanceShare,
    LiveClient, LiveConfig, LiveError, Runtime, RuntimeConfig, BOOTSTRAP_ENV,
};
use parsley_sim::audit::audit;
use parsley_sim::live::{namespaced, plan_inputs, produce_inputs, read_committed, task_status};
use parsley_sim::topologies::ExampleTopology;
use parsley_sim::topologies::TopologyName;

#[derive(Parser)]
#[command(
    name = "parsley-live",
    version,
    about = "Runs Parsley's example topologies on a real Kafka cluster",
    after_help = "Exit codes: 0 done or interrupted, 1 a task failed or the audit found \
                  violations, 2 bad arguments or an unusable cluster, 3 fenced by another \
                  owner, 4 cluster unreachable.\n\n\
                  Example (a broker from scripts/kafka/broker.sh):\n  \
                  parsley-live setup balances --partitions 4\n  \
                  parsley-live produce balances --count 1000\n  \
                  parsley-live run balances          # Ctrl-C stops it gracefully\n  \
                  parsley-live audit balances"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the application's topics (existing ones are left alone).
    Setup(SetupArgs),
    /// Produce a seeded plan of input records.
    Produce(ProduceArgs),
    /// Run an instance of the application until SIGINT or SIGTERM.
    Run(RunArgs),
    /// Read the committed topics back and check their stamps and outputs.
    Audit(Common),
    /// Print each task's committed position, log end, lag and state, read
    /// from the cluster (whether or not an instance runs).
    Status(Common),
    /// Get a stopped task past one record (X5): dead-letter the record at
    /// TOPIC-PARTITION@OFFSET as skipped, in the task's own transaction, and
    /// commit; then start the instances again. The stage must declare a
    /// dead-letter topic.
    Skip(SkipArgs),
}

#[derive(Args)]
struct SkipArgs {
    #[command(flatten)]
    common: Common,
    /// The stage whose task stopped.
    #[arg(long)]
    stage: String,
    /// The topic of the record to skip (a source of the stage).
    #[arg(long)]
    topic: String,
    /// Its partition, which is the task's.
    #[arg(long)]
    partition: u32,
    /// Its offset, as the task's stop error names it.
    #[arg(long)]
    offset: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum Example {
    Balances,
    AuditCut,
    Chain,
    FanIn,
    Diamond,
    DeadLetter,
}

impl Example {
    fn topology(self) -> TopologyName {
        match self {
            Example::Balances => TopologyName::Balances,
            Example::AuditCut => TopologyName::AuditCut,
            Example::Chain => TopologyName::Chain,
            Example::FanIn => TopologyName::FanIn,
            Example::Diamond => TopologyName::Diamond,
            Example::DeadLetter => TopologyName::DeadLetter,
        }
    }
}

#[derive(Args)]
struct Common {
    /// The example topology.
    #[arg(value_enum)]
    example: Example,
    /// Prefix of the application id and every topic, so runs can share a broker.
    #[arg(long, default_value = "")]
    namespace: String,
    /// Bootstrap servers [default: $KAFKA_BOOTSTRAP_SERVERS].
    #[arg(long)]
    bootstrap: Option<String>,
    /// The stage's tick interval, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    tick_ms: u64,
}

#[derive(Args)]
struct SetupArgs {
    #[command(flatten)]
    common: Common,
    /// Partitions of each source and sink topic.
    #[arg(long, default_value_t = 4)]
    partitions: u32,
}

#[derive(Args)]
struct ProduceArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, default_value_t = 1000)]
    count: usize,
    #[arg(long, default_value_t = 16)]
    keys: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
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
    /// instance before its tasks move to the others, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    session_timeout_ms: u64,
    /// The commit interval, in milliseconds (X2).
    #[arg(long, default_value_t = 100)]
    commit_interval_ms: u64,
    /// Serve the tasks' figures (counters, held records, consumer lag,
    /// commit latency) in the Prometheus text format on ADDR, e.g.
    /// `127.0.0.1:9464`, at any path.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
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

/// A task stopped on an error, or the audit found violations.
const EXIT_FAILED: u8 = 1;
/// Bad arguments, or a cluster that cannot be used.
const EXIT_UNUSABLE: u8 = 2;
/// Every failed task was fenced by a newer owner (X4).
const EXIT_FENCED: u8 = 3;
/// No bootstrap address could be reached.
const EXIT_UNREACHABLE: u8 = 4;

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_UNUSABLE)
}

fn client_and_topology(common: &Common) -> Result<(LiveClient, ExampleTopology), ExitCode> {
    let servers = match &common.bootstrap {
        Some(servers) => servers.clone(),
        None => std::env::var(BOOTSTRAP_ENV)
            .ok()
            .filter(|servers| !servers.trim().is_empty())
            .ok_or_else(|| fail(format!("no --bootstrap and no {BOOTSTRAP_ENV}")))?,
    };
    let client = LiveClient::new(LiveConfig::new(servers)).map_err(|error| {
        eprintln!("error: {error}");
        match error {
            LiveError::Unreachable { .. } => ExitCode::from(EXIT_UNREACHABLE),
            _ => ExitCode::from(EXIT_UNUSABLE),
        }
    })?;
    let topology = namespaced(
        common.example.topology(),
        &common.namespace,
        Duration::from_millis(common.tick_ms),
    )
    .map_err(fail)?;
    Ok((client, topology))
}

/// The runtime's logs (task starts, retries, aborts, fencing, stops) and
/// librdkafka's warnings go to stderr; `PARSLEY_LOG` filters them, in
/// `tracing_subscriber::EnvFilter`'s syntax (default `info,librdkafka=warn`).
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

/// The client, the example and its assembly on the cluster (C3), or the
/// exit code of what failed, said on stderr.
async fn assembled(common: &Common) -> Result<(LiveClient, ExampleTopology, Assembly), ExitCode> {
    let (client, topology) = client_and_topology(common)?;
    let assembly = assemble_on(&client, &topology.app).await.map_err(fail)?;
    Ok((client, topology, assembly))
}

#[tokio::main]
async fn main() -> ExitCode {
    install_logs();
    let cli = Cli::parse();
    match cli.command {
        Command::Setup(args) => setup(args).await,
        Command::Produce(args) => produce(args).await,
        Command::Run(args) => run(args).await,
        Command::Audit(args) => audit_command(args).await,
        Command::Status(args) => status(args).await,
        Command::Skip(args) => skip(args).await,
    }
}

async fn setup(args: SetupArgs) -> ExitCode {
    let (client, topology) = match client_and_topology(&args.common) {
        Ok(found) => found,
        Err(code) => return code,
    };
    match create_topics(&client, &topology.app, args.partitions, &BTreeMap::new()).await {
        Ok(topics) => {
            for topic in topics {
                let what = if topic.created { "created" } else { "exists" };
                println!("{what} {} ({} partitions)", topic.topic, topic.partitions);
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(error),
    }
}

async fn produce(args: ProduceArgs) -> ExitCode {
    let (client, topology, assembly) = match assembled(&args.common).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let plan = plan_inputs(&topology, args.count, args.keys, args.seed);
    match produce_inputs(&client, &topology, &assembly, &plan).await {
        Ok(landed) => {
            println!("produced {} records", landed.len());
            ExitCode::SUCCESS
        }
        Err(error) => fail(error),
    }
}

async fn run(args: RunArgs) -> ExitCode {
    let (client, topology) = match client_and_topology(&args.common) {
        Ok(found) => found,
        Err(code) => return code,
    };
    if let Some(address) = args.metrics {
        let installed = metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(address)
            .install();
        if let Err(error) = installed {
            return fail(format!("--metrics {address}: {error}"));
        }
        println!("metrics on http://{address}/metrics");
    }
    let config = RuntimeConfig::new(client.config().clone())
        .with_commit_interval(Duration::from_millis(args.commit_interval_ms));
    let config = match args.instance {
        Some(share) => config.with_share(share),
        None => config.with_group(GroupMembership {
            session_timeout: Duration::from_millis(args.session_timeout_ms),
        }),
    };
    let app_id = topology.app.id().to_owned();
    let runtime = match Runtime::start(Arc::new(topology.app), config).await {
        Ok(runtime) => runtime,
        Err(error) => return fail(error),
    };
    if args.instance.is_some() {
        let tasks: Vec<String> = runtime.tasks().iter().map(ToString::to_string).collect();
        println!("running tasks: {}", tasks.join(", "));
    } else {
        println!(
            "sharing the tasks with the other instances in group `{}`",
            membership_topic(&app_id)
        );
    }
    let runs = runtime.run_until_signal().await;
    let (mut failed, mut fenced) = (false, false);
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
            Err(error) => {
                failed = true;
                eprintln!("task {}: {error}", run.task);
            }
        }
    }
    if failed {
        ExitCode::from(EXIT_FAILED)
    } else if fenced {
        ExitCode::from(EXIT_FENCED)
    } else {
        ExitCode::SUCCESS
    }
}

async fn skip(args: SkipArgs) -> ExitCode {
    let (client, topology) = match client_and_topology(&args.common) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let topic = format!("{}{}", args.common.namespace, args.topic);
    let tp = parsley::Tp::new(topic, args.partition);
    let task = parsley::task::TaskId {
        stage: args.stage.into(),
        partition: args.partition,
    };
    let config = RuntimeConfig::new(client.config().clone());
    match skip_record(
        Arc::new(topology.app),
        config,
        task.clone(),
        tp.clone(),
        args.offset,
    )
    .await
    {
        Ok(metrics) => {
            println!(
                "task {task}: {tp}@{} dead-lettered as skipped and committed ({} records delivered)",
                args.offset, metrics.records_delivered_total
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(if error.is_unreachable() {
                EXIT_UNREACHABLE
            } else {
                EXIT_FAILED
            })
        }
    }
}

async fn audit_command(common: Common) -> ExitCode {
    let (client, topology, assembly) = match assembled(&common).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let read = match read_committed(&client, &topology.app, &assembly).await {
        Ok(read) => read,
        Err(error) => return fail(error),
    };
    let report = audit(&topology.app, &assembly, &read.to_logs());
    println!("{report}");
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn status(common: Common) -> ExitCode {
    let (client, topology, assembly) = match assembled(&common).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let statuses = match task_status(&client, &topology.app, &assembly).await {
        Ok(statuses) => statuses,
        Err(error) => return fail(error),
    };
    println!(
        "{:<20} {:<36} {:>10} {:>10} {:>8}  state",
        "task", "tp", "committed", "log end", "lag"
    );
    for task in &statuses {
        for tp in &task.tps {
            let committed = tp
                .committed
                .map_or("-".to_string(), |offset| offset.to_string());
            let lag = if tp.exact {
                tp.lag.to_string()
            } else {
                format!("~{}", tp.lag)
            };
            println!(
                "{:<20} {:<36} {:>10} {:>10} {:>8}  {}",
                format!("{}/{}", task.stage, task.partition),
                tp.tp.to_string(),
                committed,
                tp.stable_end,
                lag,
                task.state()
            );
        }
    }
    ExitCode::SUCCESS
}
