//! The broker restarts under a running application: the broker
//! started by `scripts/kafka/broker.sh` is stopped and started again on its
//! storage (`broker.sh bounce`) while an instance runs balances. The instance
//! rides it out — its clients reconnect, a transaction caught by the outage
//! aborts and is retried — and afterwards every output and changelog is read
//! back and checked, as after kill -9.
//!
//! It takes the broker away from every other test, so CI runs it on its own,
//! after the other live tests.

#![cfg(feature = "live")]

mod live_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use live_common::{set_up, terminate};
use parsley::live::test_broker;
use parsley_sim::topologies::TopologyName;

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
