//! The live runtime against a real broker: start-up checks (C3), bad input
//! on the wire (§8), fencing when a task moves (X4), ticks from the real
//! clock (T3), the graceful stop, and the topic-creation helper (C4).
//!
//! Each test builds a small application under unique names, so they run in
//! parallel on one broker. The example topologies run live in
//! `examples/topologies/tests/live_examples.rs` (conformance, kill -9, broker restart).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parsley::header::STAMP_HEADER;
use parsley::AssemblyFailure;
use parsley::{
    App, ConsumedRecord, Header, Json, Parsley, RecordData, Stage, Step, TaskError, Topic,
    TopicName, Tp,
};
use parsley_live::{
    assemble_on, create_topics, FailurePolicy, Isolation, LiveClient, LiveConfig, Runtime,
    RuntimeConfig, RuntimeError, TaskEndKind, TaskRun,
};

use support::{live_config, now_ms, unique};

/// A stateful stage under unique names: sums values per key into `totals`,
/// emitting each new total, and ticks every `tick` into `cuts`.
struct Sums {
    app: App,
    input: Topic<String, i64>,
    totals: Topic<String, i64>,
}

fn sums(tick: Duration) -> Sums {
    sums_with(tick, false)
}

/// [`sums`], refused records dead-lettered (X5) when `dead_letters`.
fn sums_with(tick: Duration, dead_letters: bool) -> Sums {
    let input: Topic<String, i64> = Topic::new(unique("in"));
    let totals: Topic<String, i64> = Topic::new(unique("totals"));
    let emit = totals.clone();
    let cut = totals.clone();
    let mut stage = Stage::named("sum")
        .state(Json, || 0i64)
        .on(&input, move |sum: i64, record| {
            if *record.value() < 0 {
                return Err(format!("value {} is negative", record.value()));
            }
            let total = sum + record.value();
            Ok(Step::of(total).emit(emit.send(record.key().cloned(), total)))
        })
        .ticks(tick, move |tick| vec![cut.send(None, tick.timestamp)])
        .into(&totals);
    if dead_letters {
        stage = stage.dead_letter_queue();
    }
    let stage = stage.build();
    let app = Parsley::named(unique("app"))
        .stage(stage)
        .build()
        .expect("the test app composes");
    Sums { app, input, totals }
}

fn config(live: LiveConfig) -> RuntimeConfig {
    RuntimeConfig::new(live).with_commit_interval(Duration::from_millis(100))
}

fn json(value: i64) -> Bytes {
    Bytes::from(value.to_string())
}

fn record(key: &str, value: Bytes, headers: Vec<Header>) -> RecordData {
    RecordData {
        key: Some(Bytes::from(format!("\"{key}\""))),
        value: Some(value),
        headers,
        timestamp: now_ms(),
    }
}

async fn append(client: &LiveClient, tp: &Tp, data: RecordData) -> u64 {
    client
        .plain_producer()
        .expect("producer")
        .append(tp, &data)
        .await
        .expect("append")
}

async fn read(client: &LiveClient, tp: &Tp, isolation: Isolation) -> Vec<ConsumedRecord> {
    let mut consumer = client
        .consumer(&unique("reader"), isolation)
        .expect("consumer");
    consumer.fetch(tp, 0).await.expect("fetch").records
}

/// Waits until `ready` holds of what `tp` shows at `isolation`, or panics.
async fn wait_for(
    client: &LiveClient,
    tp: &Tp,
    isolation: Isolation,
    what: &str,
    ready: impl Fn(&[ConsumedRecord]) -> bool,
) -> Vec<ConsumedRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let records = read(client, tp, isolation).await;
        if ready(&records) {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} on {tp}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `runtime`'s tasks have all stopped, or panics with the log
/// of application `app`.
async fn wait_finished(runtime: Runtime, app: &str) -> Vec<TaskRun> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !runtime.finished() {
        assert!(
            Instant::now() < deadline,
            "the runtime's tasks did not stop; the log:\n{}",
            log_of(app)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    runtime.wait().await
}

fn values(records: &[ConsumedRecord]) -> Vec<String> {
    records
        .iter()
        .map(|record| {
            String::from_utf8_lossy(record.data.value.as_deref().unwrap_or_default()).into_owned()
        })
        .collect()
}

/// The committed offset of the `sum` stage's group (X6) on `tp`.
async fn committed_offset(client: &LiveClient, app: &App, tp: &Tp) -> Option<u64> {
    let group = app.group_of("sum").expect("the test app has a sum stage");
    let consumer = client
        .consumer(group, Isolation::ReadCommitted)
        .expect("consumer");
    let mut found = consumer
        .committed(std::slice::from_ref(tp))
        .await
        .expect("committed offsets");
    found.pop().flatten().map(|committed| committed.offset)
}

// ----- C3 and C4 -----

/// C3: a missing source topic stops start-up with an error naming it.
#[tokio::test(flavor = "multi_thread")]
async fn c3_missing_topic_stops_start_up() {
    let Some(live) = live_config() else { return };
    let app = sums(Duration::from_secs(60));
    let error = match Runtime::start(Arc::new(app.app), config(live)).await {
        Ok(_) => panic!("start-up must fail without topics"),
        Err(error) => error,
    };
    let RuntimeError::Assembly(assembly) = &error else {
        panic!("expected an assembly error, got {error}");
    };
    let missing: Vec<&str> = assembly
        .failures
        .iter()
        .filter_map(|failure| match failure {
            AssemblyFailure::Missing { topic, .. } => Some(topic.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        missing.contains(&app.input.name().as_str()),
        "{error:#}: {missing:?}"
    );
}

/// C3: a tick topic whose partition count is not the stage's task count
/// stops start-up, naming the topic and both counts.
#[tokio::test(flavor = "multi_thread")]
async fn c3_wrong_tick_partition_count_stops_start_up() {
    let Some(live) = live_config() else { return };
    let client = LiveClient::new(live.clone()).expect("client");
    let app = sums(Duration::from_secs(60));
    let tick_topic = app.app.stages()[0]
        .tick_topic
        .clone()
        .expect("the stage ticks");
    client
        .create_topic(tick_topic.as_str(), 3)
        .await
        .expect("tick topic");
    // Setup refuses it first, and creates nothing.
    let refused = create_topics(&client, &app.app, 2, &Default::default())
        .await
        .expect_err("setup refuses 3 tick partitions for 2 tasks");
    assert!(
        refused.to_string().contains(tick_topic.as_str()),
        "{refused}"
    );
    for topic in [app.input.name(), app.totals.name()] {
        client
            .create_topic(topic.as_str(), 2)
            .await
            .expect("the other topics");
    }
    if let Some(changelog) = app.app.stages()[0].changelog.clone() {
        client
            .create_topic(changelog.as_str(), 2)
            .await
            .expect("the changelog");
    }
    let error = assemble_on(&client, &app.app)
        .await
        .expect_err("3 tick partitions for 2 tasks");
    let RuntimeError::Assembly(assembly) = &error else {
        panic!("expected an assembly error, got {error}");
    };
    let text = format!("{assembly}\n{:?}", assembly.failures);
    assert!(text.contains(tick_topic.as_str()), "{text}");
    assert!(
        !assembly
            .failures
            .iter()
            .any(|failure| matches!(failure, AssemblyFailure::Missing { .. })),
        "only the tick topic is wrong: {text}"
    );
}

/// Group membership: the instances' topic `<app>.instances` is made at
/// start with a partition per task; one of another size (the application's
/// tasks changed) stops start-up, naming the topic and both counts.
#[tokio::test(flavor = "multi_thread")]
async fn group_membership_refuses_a_membership_topic_of_another_size() {
    let Some(live) = live_config() else { return };
    let client = LiveClient::new(live.clone()).expect("client");
    let app = sums(Duration::from_secs(60));
    create_topics(&client, &app.app, 2, &Default::default())
        .await
        .expect("topics");
    let topic = parsley_live::membership_topic(app.app.id());
    client
        .create_topic(&topic, 5)
        .await
        .expect("a membership topic of 5");
    let group = config(live).with_group(parsley_live::GroupMembership::default());
    let error = match Runtime::start(Arc::new(app.app), group).await {
        Ok(_) => panic!("5 partitions for 2 tasks must stop start-up"),
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(
        matches!(
            error,
            RuntimeError::MembershipTopic {
                found: 5,
                tasks: 2,
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains(&topic) && text.contains("delete it"),
        "{text}"
    );
}

/// C4: the helper creates every topic the probe lists, derived ones sized
/// from the sources, with the suggested settings; the assembly then passes.
#[tokio::test(flavor = "multi_thread")]
async fn c4_create_topics_makes_the_assembly_pass() {
    let Some(live) = live_config() else { return };
    let client = LiveClient::new(live).expect("client");
    let app = sums(Duration::from_secs(60));
    let created = create_topics(&client, &app.app, 3, &Default::default())
        .await
        .expect("create");
    assert!(
        created
            .iter()
            .all(|topic| topic.created && topic.partitions == 3),
        "{created:?}"
    );
    let again = create_topics(&client, &app.app, 3, &Default::default())
        .await
        .expect("create again");
    assert!(again.iter().all(|topic| !topic.created), "{again:?}");
    let assembly = assemble_on(&client, &app.app).await.expect("assembles");
    assert_eq!(assembly.tasks_of("sum"), Some(3));
}

// ----- running -----

async fn set_up(live: &LiveConfig, tick: Duration, partitions: u32) -> (LiveClient, Sums) {
    let client = LiveClient::new(live.clone()).expect("client");
    let app = sums(tick);
    create_topics(&client, &app.app, partitions, &Default::default())
        .await
        .expect("topics");
    (client, app)
}

/// X1, S5, G7: records go through the gate and the fold, outputs commit,
/// and a second instance started after a graceful stop resumes from the
/// committed state and positions: nothing lost, nothing repeated.
#[tokio::test(flavor = "multi_thread")]
async fn x1_outputs_commit_and_a_restart_resumes_from_committed_state() {
    let Some(live) = live_config() else { return };
    let (client, app) = set_up(&live, Duration::from_secs(600), 1).await;
    let input = Tp::new(app.input.name().clone(), 0);
    let totals = Tp::new(app.totals.name().clone(), 0);
    for value in [1, 2, 3] {
        append(&client, &input, record("k", json(value), Vec::new())).await;
    }
    let shared = Arc::new(app.app.clone());
    let first = Runtime::start(Arc::clone(&shared), config(live.clone()))
        .await
        .expect("start");
    wait_for(
        &client,
        &totals,
        Isolation::ReadCommitted,
        "three totals",
        |r| r.len() == 3,
    )
    .await;
    first.stopper().stop();
    for run in first.wait().await {
        run.outcome.expect("a graceful stop");
    }
    append(&client, &input, record("k", json(4), Vec::new())).await;
    let second = Runtime::start(shared, config(live)).await.expect("restart");
    let seen = wait_for(
        &client,
        &totals,
        Isolation::ReadCommitted,
        "four totals",
        |r| r.len() >= 4,
    )
    .await;
    second.stopper().stop();
    second.wait().await;
    assert_eq!(values(&seen), ["1", "3", "6", "10"]);
    assert_eq!(committed_offset(&client, &app.app, &input).await, Some(4));
}

/// X2 and the graceful stop: with a commit interval far longer than the
/// test, stopping still commits what was delivered.
#[tokio::test(flavor = "multi_thread")]
async fn graceful_stop_commits_pending_work() {
    let Some(live) = live_config() else { return };
    let (client, app) = set_up(&live, Duration::from_secs(600), 1).await;
    let input = Tp::new(app.input.name().clone(), 0);
    let totals = Tp::new(app.totals.name().clone(), 0);
    for value in [5, 6] {
        append(&client, &input, record("k", json(value), Vec::new())).await;
    }
    let runtime = Runtime::start(
        Arc::new(app.app.clone()),
        config(live).with_commit_interval(Duration::from_secs(3600)),
    )
    .await
    .expect("start");
    // Delivered and sent, but not committed: visible only uncommitted.
    wait_for(
        &client,
        &totals,
        Isolation::ReadUncommitted,
        "two sent totals",
        |r| r.len() == 2,
    )
    .await;
    assert!(read(&client, &totals, Isolation::ReadCommitted)
        .await
        .is_empty());
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop");
    }
    let committed = wait_for(
        &client,
        &totals,
        Isolation::ReadCommitted,
        "committed totals",
        |r| r.len() == 2,
    )
    .await;
    assert_eq!(values(&committed), ["5", "11"]);
}

/// X2 within a turn: a backlog waiting when the task starts comes in turns
/// of up to `max_batch` records, each far longer than a 5-ms commit
/// interval; the task still commits about every interval, not once a turn
/// (it did: a turn of 50,000 records was one transaction).
#[tokio::test(flavor = "multi_thread")]
async fn x2_a_long_turn_commits_every_interval_within_it() {
    const RECORDS: u64 = 30_000;
    let Some(live) = live_config() else { return };
    let (client, app) = set_up(&live, Duration::from_secs(600), 1).await;
    let input = Tp::new(app.input.name().clone(), 0);
    let producer = client.plain_producer().expect("producer");
    let deliveries: Vec<_> = (0..RECORDS)
        .map(|_| {
            producer
                .enqueue(&input, &record("k", json(1), Vec::new()))
                .expect("enqueue")
        })
        .collect();
    for delivery in deliveries {
        delivery.wait().await.expect("appended");
    }
    let runtime = Runtime::start(
        Arc::new(app.app.clone()),
        config(live).with_commit_interval(Duration::from_millis(5)),
    )
    .await
    .expect("start");
    let deadline = Instant::now() + Duration::from_secs(120);
    while committed_offset(&client, &app.app, &input).await != Some(RECORDS) {
        assert!(Instant::now() < deadline, "the backlog was not committed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    runtime.stopper().stop();
    let runs = runtime.wait().await;
    let transactions: u64 = runs
        .iter()
        .map(|run| run.metrics.transactions_committed_total)
        .sum();
    let deliveries: u64 = runs
        .iter()
        .map(|run| run.metrics.records_delivered_total)
        .sum();
    assert_eq!(deliveries, RECORDS);
    assert!(
        transactions >= 20,
        "{RECORDS} records in {transactions} transactions at a 5-ms commit interval"
    );
}

/// T3, T4: ticks come from the real clock, one per interval, on the task's
/// partition of the tick topic, and are delivered back through the gate.
#[tokio::test(flavor = "multi_thread")]
async fn t3_ticks_follow_the_real_clock() {
    let Some(live) = live_config() else { return };
    let (client, app) = set_up(&live, Duration::from_millis(300), 1).await;
    let tick_topic = app.app.stages()[0].tick_topic.clone().expect("ticks");
    let ticks = Tp::new(tick_topic, 0);
    let totals = Tp::new(app.totals.name().clone(), 0);
    let started = now_ms();
    let runtime = Runtime::start(Arc::new(app.app.clone()), config(live))
        .await
        .expect("start");
    // Each delivered tick emits its timestamp to `totals`.
    wait_for(
        &client,
        &totals,
        Isolation::ReadCommitted,
        "three delivered ticks",
        |r| r.len() >= 3,
    )
    .await;
    runtime.stopper().stop();
    runtime.wait().await;
    let emitted = read(&client, &ticks, Isolation::ReadCommitted).await;
    let times: Vec<i64> = emitted.iter().map(|tick| tick.data.timestamp).collect();
    assert!(times.len() >= 3, "{times:?}");
    assert!(
        times[0] >= started + 300,
        "the first tick waits one interval: {times:?} from {started}"
    );
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= 300,
            "ticks are at least the interval apart: {times:?}"
        );
    }
    for tick in &emitted {
        assert!(tick.data.key.is_none(), "T4: tick records have no key");
        assert!(
            tick.data.header(STAMP_HEADER).is_some(),
            "T4: ticks are stamped"
        );
    }
}

/// Runs the test app over a good record, `bad`, and another good record,
/// until its task stops; checks that the committed position stays at or
/// before `bad`, and returns where `bad` landed and the task's error.
async fn stops_on(bad: RecordData) -> Option<(Tp, u64, RuntimeError)> {
    let live = live_config()?;
    let (client, app) = set_up(&live, Duration::from_secs(600), 1).await;
    let input = Tp::new(app.input.name().clone(), 0);
    append(&client, &input, record("k", json(1), Vec::new())).await;
    let offset = append(&client, &input, bad).await;
    append(&client, &input, record("k", json(3), Vec::new())).await;
    let runtime = Runtime::start(Arc::new(app.app.clone()), config(live))
        .await
        .expect("start");
    let mut runs = wait_finished(runtime, app.app.id()).await;
    let error = runs.remove(0).outcome.expect_err("the task stops");
    let committed = committed_offset(&client, &app.app, &input)
        .await
        .unwrap_or(0);
    assert!(
        committed <= offset,
        "committed {committed} is past the bad record {offset}: {error}"
    );
    Some((input, offset, error))
}

/// §8 on the wire: a record whose stamp header does not decode stops the
/// task with an error naming its tp and offset, and the committed position
/// stays before it.
#[tokio::test(flavor = "multi_thread")]
async fn bad_stamp_on_the_wire_stops_the_task_before_it() {
    let corrupt = vec![Header {
        name: STAMP_HEADER.into(),
        value: Bytes::from_static(&[0xff, 0x01, 0x02]),
    }];
    let Some((input, bad, error)) = stops_on(record("k", json(2), corrupt)).await else {
        return;
    };
    match &error {
        RuntimeError::Task(TaskError::BadStamp { tp, offset, .. }) => {
            assert_eq!((tp, *offset), (&input, bad));
        }
        other => panic!("expected a bad stamp error, got {other}"),
    }
    let text = error.to_string();
    assert!(text.contains(&format!("{input}@{bad}")), "{text}");
}

/// §8 on the wire: a value the topic's codec rejects stops the task with a
/// codec error naming tp, offset and the part.
#[tokio::test(flavor = "multi_thread")]
async fn value_the_codec_rejects_stops_the_task_before_it() {
    let not_json = record("k", Bytes::from_static(b"not json"), Vec::new());
    let Some((input, bad, error)) = stops_on(not_json).await else {
        return;
    };
    match error {
        RuntimeError::Task(TaskError::Codec {
            tp, offset, part, ..
        }) => {
            assert_eq!((tp, offset), (input, bad));
            assert_eq!(part.name(), "value");
        }
        other => panic!("expected a codec error, got {other}"),
    }
}

/// X5: a fold that fails stops the task naming stage, tp and offset; the
/// record is not skipped.
#[tokio::test(flavor = "multi_thread")]
async fn x5_logic_error_stops_the_task_without_skipping() {
    let Some((input, bad, error)) = stops_on(record("k", json(-5), Vec::new())).await else {
        return;
    };
    match error {
        RuntimeError::Task(TaskError::Logic {
            tp,
            offset,
            message,
            ..
        }) => {
            assert_eq!((tp, offset), (input, bad));
            assert!(message.contains("negative"), "{message}");
        }
        other => panic!("expected a logic error, got {other}"),
    }
}

/// X4: when a second instance takes a task, its producer fences the first
/// owner, whose task stops as fenced; the new owner carries on, and the
/// committed outputs hold every input exactly once. The next input is
/// written once the new owner runs, so the old owner is idle when it is
/// fenced and learns it at its next transactional call, the one for that
/// input.
#[tokio::test(flavor = "multi_thread")]
async fn x4_moving_a_task_fences_the_old_owner() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    let moved = move_the_task(&live, SecondInput::OnceTheNewOwnerRuns).await;
    append(
        &moved.client,
        &moved.input,
        record("k", json(3), Vec::new()),
    )
    .await;
    let seen = wait_for(
        &moved.client,
        &moved.totals,
        Isolation::ReadCommitted,
        "three totals",
        |r| r.len() >= 3,
    )
    .await;
    moved.new.stopper().stop();
    moved.new.wait().await;
    assert_eq!(values(&seen), ["1", "3", "6"]);
}

/// X4, an idle zombie: no input comes after the new owner fences the old
/// one, so the old owner has no record or tick that would make a
/// transactional call. It still learns that it was fenced, at its fence
/// check (an empty transaction after `fence_check` without one), and stops.
/// Without the check it runs on, fenced, reported running, for good.
#[tokio::test(flavor = "multi_thread")]
async fn x4_an_idle_zombie_learns_of_its_fence_and_stops() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    let moved = move_the_task(&live, SecondInput::Never).await;
    moved.new.stopper().stop();
    moved.new.wait().await;
}

/// X4, mid-transaction or just after: the next input is written as the
/// new owner starts, so the old owner may be inside a transaction when the
/// new owner's `init_transactions` makes the coordinator abort it, or may
/// commit it just before and be idle when fenced. Either way it stops as
/// fenced. Five rounds, as the race falls either way.
#[tokio::test(flavor = "multi_thread")]
async fn x4_a_zombie_fenced_as_it_works_stops() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    for _ in 0..5 {
        let moved = move_the_task(&live, SecondInput::AsTheNewOwnerStarts).await;
        moved.new.stopper().stop();
        moved.new.wait().await;
    }
}

/// When [`move_the_task`] writes the second input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SecondInput {
    OnceTheNewOwnerRuns,
    AsTheNewOwnerStarts,
    Never,
}

/// A task moved to a second instance ([`move_the_task`]): the client, the
/// input and totals tps, and the new owner, still running.
struct Moved {
    client: LiveClient,
    input: Tp,
    totals: Tp,
    new: Runtime,
}

/// Runs the one-task test app on an instance over one input, starts a
/// second instance that takes the task, writes a second input as `second`
/// says, and checks that the old owner stops as fenced (X4). Both
/// instances check their fence after a second without a transaction.
async fn move_the_task(live: &LiveConfig, second: SecondInput) -> Moved {
    let (client, app) = set_up(live, Duration::from_secs(600), 1).await;
    let input = Tp::new(app.input.name().clone(), 0);
    let totals = Tp::new(app.totals.name().clone(), 0);
    let shared = Arc::new(app.app.clone());
    let config = || config(live.clone()).with_fence_check(Duration::from_secs(1));
    append(&client, &input, record("k", json(1), Vec::new())).await;
    let old = Runtime::start(Arc::clone(&shared), config())
        .await
        .expect("start");
    wait_for(
        &client,
        &totals,
        Isolation::ReadCommitted,
        "the first total",
        |r| r.len() == 1,
    )
    .await;
    let new = Runtime::start(shared, config())
        .await
        .expect("start the new owner");
    if second != SecondInput::AsTheNewOwnerStarts {
        wait_ready(&new, app.app.id()).await;
    }
    if second != SecondInput::Never {
        append(&client, &input, record("k", json(2), Vec::new())).await;
    }
    let runs = wait_finished(old, app.app.id()).await;
    let error = runs[0].outcome.as_ref().expect_err("the zombie stops");
    assert!(error.is_fenced(), "expected fencing, got {error}");
    Moved {
        client,
        input,
        totals,
        new,
    }
}

/// Waits until every task `runtime` owns runs, or panics with the log of
/// application `app`.
async fn wait_ready(runtime: &Runtime, app: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while runtime.health().ready().is_err() {
        assert!(
            Instant::now() < deadline,
            "the new owner's tasks did not start; the log:\n{}",
            log_of(app)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The captured log lines of application `app`.
fn log_of(app: &str) -> String {
    support::captured_logs()
        .lines()
        .filter(|line| line.contains(app))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A failure is seen when it happens: by default a task that stops on a
/// logic error (X5) stops the whole instance at once, its sibling stopping
/// gracefully, so the process ends with the error instead of running on
/// without it; the log says each task's start and end, the failure with
/// its record.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_task_stops_the_instance_by_default() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    let (client, app) = set_up(&live, Duration::from_secs(600), 2).await;
    let (bad, good) = (
        Tp::new(app.input.name().clone(), 0),
        Tp::new(app.input.name().clone(), 1),
    );
    append(&client, &good, record("k", json(1), Vec::new())).await;
    append(&client, &bad, record("k", json(-1), Vec::new())).await;
    let runtime = Runtime::start(Arc::new(app.app.clone()), config(live))
        .await
        .expect("start");
    let runs = tokio::time::timeout(Duration::from_secs(60), runtime.run_until_signal())
        .await
        .expect("the instance stops without a signal once a task fails");
    let outcome = |partition: u32| {
        runs.iter()
            .find(|run| run.task.partition == partition)
            .map(|run| run.outcome.as_ref().map_err(ToString::to_string))
            .expect("both tasks ran")
    };
    assert!(
        matches!(outcome(0), Err(error) if error.contains("negative")),
        "{:?}",
        outcome(0)
    );
    assert_eq!(outcome(1), Ok(&()), "the sibling stops gracefully");
    let logs = support::captured_logs();
    let ours: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains(app.app.id()))
        .collect();
    let has = |level: &str, message: &str, task: &str| {
        ours.iter().any(|line| {
            line.contains(level) && line.contains(message) && line.contains(&format!("task={task}"))
        })
    };
    assert!(has("INFO", "task started", "sum/0"), "{ours:#?}");
    assert!(has("INFO", "task started", "sum/1"), "{ours:#?}");
    assert!(
        has("ERROR", "task stopped on an error", "sum/0"),
        "{ours:#?}"
    );
    assert!(
        ours.iter()
            .any(|line| line.contains("ERROR") && line.contains("negative")),
        "{ours:#?}"
    );
    assert!(has("INFO", "task stopped gracefully", "sum/1"), "{ours:#?}");
}

/// With `KeepOthersRunning`, the failed task is reported the moment it
/// stops and its sibling keeps delivering.
#[tokio::test(flavor = "multi_thread")]
async fn keep_others_running_reports_the_failure_and_runs_on() {
    let Some(live) = live_config() else { return };
    let (client, app) = set_up(&live, Duration::from_secs(600), 2).await;
    let (bad, good) = (
        Tp::new(app.input.name().clone(), 0),
        Tp::new(app.input.name().clone(), 1),
    );
    append(&client, &bad, record("k", json(-1), Vec::new())).await;
    let runtime = Runtime::start(
        Arc::new(app.app.clone()),
        config(live).with_failure_policy(FailurePolicy::KeepOthersRunning),
    )
    .await
    .expect("start");
    let deadline = Instant::now() + Duration::from_secs(60);
    let failed = loop {
        let ended = runtime.take_ended();
        if let Some(end) = ended.into_iter().find(|end| end.task.partition == 0) {
            break end;
        }
        assert!(Instant::now() < deadline, "the bad task never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        matches!(&failed.how, TaskEndKind::Failed(error) if error.contains("negative")),
        "{failed:?}"
    );
    assert!(!runtime.finished(), "the sibling still runs");
    append(&client, &good, record("k", json(5), Vec::new())).await;
    // The total goes to the partition its key hashes to, in either topic
    // partition.
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let mut seen = Vec::new();
        for partition in 0..2 {
            let totals = Tp::new(app.totals.name().clone(), partition);
            seen.extend(read(&client, &totals, Isolation::ReadCommitted).await);
        }
        if !seen.is_empty() || Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        values(&seen),
        ["5"],
        "the sibling delivers after the failure"
    );
    runtime.stopper().stop();
    let runs = runtime.wait().await;
    assert_eq!(runs.iter().filter(|run| run.outcome.is_err()).count(), 1);
}

/// X5, seen by an operator: each record a stage's logic refuses and the
/// task dead-letters writes one warning naming the task, the record
/// (`topic-partition@offset`) and the error; a record it accepts writes
/// none.
#[tokio::test(flavor = "multi_thread")]
async fn x5_each_dead_letter_writes_one_log_line_naming_the_record() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    let client = LiveClient::new(live.clone()).expect("client");
    let Sums { app, input, .. } = sums_with(Duration::from_secs(600), true);
    create_topics(&client, &app, 1, &Default::default())
        .await
        .expect("topics");
    let tp = Tp::new(input.name().clone(), 0);
    append(&client, &tp, record("k", json(1), Vec::new())).await;
    let refused = append(&client, &tp, record("k", json(-7), Vec::new())).await;
    append(&client, &tp, record("k", json(2), Vec::new())).await;
    let runtime = Runtime::start(Arc::new(app.clone()), config(live))
        .await
        .expect("start");
    let dead_letters = Tp::new(parsley::dead_letter_topic_name(app.id(), "sum"), 0);
    wait_for(
        &client,
        &dead_letters,
        Isolation::ReadCommitted,
        "the dead letter",
        |records| !records.is_empty(),
    )
    .await;
    runtime.stopper().stop();
    runtime.wait().await;
    let logs = support::captured_logs();
    let lines: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("record dead-lettered (X5)") && line.contains(&tp.to_string()))
        .collect();
    assert_eq!(lines.len(), 1, "one line per dead letter: {lines:#?}");
    let line = lines[0];
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("task=sum/0"), "{line}");
    assert!(line.contains(&format!("{tp}@{refused}")), "{line}");
    assert!(line.contains("negative"), "{line}");
}

// ----- J10–J14 -----

/// J10–J14 on a real broker: a left foreign-key join of orders (three
/// partitions, each naming its customer, or `-` for none) with customers'
/// tiers (two partitions). Setup creates the derived subscription topic
/// with the customers' two partitions and the response topic with the
/// orders' three (J11); the three stages run as any others, and the output
/// read back as a table holds each order with its customer's latest tier,
/// through a change of customer and a tier update, with nothing stale.
#[tokio::test(flavor = "multi_thread")]
async fn j14_a_foreign_key_join_runs_live() {
    use parsley::partition_for;
    use parsley::{Utf8, I64};
    use std::collections::{BTreeMap, HashMap};

    let Some(live) = live_config() else { return };
    let orders = Topic::<String, String>::with_codecs(unique("orders"), Utf8, Utf8);
    let tiers = Topic::<String, i64>::with_codecs(unique("tiers"), Utf8, I64);
    let labelled = Topic::<String, String>::with_codecs(unique("labelled"), Utf8, Utf8);
    let join = Stage::named("labels")
        .join(parsley::Join::foreign_key(
            &orders,
            &tiers,
            |customer: &String| (customer != "-").then(|| customer.clone()),
        ))
        .left(|_, customer: &String, tier: Option<&i64>| format!("{customer}@{tier:?}"))
        .into(&labelled)
        .build();
    let (subscription, response) = (join.subscription.clone(), join.response.clone());
    let app = Parsley::named(unique("app"))
        .stages(join)
        .build()
        .expect("the join composes");
    let client = LiveClient::new(live.clone()).expect("client");
    let counts: BTreeMap<String, u32> = [
        (orders.name().as_str().to_owned(), 3),
        (tiers.name().as_str().to_owned(), 2),
    ]
    .into();
    let made = create_topics(&client, &app, 1, &counts)
        .await
        .expect("topics");
    let partitions: HashMap<String, u32> = made
        .iter()
        .map(|topic| (topic.topic.clone(), topic.partitions))
        .collect();
    assert_eq!(
        partitions[subscription.as_str()],
        2,
        "J11: the right table's count"
    );
    assert_eq!(
        partitions[response.as_str()],
        3,
        "J11: the left table's count"
    );

    // Keyed as Kafka's default partitioner keys them (J11).
    let put = |topic: &TopicName, key: &str, value: Option<Bytes>| {
        let tp = Tp::new(
            topic.clone(),
            partition_for(Some(key.as_bytes()), partitions[topic.as_str()], 0),
        );
        let data = RecordData {
            key: Some(Bytes::from(key.to_owned())),
            value,
            headers: Vec::new(),
            timestamp: now_ms(),
        };
        let client = client.clone();
        async move { append(&client, &tp, data).await }
    };
    let tier = |value: i64| Some(Bytes::copy_from_slice(&value.to_be_bytes()));
    let text = |value: &str| Some(Bytes::from(value.to_owned()));
    put(tiers.name(), "ada", tier(1)).await;
    put(tiers.name(), "bob", tier(2)).await;
    put(orders.name(), "o1", text("ada")).await;
    put(orders.name(), "o2", text("bob")).await;
    put(orders.name(), "o3", text("-")).await;

    let runtime = Runtime::start(Arc::new(app), config(live.clone()))
        .await
        .expect("start");
    let out: Vec<Tp> = (0..partitions[labelled.name().as_str()])
        .map(|partition| Tp::new(labelled.name().clone(), partition))
        .collect();
    let table = || async {
        let mut table = BTreeMap::new();
        for tp in &out {
            for record in read(&client, tp, Isolation::ReadCommitted).await {
                let key = String::from_utf8_lossy(record.data.key.as_deref().unwrap_or_default())
                    .into_owned();
                let value = record
                    .data
                    .value
                    .as_deref()
                    .map(|value| String::from_utf8_lossy(value).into_owned());
                table.insert(key, value);
            }
        }
        table
    };
    let wait_table = |expected: BTreeMap<String, Option<String>>| async move {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = table().await;
            if seen == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the join's output as a table: {seen:?}, expected {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let row = |key: &str, value: &str| (key.to_owned(), Some(value.to_owned()));
    wait_table(
        [
            row("o1", "ada@Some(1)"),
            row("o2", "bob@Some(2)"),
            row("o3", "-@None"),
        ]
        .into(),
    )
    .await;

    // o1 moves to bob, then bob's tier changes: o1 and o2 follow it.
    put(orders.name(), "o1", text("bob")).await;
    put(tiers.name(), "bob", tier(3)).await;
    wait_table(
        [
            row("o1", "bob@Some(3)"),
            row("o2", "bob@Some(3)"),
            row("o3", "-@None"),
        ]
        .into(),
    )
    .await;
    runtime.stopper().stop();
    for run in runtime.wait().await {
        assert!(run.outcome.is_ok(), "{}: {:?}", run.task, run.outcome);
    }
}
