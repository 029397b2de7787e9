//! Local state stores against a real broker: a restart restores only the
//! changelog after the store's checkpoint, and a store that cannot be
//! trusted is rebuilt from the whole changelog with one log line saying
//! why; either way the state is the committed one.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parsley::{App, ConsumedRecord, Json, Parsley, RecordData, Stage, Step, Topic, Tp};
use parsley_live::{create_topics, Isolation, LiveClient, LiveConfig, Runtime, RuntimeConfig};

use support::{live_config, now_ms, unique};

/// Sums values per key into `totals`, emitting each new total.
struct Sums {
    app: App,
    input: Tp,
    totals: Tp,
}

fn sums() -> Sums {
    let input: Topic<String, i64> = Topic::new(unique("in"));
    let totals: Topic<String, i64> = Topic::new(unique("totals"));
    let emit = totals.clone();
    let stage = Stage::named("sum")
        .state(Json, || 0i64)
        .on(&input, move |sum: i64, record| {
            let total = sum + record.value();
            Ok::<_, String>(Step::of(total).emit(emit.send(record.key().cloned(), total)))
        })
        .into(&totals)
        .build();
    let app = Parsley::named(unique("app"))
        .stage(stage)
        .build()
        .expect("the test app composes");
    Sums {
        app,
        input: Tp::new(input.name().clone(), 0),
        totals: Tp::new(totals.name().clone(), 0),
    }
}

fn record(key: &str, value: i64) -> RecordData {
    RecordData {
        key: Some(Bytes::from(format!("\"{key}\""))),
        value: Some(Bytes::from(value.to_string())),
        headers: Vec::new(),
        timestamp: now_ms(),
    }
}

/// A state directory of the test's own.
fn state_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(unique("state"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn config(live: LiveConfig, state_dir: &Path) -> RuntimeConfig {
    RuntimeConfig::new(live)
        .with_commit_interval(Duration::from_millis(100))
        .with_state_dir(state_dir)
}

async fn append(client: &LiveClient, tp: &Tp, data: RecordData) {
    client
        .plain_producer()
        .expect("producer")
        .append(tp, &data)
        .await
        .expect("append");
}

/// Waits for `count` committed totals, or panics with the app's log.
async fn totals(client: &LiveClient, sums: &Sums, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut consumer = client
            .consumer(&unique("reader"), Isolation::ReadCommitted)
            .expect("consumer");
        let records: Vec<ConsumedRecord> = consumer
            .fetch(&sums.totals, 0)
            .await
            .expect("fetch")
            .records;
        if records.len() >= count {
            return records
                .iter()
                .map(|record| {
                    String::from_utf8_lossy(record.data.value.as_deref().unwrap_or_default())
                        .into_owned()
                })
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {count} totals; the log:\n{}",
            log_of(sums.app.id())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn log_of(app: &str) -> String {
    support::captured_logs()
        .lines()
        .filter(|line| line.contains(app))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines of `app`'s log that say how its task restored its state.
fn restores(app: &str) -> Vec<String> {
    log_of(app)
        .lines()
        .filter(|line| line.contains("state restored"))
        .map(str::to_owned)
        .collect()
}

/// Runs an instance of `sums` until `count` totals have committed, then
/// stops it gracefully.
async fn run_until(
    client: &LiveClient,
    sums: &Sums,
    config: RuntimeConfig,
    count: usize,
) -> Vec<String> {
    let runtime = Runtime::start(Arc::new(sums.app.clone()), config)
        .await
        .expect("start");
    let seen = totals(client, sums, count).await;
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop");
    }
    seen
}

/// Three keys through a first run; the task's checkpoint then covers the
/// changelog's end. Returns the task's state directory.
async fn first_run(live: &LiveConfig, sums: &Sums, dir: &Path) -> (LiveClient, PathBuf) {
    let client = LiveClient::new(live.clone()).expect("client");
    create_topics(&client, &sums.app, 1, &Default::default())
        .await
        .expect("topics");
    for (key, value) in [("a", 1), ("b", 2), ("a", 3), ("c", 4)] {
        append(&client, &sums.input, record(key, value)).await;
    }
    let seen = run_until(&client, sums, config(live.clone(), dir), 4).await;
    assert_eq!(seen, ["1", "2", "4", "4"]);
    let task_dir = dir.join(sums.app.id()).join("sum-0");
    let checkpoint = std::fs::read_to_string(task_dir.join("checkpoint"))
        .unwrap_or_else(|error| panic!("no checkpoint in {}: {error}", task_dir.display()));
    assert!(
        checkpoint.contains("\noffset ") && !checkpoint.contains("\noffset 0\n"),
        "a checkpoint past the first run's changes:\n{checkpoint}"
    );
    (client, task_dir)
}

/// A restart after a graceful stop loads the slots from the local store
/// and reads nothing of the changelog but the record that checks it.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_restores_from_the_local_store_not_the_changelog() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    let sums = sums();
    let dir = state_dir();
    let (client, _) = first_run(&live, &sums, &dir).await;
    append(&client, &sums.input, record("a", 10)).await;
    let seen = run_until(&client, &sums, config(live, &dir), 5).await;
    assert_eq!(seen, ["1", "2", "4", "4", "14"]);
    let restores = restores(sums.app.id());
    assert_eq!(restores.len(), 2, "{restores:?}");
    let second = &restores[1];
    assert!(
        second.contains("from_store=3")
            && second.contains("from_changelog=0")
            && second.contains("rebuilt=false"),
        "the second start restored from the store: {second}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A checkpoint that was torn or edited is not trusted: the store is
/// cleared and rebuilt from the whole changelog, with one line saying why,
/// and the state is the committed one.
#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_checkpoint_rebuilds_the_store_from_the_changelog() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    let sums = sums();
    let dir = state_dir();
    let (client, task_dir) = first_run(&live, &sums, &dir).await;
    let checkpoint = std::fs::read_to_string(task_dir.join("checkpoint")).unwrap();
    std::fs::write(
        task_dir.join("checkpoint"),
        checkpoint.replace("offset", "offsat"),
    )
    .unwrap();
    append(&client, &sums.input, record("a", 10)).await;
    let seen = run_until(&client, &sums, config(live.clone(), &dir), 5).await;
    assert_eq!(seen, ["1", "2", "4", "4", "14"]);
    let log = log_of(sums.app.id());
    let cleared: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("local state store cleared"))
        .collect();
    assert_eq!(cleared.len(), 1, "{log}");
    assert!(cleared[0].contains("corrupt"), "{}", cleared[0]);
    let restores = restores(sums.app.id());
    assert!(restores[1].contains("rebuilt=true"), "{}", restores[1]);
    // Rebuilt, the store is trusted again at the next start.
    append(&client, &sums.input, record("c", 1)).await;
    let seen = run_until(&client, &sums, config(live, &dir), 6).await;
    assert_eq!(seen.last().map(String::as_str), Some("5"));
    let restores = self::restores(sums.app.id());
    assert!(
        restores[2].contains("rebuilt=false") && restores[2].contains("from_changelog=0"),
        "{}",
        restores[2]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The restart a local store saves, measured (run by hand:
/// `cargo test -p parsley-live --features mutations --test live_state --
/// --ignored --nocapture`): a task with `PARSLEY_RESTART_KEYS` keys
/// (default 100,000) restarts from its store, then from an empty state
/// directory (the whole changelog), each timed from `Runtime::start` until
/// every task runs.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement: run by hand"]
async fn restart_time_with_and_without_the_local_store() {
    let Some(live) = live_config() else { return };
    support::captured_logs();
    let keys: usize = std::env::var("PARSLEY_RESTART_KEYS")
        .ok()
        .and_then(|keys| keys.parse().ok())
        .unwrap_or(100_000);
    let sums = sums();
    let dir = state_dir();
    let client = LiveClient::new(live.clone()).expect("client");
    create_topics(&client, &sums.app, 1, &Default::default())
        .await
        .expect("topics");
    let producer = client.plain_producer().expect("producer");
    let mut deliveries = Vec::with_capacity(keys);
    for key in 0..keys {
        let data = record(&format!("key-{key:08}"), 1);
        deliveries.push(producer.enqueue(&sums.input, &data).expect("enqueue"));
    }
    for delivery in deliveries {
        delivery.wait().await.expect("delivered");
    }
    let group = sums.app.group_of("sum").expect("a sum stage").to_owned();
    let runtime = Runtime::start(Arc::new(sums.app.clone()), config(live.clone(), &dir))
        .await
        .expect("start");
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let committed = client
            .consumer(&group, Isolation::ReadCommitted)
            .expect("consumer")
            .committed(std::slice::from_ref(&sums.input))
            .await
            .expect("committed offsets");
        if committed[0].as_ref().map(|c| c.offset) == Some(keys as u64) {
            break;
        }
        assert!(Instant::now() < deadline, "the first run did not finish");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    runtime.stopper().stop();
    runtime.wait().await;
    let timed = |dir: PathBuf| {
        let (app, live) = (sums.app.clone(), live.clone());
        async move {
            let started = Instant::now();
            let runtime = Runtime::start(Arc::new(app), config(live, &dir))
                .await
                .expect("restart");
            while runtime.health().ready().is_err() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let took = started.elapsed();
            runtime.stopper().stop();
            runtime.wait().await;
            took
        }
    };
    let with_store = timed(dir.clone()).await;
    let empty = state_dir();
    let without_store = timed(empty.clone()).await;
    let again = timed(dir.clone()).await;
    println!(
        "{keys} keys: restart from the local store {with_store:?} and {again:?}, from the whole changelog {without_store:?}"
    );
    for line in restores(sums.app.id()) {
        println!("{line}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&empty).unwrap();
}
