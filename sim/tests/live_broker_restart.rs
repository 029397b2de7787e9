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

mod live_common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use live_common::{set_up, terminate};
use parsley_live::wait_caught_up;
use parsley_live::{test_broker, Runtime, RuntimeConfig};
use parsley_sim::topologies::TopologyName;

/// One bounce at a time: the tests of this file share the broker.
static BROKER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn bounce_broker() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka/broker.sh");
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
    // The runtime's log on stderr: what the tasks did about the outage.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("parsley_live=info")
        .with_writer(std::io::stderr)
        .try_init();
    let live = set_up(&config, TopologyName::Balances, "bounce-flow", 4).await;
    let runtime = Runtime::start(
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
    .expect("start");

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
