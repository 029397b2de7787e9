//! An operator's figures on a real broker, checked against the cluster:
//! `parsley-live run balances --metrics ADDR` as child processes under
//! group membership. Tasks move to a second instance and back when it is
//! killed with SIGKILL, and one task stops on a poison record; after each
//! step every figure is compared with what the cluster says:
//!
//! - the delivered counters, summed over every instance, equal the records
//!   committed on the input (a task that moved away and back adds to its
//!   counter; it does not start it again or keep the larger run's count);
//! - each task's `parsley_consumer_lag` equals the lag `status` reads from
//!   the group's committed offsets and the log ends, for a running task and
//!   for the stopped one, whose consumer no longer polls;
//! - owned tasks, instance state, task states, `/health` and `/ready`
//!   follow the moves and the failure; every figure has HELP text, and the
//!   commit latency is a histogram.

#![cfg(feature = "live")]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parsley::RecordData;
use parsley::Tp;
use parsley_examples::TopologyName;
use parsley_live::{read_committed, task_status, test_broker, Isolation};

use crate::live_common;

use live_common::{set_up, Live};

/// A port nothing listens on yet, for an instance's endpoints.
fn free_address() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}

/// `GET path` on `address`: the status code and the body; `None` while
/// nothing answers.
fn get(address: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

/// One sample of the Prometheus text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (key, value) = pair.split_once("=\"")?;
                    Some((key.to_owned(), value.trim_end_matches('"').to_owned()))
                })
                .collect();
            Some(Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().ok()?,
            })
        })
        .collect()
}

/// An instance's figures, scraped.
struct Scrape {
    text: String,
    samples: Vec<Sample>,
}

impl Scrape {
    fn of(address: SocketAddr) -> Option<Scrape> {
        let (status, text) = get(address, "/metrics")?;
        assert_eq!(status, 200, "{text}");
        let samples = parse(&text);
        Some(Scrape { text, samples })
    }

    fn values(&self, name: &str, label: &[(&str, &str)]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|sample| sample.name == name)
            .filter(|sample| {
                label
                    .iter()
                    .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(*value))
            })
            .map(|sample| sample.value)
            .collect()
    }

    fn sum(&self, name: &str) -> f64 {
        self.values(name, &[]).iter().sum()
    }

    fn one(&self, name: &str, label: &[(&str, &str)]) -> Option<f64> {
        let values = self.values(name, label);
        assert!(values.len() <= 1, "{name} {label:?}: {values:?}");
        values.first().copied()
    }

    fn state(&self) -> Option<String> {
        self.samples
            .iter()
            .find(|sample| sample.name == "parsley_instance_state" && sample.value == 1.0)
            .and_then(|sample| sample.labels.get("state").cloned())
    }
}

/// Waits until `check` holds on a fresh scrape of `address`, or panics
/// with the last scrape and `what` after `patience`.
fn wait_for(
    address: SocketAddr,
    what: &str,
    patience: Duration,
    mut check: impl FnMut(&Scrape) -> bool,
) -> Scrape {
    let until = Instant::now() + patience;
    let mut last = None;
    while Instant::now() < until {
        if let Some(scrape) = Scrape::of(address) {
            if check(&scrape) {
                return scrape;
            }
            last = Some(scrape.text);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "{what}: not within {patience:?}; last figures:\n{}",
        last.unwrap_or_default()
    );
}

/// An instance with its endpoints on `address`. Ticks are rare (every ten
/// minutes), so that a count read from one instance just before the other
/// is killed stays the count it committed.
/// An instance's process, killed if the test fails while it runs.
struct Instance(Child);

impl Drop for Instance {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn start(live: &Live, address: SocketAddr, log: &std::path::Path) -> Instance {
    Instance(
        live.group_command(log)
            .args(["--set", "tick-ms=600000"])
            .args(["--metrics", &address.to_string()])
            .args(["--on-failure", "keep-others-running"])
            .spawn()
            .expect("an instance"),
    )
}

fn task_label(stage: &str, partition: u32) -> String {
    format!("{stage}/{partition}")
}

/// Every task's lag as `status` reads it from the cluster.
async fn cluster_lags(live: &Live) -> BTreeMap<String, u64> {
    task_status(&live.client, &live.topology.app, &live.assembly)
        .await
        .expect("status")
        .iter()
        .map(|task| (task_label(&task.stage, task.partition), task.lag()))
        .collect()
}

/// The lag figures of `scrapes`' instances, per task: the owner's, or any
/// instance's where none owns it.
fn figure_lags(scrape: &Scrape) -> BTreeMap<String, u64> {
    scrape
        .samples
        .iter()
        .filter(|sample| sample.name == "parsley_consumer_lag")
        .map(|sample| (sample.labels["task"].clone(), sample.value as u64))
        .collect()
}

/// Waits until the lag figures of `address` equal the cluster's, for
/// `tasks` (the figure is refreshed every second).
async fn lags_agree(live: &Live, address: SocketAddr, tasks: &[String]) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let cluster = cluster_lags(live).await;
        let figures = Scrape::of(address).map(|scrape| figure_lags(&scrape));
        let wanted: BTreeMap<&String, Option<u64>> = tasks
            .iter()
            .map(|task| (task, cluster.get(task).copied()))
            .collect();
        let shown: BTreeMap<&String, Option<u64>> = tasks
            .iter()
            .map(|task| {
                (
                    task,
                    figures.as_ref().and_then(|lags| lags.get(task).copied()),
                )
            })
            .collect();
        if wanted == shown {
            return;
        }
        assert!(
            Instant::now() < until,
            "lag figures {shown:?} never agreed with the cluster's {wanted:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What the cluster says the tasks delivered: every committed record
/// (inputs and ticks) below each stage group's committed position on each
/// tp its tasks consume.
async fn committed_deliveries(live: &Live) -> u64 {
    let read = read_committed(&live.client, &live.topology.app, &live.assembly)
        .await
        .expect("read back");
    let mut delivered = 0;
    for plan in live.topology.app.stages() {
        let tps: Vec<Tp> = plan
            .consumed_topics()
            .into_iter()
            .flat_map(|topic| {
                let partitions = live.assembly.partitions_of(topic.as_str()).unwrap_or(0);
                (0..partitions).map(move |partition| Tp::new(topic.clone(), partition))
            })
            .collect();
        let committed = live
            .client
            .consumer(&plan.group, Isolation::ReadUncommitted)
            .expect("a consumer")
            .committed(&tps)
            .await
            .expect("committed offsets");
        for (tp, committed) in tps.iter().zip(committed) {
            let below = committed.map_or(0, |committed| committed.offset);
            delivered += read
                .topic(tp.topic.as_str())
                .into_iter()
                .filter(|(at, record)| *at == tp && record.offset < below)
                .count() as u64;
        }
    }
    delivered
}

/// Waits until `figures` (the delivered counters, summed) equal what the
/// cluster says was delivered.
async fn deliveries_agree(live: &Live, what: &str, mut figures: impl FnMut() -> f64) -> f64 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let cluster = committed_deliveries(live).await;
        let shown = figures();
        if shown == cluster as f64 {
            return shown;
        }
        assert!(
            Instant::now() < until,
            "{what}: the delivered counters sum to {shown}, the cluster's committed positions say {cluster}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn owned(scrape: &Scrape) -> f64 {
    scrape.one("parsley_owned_tasks", &[]).unwrap_or(-1.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn figures_follow_moves_kills_and_a_stopped_task_and_agree_with_the_cluster() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Balances, "metrics", 4).await;
    let logs = std::env::temp_dir().join(format!("{}logs", live.namespace));
    std::fs::create_dir_all(&logs).expect("a log directory");
    let tasks: Vec<String> = (0..4).map(|p| task_label("balances", p)).collect();
    live.produce(400, 1).await;

    // One instance: it owns every task, runs them, and is ready.
    let first_address = free_address();
    let mut first = start(&live, first_address, &logs.join("first.log"));
    let scrape = wait_for(
        first_address,
        "the first instance runs 4 tasks",
        Duration::from_secs(60),
        |scrape| scrape.state().as_deref() == Some("RUNNING") && owned(scrape) == 4.0,
    );
    assert!(
        scrape.sum("parsley_rebalances_total") >= 1.0,
        "{}",
        scrape.text
    );
    live.wait_caught_up().await;
    deliveries_agree(&live, "one instance", || {
        Scrape::of(first_address)
            .map_or(-1.0, |scrape| scrape.sum("parsley_records_delivered_total"))
    })
    .await;
    let scrape = Scrape::of(first_address).expect("the first instance answers");
    lags_agree(&live, first_address, &tasks).await;
    assert_eq!(
        get(first_address, "/ready").map(|(code, _)| code),
        Some(200)
    );
    assert_eq!(
        get(first_address, "/health"),
        Some((200, "RUNNING\n".to_string()))
    );
    assert_eq!(
        get(first_address, "/nothing").map(|(code, _)| code),
        Some(404)
    );
    // HELP text for every figure, and commit latency as a histogram.
    for line in scrape
        .text
        .lines()
        .filter(|line| line.starts_with("# TYPE "))
    {
        let name = line.split(' ').nth(2).expect("a name");
        assert!(
            scrape.text.contains(&format!("# HELP {name} ")),
            "{name} has no HELP text:\n{}",
            scrape.text
        );
    }
    assert!(
        scrape
            .text
            .contains("# TYPE parsley_commit_seconds histogram"),
        "{}",
        scrape.text
    );
    assert!(!scrape
        .values("parsley_commit_seconds_bucket", &[("le", "0.1")])
        .is_empty());
    for task in &tasks {
        let running = scrape.one(
            "parsley_task_state",
            &[("task", task), ("state", "running")],
        );
        assert_eq!(running, Some(1.0), "{task}: {}", scrape.text);
        assert_eq!(
            scrape.one("parsley_restore_remaining_records", &[("task", task)]),
            Some(0.0)
        );
        let since = scrape.one("parsley_seconds_since_last_commit", &[("task", task)]);
        assert!(since.is_some_and(|since| since < 30.0), "{task}: {since:?}");
    }

    // A second instance: the group moves half of the tasks to it.
    let second_address = free_address();
    let mut second = start(&live, second_address, &logs.join("second.log"));
    let moved = wait_for(
        second_address,
        "the second instance takes tasks",
        Duration::from_secs(60),
        |scrape| owned(scrape) >= 1.0 && scrape.state().as_deref() == Some("RUNNING"),
    );
    wait_for(
        first_address,
        "the first instance gives tasks up",
        Duration::from_secs(60),
        |scrape| {
            owned(scrape) + owned(&moved) == 4.0 && scrape.state().as_deref() == Some("RUNNING")
        },
    );
    live.produce(400, 2).await;
    live.wait_caught_up().await;
    let mut second_delivered = 0.0;
    deliveries_agree(&live, "two instances", || {
        let first = Scrape::of(first_address)
            .map_or(-1.0, |scrape| scrape.sum("parsley_records_delivered_total"));
        second_delivered = Scrape::of(second_address)
            .map_or(-1.0, |scrape| scrape.sum("parsley_records_delivered_total"));
        first + second_delivered
    })
    .await;

    // SIGKILL the second: its tasks come back to the first, whose counters
    // go on from what their earlier runs there counted.
    second.0.kill().expect("SIGKILL");
    second.0.wait().expect("the second instance is gone");
    live.produce(400, 3).await;
    wait_for(
        first_address,
        "the first instance owns every task again",
        Duration::from_secs(60),
        |scrape| owned(scrape) == 4.0 && scrape.state().as_deref() == Some("RUNNING"),
    );
    live.wait_caught_up().await;
    deliveries_agree(&live, "after the kill", || {
        Scrape::of(first_address)
            .map_or(-1.0, |scrape| scrape.sum("parsley_records_delivered_total"))
            + second_delivered
    })
    .await;
    lags_agree(&live, first_address, &tasks).await;

    // A poison record stops balances/1 (no dead-letter topic); the others
    // run on (keep-others-running). Its consumer no longer polls, and its
    // lag still follows the cluster as input arrives.
    let poison = Tp::new(live.topology.inputs[0].name.clone(), 1);
    let producer = live.client.plain_producer().expect("a producer");
    let at = producer
        .append(
            &poison,
            &RecordData {
                key: Some(Bytes::from_static(b"account-1")),
                value: Some(Bytes::from_static(b"not an order")),
                headers: Vec::new(),
                timestamp: 0,
            },
        )
        .await
        .expect("the poison record");
    live.produce(200, 4).await;
    let failed = wait_for(
        first_address,
        "balances/1 fails and the instance is in ERROR",
        Duration::from_secs(60),
        |scrape| {
            scrape.state().as_deref() == Some("ERROR")
                && scrape.one(
                    "parsley_task_state",
                    &[("task", "balances/1"), ("state", "failed")],
                ) == Some(1.0)
        },
    );
    let (code, why) = get(first_address, "/health").expect("health answers");
    assert_eq!(code, 503, "{why}");
    assert!(why.contains("balances/1"), "{why}");
    assert!(
        why.contains(&at.to_string()),
        "the failure names the offset {at}: {why}"
    );
    let (code, why) = get(first_address, "/ready").expect("ready answers");
    assert_eq!(code, 503, "{why}");
    assert!(why.contains("balances/1 failed"), "{why}");
    lags_agree(&live, first_address, &tasks).await;
    let stuck = figure_lags(&Scrape::of(first_address).expect("figures"))["balances/1"];
    assert!(
        stuck >= 1,
        "the stopped task's lag counts the poison and what follows it: {}",
        failed.text
    );
    live.produce(100, 5).await;
    lags_agree(&live, first_address, &tasks).await;
    let grown = figure_lags(&Scrape::of(first_address).expect("figures"))["balances/1"];
    assert!(
        grown >= stuck,
        "lag of a stopped task does not fall: {stuck} then {grown}"
    );

    // SIGTERM: a task failed, so the instance exits 1 after the others
    // commit.
    let status = std::process::Command::new("kill")
        .args(["-TERM", &first.0.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    let exit = first.0.wait().expect("the first instance exits");
    assert_eq!(exit.code(), Some(1), "a failed task makes the exit code 1");
}

/// A task stuck in a call is not ready, and its lag still follows the
/// cluster: one `send_offsets_to_transaction` of balances/0 is held back
/// past its deadline (a planted stall). While it hangs, `/ready` names the
/// task as stalled and its lag figure equals the lag `status` reads; once
/// the runtime abandons the call and restarts the task, lag returns to 0,
/// the restart is counted and the instance is ready again. In-process:
/// the endpoints of `parsley_live::endpoints` over a `Runtime`.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_stuck_in_a_call_is_not_ready_and_its_lag_follows_the_cluster() {
    let Some(config) = test_broker() else { return };
    let config = config.with_timeout(Duration::from_secs(3));
    let live = set_up(&config, TopologyName::Balances, "stuck", 2).await;
    let endpoints = parsley_live::serve_endpoints("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("the endpoints");
    let address = endpoints.address();
    let transactional_id = format!("{}-balances-0", live.topology.app.id());
    parsley_live::faults::stall_next(
        parsley_live::TxnOp::SendOffsets,
        &transactional_id,
        config.deadline() * 4,
    );
    live.produce(200, 31).await;
    let runtime = parsley_live::Runtime::start(
        std::sync::Arc::new(live.topology.app.clone()),
        parsley_live::RuntimeConfig::new(config.clone()),
    )
    .await
    .expect("start");
    endpoints.attach(runtime.health());
    let tasks = [task_label("balances", 0), task_label("balances", 1)];

    // While the call hangs: not ready, naming the task, and the lag figure
    // is the cluster's (the task's deliveries are not committed).
    let until = Instant::now() + config.deadline() * 2;
    let mut seen_stalled = None;
    while Instant::now() < until && seen_stalled.is_none() {
        if let Some((503, why)) = get(address, "/ready") {
            if why.contains("balances/0 stalled") {
                seen_stalled = Some(why);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let why = seen_stalled.expect("/ready names balances/0 as stalled while its call hangs");
    assert!(
        why.starts_with("RUNNING") || why.starts_with("REBALANCING"),
        "{why}"
    );
    let cluster = cluster_lags(&live).await["balances/0"];
    assert!(
        cluster > 0,
        "balances/0 delivered but committed nothing yet"
    );
    let scrape = Scrape::of(address).expect("figures");
    let shown = scrape.one("parsley_consumer_lag", &[("task", "balances/0")]);
    assert_eq!(
        shown,
        Some(cluster as f64),
        "lag of the stuck task: {}",
        scrape.text
    );
    assert_eq!(get(address, "/health").map(|(code, _)| code), Some(200));

    // The call is abandoned at its deadline, the task restarts and catches
    // up: ready again, lag 0, one restart counted.
    live.wait_caught_up().await;
    lags_agree(&live, address, &tasks).await;
    wait_for(
        address,
        "ready again after the restart",
        Duration::from_secs(30),
        |scrape| {
            scrape.state().as_deref() == Some("RUNNING")
                && scrape.one("parsley_task_restarts_total", &[("task", "balances/0")]) == Some(1.0)
        },
    );
    assert_eq!(get(address, "/ready").map(|(code, _)| code), Some(200));
    let lags = figure_lags(&Scrape::of(address).expect("figures"));
    assert_eq!(lags.get("balances/0"), Some(&0), "{lags:?}");
    runtime.stopper().stop();
    assert_eq!(
        get(address, "/ready").map(|(code, body)| (code, body.starts_with("PENDING_SHUTDOWN"))),
        Some((503, true))
    );
    for run in runtime.wait().await {
        assert!(run.outcome.is_ok(), "{}: {:?}", run.task, run.outcome);
    }
}
