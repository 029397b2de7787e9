//! The broker restarts under a running application: the broker
//! started by `scripts/kafka/broker.sh` is stopped and started again on its
//! storage (`broker.sh bounce`) while an instance runs balances. The instance
//! rides it out — its clients reconnect, a transaction caught by the outage
//! aborts and is retried, a call librdkafka does not return from is
//! abandoned at the runtime's deadline and its task restarts with fresh
//! clients — and afterwards every output and changelog is read back and
//! checked, as after kill -9.
//!
//! It takes the broker away from every other test, so CI runs it on its own,
//! after the other live tests.

#![cfg(feature = "live")]

use crate::live_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use live_common::{set_up, terminate, PATIENCE};
use parsley::{Codec, I64};
use parsley_examples::{SessionTopics, TopologyName};
use parsley_live::{
    read_committed, test_broker, wait_caught_up, LiveClient, LiveConfig, ReadBack, Runtime,
    RuntimeConfig,
};

/// One bounce at a time: the tests of this file share the broker.
static BROKER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The test's own clients (set-up, input, read-back) wait out a restart as
/// slow as a loaded machine makes it (40 s has been seen), and a test starts
/// only once the broker is up, even after another failed mid-bounce. The
/// application's deadlines are its own (`start_in_process`, the command).
async fn broker_up(config: LiveConfig) -> LiveConfig {
    let config = config.with_timeout(PATIENCE);
    let started = Instant::now();
    loop {
        match LiveClient::new(config.clone()) {
            Ok(_) => return config,
            Err(_) if started.elapsed() < PATIENCE => {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(error) => panic!("the broker is not up within {PATIENCE:?}: {error}"),
        }
    }
}

fn bounce_broker() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka/broker.sh");
    let status = Command::new("bash")
        .arg(script)
        .arg("bounce")
        .status()
        .expect("run broker.sh bounce");
    assert!(status.success(), "broker.sh bounce failed: {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn broker_restart_mid_run_loses_and_repeats_nothing() {
    let Some(config) = test_broker() else { return };
    let _alone = BROKER.lock().await;
    let config = broker_up(config).await;
    let live = set_up(&config, TopologyName::Balances, "bounce", 4).await;
    let mut plan = live.produce(800, 11).await;
    let mut instance = live.command("0/1").spawn().expect("spawn parsley-live");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    bounce_broker();
    plan.extend(live.produce(800, 12).await);
    live.wait_caught_up().await;
    assert!(
        instance.try_wait().expect("status").is_none(),
        "the instance survived the restart"
    );
    terminate(&mut instance);
    let read = live.read_and_audit().await;
    live.assert_state_is_the_fold(&read, &plan);
}

/// Issue 13's wedge: the broker bounces *while input keeps flowing*, with
/// the instance in this process. No task may end (a transient failure
/// restarts the task inside the instance, never the process), lag must
/// return to zero within a bound once the broker is back and the input
/// stops, and what was committed must audit clean and fold to the inputs.
#[tokio::test(flavor = "multi_thread")]
async fn broker_bounce_under_flowing_input_recovers_without_a_process_restart() {
    let Some(config) = test_broker() else { return };
    let _alone = BROKER.lock().await;
    let config = broker_up(config).await;
    // The runtime's log on stderr: what the tasks did about the outage.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("parsley_live=info")
        .with_writer(std::io::stderr)
        .try_init();
    let live = set_up(&config, TopologyName::Balances, "bounce-flow", 4).await;
    let runtime = start_in_process(&live).await;

    let flowing = AtomicBool::new(true);
    let flow = async {
        let mut plan = Vec::new();
        let mut seed = 100;
        while flowing.load(Ordering::Relaxed) {
            // Blocks through the outage: the plain producer buffers and
            // retries until the broker is back.
            plan.extend(live.produce(25, seed).await);
            seed += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        plan
    };
    let bounce = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        tokio::task::spawn_blocking(bounce_broker)
            .await
            .expect("bounce");
        let back = Instant::now();
        tokio::time::sleep(Duration::from_secs(5)).await;
        flowing.store(false, Ordering::Relaxed);
        back
    };
    let (plan, back) = tokio::join!(flow, bounce);
    assert!(plan.len() > 100, "input flowed: {} records", plan.len());

    let bound = Duration::from_secs(120);
    let left = bound.saturating_sub(back.elapsed());
    let caught_up = wait_caught_up(&live.client, &live.topology.app, &live.assembly, left)
        .await
        .expect("progress");
    assert!(
        caught_up,
        "lag did not return to 0 within {bound:?} of the broker being back"
    );
    eprintln!(
        "caught up {:.1}s after the broker was back",
        back.elapsed().as_secs_f64()
    );
    let ended = runtime.take_ended();
    assert!(
        ended.is_empty() && !runtime.finished(),
        "no task may end on a broker restart: {ended:?}"
    );
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop after the bounce");
    }
    let read = live.read_and_audit().await;
    live.assert_state_is_the_fold(&read, &plan);
}

/// The application's instance in this process, with deadlines short
/// enough for a bounce and a commit every 100 ms.
async fn start_in_process(live: &live_common::Live) -> Runtime {
    Runtime::start(
        Arc::new(live.topology.app.clone()),
        RuntimeConfig::new(
            live.client
                .config()
                .clone()
                .with_timeout(Duration::from_secs(10))
                .with_transaction_timeout(Duration::from_secs(30)),
        )
        .with_commit_interval(Duration::from_millis(100)),
    )
    .await
    .expect("start")
}

/// K2 through a broker bounce: the sessions example (its timer service a
/// stage of the application) with clicks flowing while the broker restarts.
/// Afterwards, read back from the committed topics: every timer request
/// fired exactly once and never before its time, every click is in exactly
/// one closed session, lag is zero and the audit is clean; no task ended.
#[tokio::test(flavor = "multi_thread")]
async fn k2_broker_bounce_under_flowing_clicks_fires_every_timer_once() {
    let Some(config) = test_broker() else { return };
    let _alone = BROKER.lock().await;
    let config = broker_up(config).await;
    let live = set_up(&config, TopologyName::Sessions, "bounce-timers", 2).await;
    let runtime = start_in_process(&live).await;
    let flowing = AtomicBool::new(true);
    let flow = async {
        let mut plan = Vec::new();
        let mut seed = 300;
        // Flowing through the bounce, and on until enough clicks went in,
        // however slow a busy machine makes each batch.
        while flowing.load(Ordering::Relaxed) || plan.len() < 200 {
            plan.extend(live.produce(20, seed).await);
            seed += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        plan
    };
    let bounce = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        tokio::task::spawn_blocking(bounce_broker)
            .await
            .expect("bounce");
        tokio::time::sleep(Duration::from_secs(4)).await;
        flowing.store(false, Ordering::Relaxed);
    };
    let (plan, ()) = tokio::join!(flow, bounce);
    assert!(plan.len() > 100, "input flowed: {} records", plan.len());
    let topics = SessionTopics::with_prefix(&live.namespace);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let read = read_committed(&live.client, &live.topology.app, &live.assembly)
            .await
            .expect("read back");
        let (unfired, problems) = timers_fired_once(&read, &topics);
        assert!(problems.is_empty(), "{problems:#?}");
        if unfired == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{unfired} timer requests not fired 120 s after the bounce"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let caught_up = wait_caught_up(
        &live.client,
        &live.topology.app,
        &live.assembly,
        Duration::from_secs(60),
    )
    .await
    .expect("progress");
    assert!(caught_up, "lag did not return to 0");
    let ended = runtime.take_ended();
    assert!(
        ended.is_empty() && !runtime.finished(),
        "no task may end on a broker restart: {ended:?}"
    );
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop after the bounce");
    }
    let read = live.read_and_audit().await;
    let (unfired, problems) = timers_fired_once(&read, &topics);
    assert!(problems.is_empty() && unfired == 0, "{problems:#?}");
    let mut open: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for (_, click) in read.topic(topics.clicks.name().as_str()) {
        *open
            .entry(click.data.key.as_deref().unwrap_or_default().to_vec())
            .or_default() += 1;
    }
    for (_, summary) in read.topic(topics.summaries.name().as_str()) {
        let clicks = Codec::<i64>::decode(&I64, summary.data.value.as_deref().unwrap_or_default())
            .expect("a count");
        *open
            .entry(summary.data.key.as_deref().unwrap_or_default().to_vec())
            .or_default() -= clicks;
    }
    open.retain(|_, left| *left != 0);
    assert!(
        open.is_empty(),
        "clicks in no closed session, by user: {open:?}"
    );
}

/// How many committed timer requests have no committed fire, and what is
/// wrong with the fires: one a request did not ask for (or a second), or one
/// before its time.
fn timers_fired_once(read: &ReadBack, topics: &SessionTopics) -> (usize, Vec<String>) {
    let time = |value: Option<&[u8]>| {
        Codec::<i64>::decode(&I64, value.unwrap_or_default()).expect("a time")
    };
    let mut asked: BTreeMap<(Vec<u8>, i64), usize> = BTreeMap::new();
    for (_, request) in read.topic(topics.requests.name().as_str()) {
        let key = request.data.key.as_deref().unwrap_or_default().to_vec();
        *asked
            .entry((key, time(request.data.value.as_deref())))
            .or_default() += 1;
    }
    let mut problems = Vec::new();
    for (tp, fire) in read.topic(topics.fires.name().as_str()) {
        let key = fire.data.key.as_deref().unwrap_or_default().to_vec();
        let at = time(fire.data.value.as_deref());
        if fire.data.timestamp < at {
            problems.push(format!("{tp}@{} fired before its time", fire.offset));
        }
        match asked.get_mut(&(key, at)) {
            Some(left) if *left > 0 => *left -= 1,
            _ => problems.push(format!(
                "{tp}@{} was not asked for, or fired twice",
                fire.offset
            )),
        }
    }
    (asked.values().sum(), problems)
}
