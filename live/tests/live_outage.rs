//! Group mode through a long outage of the whole cluster (issue 21, item
//! 1): two instances in one group, input flowing, and the broker stopped
//! for 120 s, or frozen with SIGSTOP for 75 s, both past the group's
//! session timeout. Every task is released when the session expires,
//! without failing; when the broker is back the group forms again and
//! every task runs, with no instance stopping (no task ends on a failure,
//! which is what would end a process under the default failure policy);
//! lag returns to 0 within 30 s of the return, and an independent
//! read-back finds every input in exactly one total (nothing lost, nothing
//! twice) and audits clean.
//!
//! They take the broker away from every other test: they are `#[ignore]`d,
//! and CI runs them last and alone (`--ignored --test-threads=1`). They
//! drive the broker `KAFKA_BOOTSTRAP_SERVERS` names through
//! `scripts/kafka/broker.sh` (its port from that address; its state
//! directory from `PARSLEY_KAFKA_HOME`, if set).

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parsley::{RecordData, Topic, Tp};
use parsley_live::{
    assemble_on, create_topics, read_committed, wait_caught_up, GroupMembership, LiveClient,
    Runtime, RuntimeConfig, TaskEnd, TaskEndKind, BOOTSTRAP_ENV,
};

use support::{live_config, now_ms, summing, unique};

const PARTITIONS: u32 = 4;
const KEYS: usize = 8;

fn broker(command: &str) {
    let bootstrap = std::env::var(BOOTSTRAP_ENV).expect("the broker's address");
    let port = bootstrap.rsplit(':').next().expect("host:port").to_owned();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka/broker.sh");
    let status = Command::new("bash")
        .arg(script)
        .arg(command)
        .arg("--port")
        .arg(&port)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run broker.sh");
    assert!(status.success(), "broker.sh {command} failed: {status}");
}

/// Brings the broker back (`up` or `resume`) when dropped while armed.
struct BrokerBack(Option<&'static str>);

impl Drop for BrokerBack {
    fn drop(&mut self) {
        if let Some(command) = self.0.take() {
            broker(command);
        }
    }
}

fn one(key: &str) -> RecordData {
    RecordData {
        key: Some(Bytes::from(format!("\"{key}\""))),
        value: Some(Bytes::from("1")),
        headers: Vec::new(),
        timestamp: now_ms(),
    }
}

enum Outage {
    /// `broker.sh down`, then `up` on the same storage.
    Down(Duration),
    /// `broker.sh pause` (SIGSTOP), then `resume` (SIGCONT).
    Frozen(Duration),
}

async fn rides_out(outage: Outage) {
    let Some(live) = live_config() else { return };
    let _ = tracing_subscriber::fmt()
        .with_env_filter("parsley_live=info,librdkafka=warn")
        .with_writer(std::io::stderr)
        .try_init();
    let client = LiveClient::new(live.clone()).expect("client");
    let (input, output) = (Topic::new(unique("in")), Topic::new(unique("totals")));
    let app = Arc::new(summing(&unique("app"), "sum", &input, &output));
    create_topics(&client, &app, PARTITIONS, &Default::default())
        .await
        .expect("topics");
    let assembly = assemble_on(&client, &app).await.expect("assembles");
    // What `parsley-live run` gives an instance, but a shorter commit
    // interval: default call timeouts, a 10 s session.
    let config = RuntimeConfig::new(live.clone())
        .with_commit_interval(Duration::from_millis(100))
        .with_group(GroupMembership::default());
    let mut instances = Vec::new();
    for _ in 0..2 {
        instances.push(
            Runtime::start(Arc::clone(&app), config.clone())
                .await
                .expect("start"),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while instances
        .iter()
        .map(|runtime| runtime.tasks().len())
        .sum::<usize>()
        != PARTITIONS as usize
        || instances.iter().any(|runtime| runtime.tasks().is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "the group did not deal the tasks"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let flowing = AtomicBool::new(true);
    let watching = AtomicBool::new(true);
    // The inputs' own producer rides out the outage as a client outside
    // the application would: each record may take five minutes to land.
    let producer =
        parsley_live::PlainProducer::new(&live.clone().with_timeout(Duration::from_secs(300)))
            .expect("producer");
    let flow = async {
        let mut sent = [0u64; KEYS];
        while flowing.load(Ordering::Relaxed) {
            let mut queued = Vec::new();
            for (key, count) in sent.iter_mut().enumerate() {
                let tp = Tp::new(input.name().clone(), (key as u32) % PARTITIONS);
                queued.push(
                    producer
                        .enqueue(&tp, &one(&format!("k{key}")))
                        .expect("enqueue"),
                );
                *count += 1;
            }
            // Blocks through the outage: the idempotent producer buffers
            // and retries until the broker is back.
            for delivery in queued {
                delivery.wait().await.expect("every input is appended");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sent
    };
    let mut ends: Vec<TaskEnd> = Vec::new();
    // The instances' states as an operator's probes see them: never
    // ERROR (`/health` answers 200 throughout), and REBALANCING while the
    // group cannot form.
    let watch = async {
        let (mut seen, mut states, mut unhealthy) = (Vec::new(), Vec::new(), Vec::new());
        while watching.load(Ordering::Relaxed) {
            for runtime in &instances {
                seen.extend(runtime.take_ended());
                let health = runtime.health();
                if let Err(why) = health.health() {
                    unhealthy.push(why.to_string());
                }
                let state = health.state();
                if states.last() != Some(&state) {
                    states.push(state);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (seen, states, unhealthy)
    };
    let (stop_cmd, start_cmd, length) = match outage {
        Outage::Down(length) => ("down", "up", length),
        Outage::Frozen(length) => ("pause", "resume", length),
    };
    let drive = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        tokio::task::spawn_blocking(move || broker(stop_cmd))
            .await
            .expect("outage");
        // Should the test fail while the broker is away, it comes back for
        // the tests after this one.
        let mut comeback = BrokerBack(Some(start_cmd));
        let went = Instant::now();
        eprintln!("broker {stop_cmd}: away for {length:?}");
        tokio::time::sleep(length).await;
        comeback.0 = None;
        tokio::task::spawn_blocking(move || broker(start_cmd))
            .await
            .expect("return");
        let back = Instant::now();
        eprintln!(
            "broker {start_cmd}: back after {:.1}s",
            went.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        flowing.store(false, Ordering::Relaxed);
        back
    };
    let caught = async {
        let (sent, back) = tokio::join!(flow, drive);
        let bound = Duration::from_secs(30);
        let caught_up = wait_caught_up(&client, &app, &assembly, Duration::from_secs(120))
            .await
            .expect("progress");
        let took = back.elapsed();
        watching.store(false, Ordering::Relaxed);
        (sent, caught_up, took, bound)
    };
    let ((sent, caught_up, took, bound), (seen, states, unhealthy)) = tokio::join!(caught, watch);
    ends.extend(seen);
    eprintln!("instance states seen: {states:?}");
    assert!(
        unhealthy.is_empty(),
        "an outage is no ERROR: /health failed with {unhealthy:?}"
    );
    assert!(
        states.contains(&parsley_live::InstanceState::Rebalancing),
        "the instances were REBALANCING while the group could not form: {states:?}"
    );
    for runtime in &instances {
        ends.extend(runtime.take_ended());
    }
    let inputs: u64 = sent.iter().sum();
    eprintln!(
        "{inputs} inputs; lag 0 {:.1}s after the broker was back; task ends: {ends:?}",
        took.as_secs_f64()
    );
    assert!(inputs > 100, "input flowed: {inputs}");
    assert!(caught_up, "lag did not return to 0");
    assert!(
        took <= bound,
        "lag returned to 0 only {:.1}s after the broker was back (bound {bound:?})",
        took.as_secs_f64()
    );
    // Lag 0 can come while the group still re-forms (a task whose partition
    // had nothing new may be between owners): every task must run again
    // within a bound, on one instance or the other, and both instances must
    // be back in the group and ready. A join lost to the frozen broker
    // times out after the rebalance timeout (a revoked task's final commit,
    // 92 s with the default call timeout, plus 10 s), or is retried with a
    // fresh consumer once the cluster has answered for that and a session
    // (112 s); the rebalance that follows moves tasks off the other
    // instance, each with its final commit (up to the 46 s deadline). So
    // the bound is 210 s: that worst case and a minute's margin, on a
    // machine whose cores the broker shares.
    const REJOIN_BOUND: Duration = Duration::from_secs(210);
    let rejoined = Instant::now();
    loop {
        let running: usize = instances
            .iter()
            .map(|runtime| {
                assert!(!runtime.finished(), "an instance stopped");
                runtime.tasks().len()
            })
            .sum();
        let ready = instances
            .iter()
            .all(|runtime| runtime.health().ready().is_ok());
        if running == PARTITIONS as usize && ready {
            break;
        }
        if rejoined.elapsed() >= REJOIN_BOUND {
            let group = parsley_live::membership_topic(app.id());
            let members = client.group_members(&group).await;
            eprintln!("members of {group}: {members:?}");
        }
        assert!(
            rejoined.elapsed() < REJOIN_BOUND,
            "every task runs again and both instances are ready: {running} of {PARTITIONS} run {REJOIN_BOUND:?} after lag 0; {:?}",
            instances
                .iter()
                .map(|runtime| runtime.health().ready())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for runtime in &instances {
        ends.extend(runtime.take_ended());
    }
    let failed: Vec<&TaskEnd> = ends
        .iter()
        .filter(|end| matches!(end.how, TaskEndKind::Failed(_)))
        .collect();
    assert!(
        failed.is_empty(),
        "no task may fail on an outage or while the group re-forms (each would stop its instance): {failed:?}"
    );

    support::stop_all(instances).await;

    // Read back on its own: each key's totals are 1, 2, …, n for its n
    // inputs (every input counted once, in order), and the audit is clean.
    let read = read_committed(&client, &app, &assembly)
        .await
        .expect("read back");
    let mut totals: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (_, record) in read.topic(output.name().as_str()) {
        let key = String::from_utf8_lossy(record.data.key.as_deref().unwrap_or_default())
            .trim_matches('"')
            .to_owned();
        let total: i64 = String::from_utf8_lossy(record.data.value.as_deref().unwrap_or_default())
            .parse()
            .expect("a total");
        totals.entry(key).or_default().push(total);
    }
    for (key, count) in sent.iter().enumerate() {
        let want: Vec<i64> = (1..=*count as i64).collect();
        let got = totals.remove(&format!("k{key}")).unwrap_or_default();
        assert!(
            got == want,
            "k{key}: {count} inputs, {} totals, first difference at {:?}",
            got.len(),
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
    }
    assert!(totals.is_empty(), "totals of keys never sent: {totals:?}");
    let report = parsley::audit::audit(&app, &assembly, &read.to_logs());
    assert!(report.is_clean(), "{report}");
    eprintln!("read back exact, audit clean: {report}");
}

/// The broker stopped for 120 s (past the 10 s session and the 60 s
/// transaction timeout) under flowing input, then started on its storage.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "stops the broker for 120 s: CI runs it last and alone"]
async fn group_mode_rides_out_the_broker_down_for_120_s() {
    rides_out(Outage::Down(Duration::from_secs(120))).await;
}

/// The broker frozen with SIGSTOP for 75 s under flowing input: its
/// connections stay open and nothing answers.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "freezes the broker for 75 s: CI runs it last and alone"]
async fn group_mode_rides_out_the_broker_frozen_for_75_s() {
    rides_out(Outage::Frozen(Duration::from_secs(75))).await;
}

/// Start-up retries what Kafka says to retry (issue 29, item 2): right
/// after the broker starts, its coordinators load for a while and answer
/// `COORDINATOR_LOAD_IN_PROGRESS`; three instances started in that second
/// all start, share the tasks, and none exits.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "restarts the broker: CI runs it last and alone"]
async fn instances_started_as_the_broker_comes_back_all_start() {
    let Some(live) = live_config() else { return };
    let _ = tracing_subscriber::fmt()
        .with_env_filter("parsley_live=info,librdkafka=warn")
        .with_writer(std::io::stderr)
        .try_init();
    let client = LiveClient::new(live.clone()).expect("client");
    let (input, output) = (Topic::new(unique("in")), Topic::new(unique("totals")));
    let app = Arc::new(summing(&unique("app"), "sum", &input, &output));
    create_topics(&client, &app, PARTITIONS, &Default::default())
        .await
        .expect("topics");
    drop(client);
    tokio::task::spawn_blocking(|| broker("down"))
        .await
        .expect("down");
    let mut comeback = BrokerBack(Some("up"));
    tokio::task::spawn_blocking(|| broker("up"))
        .await
        .expect("up");
    comeback.0 = None;
    let config = RuntimeConfig::new(live.clone())
        .with_commit_interval(Duration::from_millis(100))
        .with_group(GroupMembership::default());
    support::three_instances_all_run(app, config, PARTITIONS as usize, Duration::from_secs(120))
        .await;
}

/// Issue 21, defect 10: a producer (`parsley-live produce`'s) no longer
/// outlives its bound when the broker dies mid-batch. With a 3 s timeout
/// the broker is stopped while records are on their way; every delivery
/// still resolves, the undelivered ones as errors naming their tp, and the
/// last within the producer's deadline of the stop (not librdkafka's
/// default five minutes).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "stops the broker: CI runs it last and alone"]
async fn a_producer_fails_within_its_bound_when_the_broker_dies_mid_batch() {
    let Some(live) = live_config() else { return };
    let live = live.with_timeout(Duration::from_secs(3));
    let client = LiveClient::new(live.clone()).expect("client");
    let topic = unique("bounded");
    client.create_topic(&topic, 1).await.expect("topic");
    let tp = Tp::new(topic, 0);
    let producer = parsley_live::PlainProducer::new(&live).expect("producer");
    let mut deliveries = Vec::new();
    for key in 0..2_000 {
        deliveries.push(
            producer
                .enqueue(&tp, &one(&format!("k{key}")))
                .expect("enqueue"),
        );
    }
    tokio::task::spawn_blocking(|| broker("down"))
        .await
        .expect("stopped");
    let mut comeback = BrokerBack(Some("up"));
    let stopped = Instant::now();
    for key in 0..2_000 {
        if let Ok(delivery) = producer.enqueue(&tp, &one(&format!("late{key}"))) {
            deliveries.push(delivery);
        }
    }
    let (mut landed, mut failed) = (0, Vec::new());
    for delivery in deliveries {
        match delivery.wait().await {
            Ok(_) => landed += 1,
            Err(error) => failed.push(error.to_string()),
        }
    }
    let took = stopped.elapsed();
    comeback.0 = None;
    tokio::task::spawn_blocking(|| broker("up"))
        .await
        .expect("back");
    eprintln!(
        "{landed} landed, {} failed, the last {took:?} after the stop",
        failed.len()
    );
    assert!(
        !failed.is_empty(),
        "records sent after the stop cannot land"
    );
    assert!(
        failed.iter().all(|error| error.contains(&tp.to_string())),
        "each failure names its tp: {:?}",
        &failed[..failed.len().min(3)]
    );
    let bound = live.deadline() + Duration::from_secs(5);
    assert!(
        took <= bound,
        "every delivery resolved {took:?} after the broker stopped, beyond the bound {bound:?}"
    );
}
