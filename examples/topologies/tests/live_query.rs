//! Interactive queries on a real broker: two instances of `balances`
//! share its four tasks by group membership, each serving queries on its
//! endpoints. Every key's committed balance is asked of one instance over
//! HTTP (it answers for its own tasks and redirects to the other for the
//! rest) and through `parsley-live query` (a process of its own, which
//! finds the owner in the instances' group), and equals what the
//! TestDriver computes from the same input. A task restoring answers the
//! typed `restoring` error (its producer's start is held back by a planted
//! stall), a task no instance owns `moving`, an unknown stage
//! `unknown_stage`.

#![cfg(feature = "live")]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use parsley::Codec as _;
use parsley_examples::TopologyName;
use parsley_live::query::QueryError;
use parsley_live::{read_committed, test_broker, Runtime, RuntimeConfig};
use parsley_sim::TestDriver;

use crate::live_common;

use live_common::{set_up, terminate, Live};

/// A port nothing listens on yet, for an instance's endpoints.
fn free_address() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}

/// What one GET answered: status, `Location` header, body.
pub(crate) struct Got {
    pub(crate) status: u16,
    pub(crate) location: Option<String>,
    pub(crate) body: String,
}

/// `GET path` on `address` (`host:port`); `None` while nothing answers.
pub(crate) fn get(address: &str, path: &str) -> Option<Got> {
    let target: SocketAddr = address.parse().ok()?;
    let mut stream = TcpStream::connect_timeout(&target, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let location = head
        .lines()
        .find_map(|line| {
            line.strip_prefix("location: ")
                .or_else(|| line.strip_prefix("Location: "))
        })
        .map(str::to_owned);
    Some(Got {
        status,
        location,
        body: body.to_owned(),
    })
}

/// A balance as an answer carries it: the I64 codec's bytes in base64.
pub(crate) fn balance_of(answer: &serde_json::Value) -> Option<i64> {
    if answer["found"] == false {
        return Some(0);
    }
    assert_eq!(
        answer["encoding"], "base64",
        "an I64 state is no JSON: {answer}"
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(answer["value"].as_str()?)
        .ok()?;
    parsley::I64.decode(&bytes).ok()
}

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
            .spawn()
            .expect("an instance"),
    )
}

/// `parsley-live query` of `stage`'s `key`: its exit code and the JSON
/// document it printed.
fn cli_query(live: &Live, stage: &str, key: &str) -> (i32, serde_json::Value) {
    let Output { status, stdout, .. } = Command::new(env!("CARGO_BIN_EXE_parsley-live"))
        .args([
            "query",
            TopologyName::as_str(live.topology.name),
            stage,
            key,
        ])
        .args(["--namespace", &live.namespace])
        .args(["--bootstrap", &live.client.config().bootstrap_servers])
        .output()
        .expect("parsley-live query");
    let text = String::from_utf8_lossy(&stdout);
    let document = serde_json::from_str(text.trim())
        .unwrap_or_else(|error| panic!("query printed no JSON ({error}): {text:?}"));
    (status.code().unwrap_or(-1), document)
}

/// The balances the TestDriver computes from the input the instances read.
async fn under_the_test_driver(live: &Live) -> BTreeMap<String, Option<i64>> {
    let read = read_committed(&live.client, &live.topology.app, &live.assembly)
        .await
        .expect("read back");
    let mut builder = TestDriver::builder(&live.topology.app);
    for (topic, partitions) in &live.assembly.partitions {
        builder = builder.partitions(topic.as_str(), *partitions);
    }
    let driver = builder.build().expect("driver");
    let mut keys = Vec::new();
    for input in &live.topology.inputs {
        let handle = driver.input_raw(input.name.as_str()).expect("input");
        for (tp, record) in read.topic(input.name.as_str()) {
            let data = record.data.clone();
            if let Some(key) = &data.key {
                keys.push(String::from_utf8(key.to_vec()).expect("UTF-8 accounts"));
            }
            handle
                .pipe_raw(tp.partition, data.key, data.value, data.headers)
                .expect("pipe");
        }
    }
    let store = driver.store::<i64>("balances").expect("the balances store");
    keys.into_iter()
        .map(|key| {
            let balance = store.get(key.as_str()).expect("a balance");
            (key, balance)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_instances_answer_every_key_over_http_and_the_cli_as_the_test_driver_computes() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Balances, "query", 4).await;
    let logs = std::env::temp_dir().join(format!("{}logs", live.namespace));
    std::fs::create_dir_all(&logs).expect("a log directory");
    let (a, b) = (free_address(), free_address());
    let mut first = start(&live, a, &logs.join("a.log"));
    let mut second = start(&live, b, &logs.join("b.log"));
    live.produce(300, 41).await;
    live.wait_caught_up().await;
    let expected = under_the_test_driver(&live).await;
    assert!(
        expected.len() >= 8,
        "the input touches most of 12 accounts: {expected:?}"
    );

    // Over HTTP, every key asked of the first instance: answered by it, or
    // redirected to the second. The group may still be settling, and a
    // task's last commit reaches its store after its delivery report: each
    // key is asked until it answers its balance, within 30 s.
    let (a_text, b_text) = (a.to_string(), b.to_string());
    let mut answered_by: BTreeMap<String, String> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for (key, balance) in &expected {
        let path = format!("/query/balances/{key}");
        loop {
            let got = get(&a_text, &path);
            let answered = got.and_then(|got| match (got.status, got.location) {
                (200, _) => Some((a_text.clone(), got.body)),
                (307, Some(location)) => {
                    assert_eq!(
                        location,
                        format!("http://{b_text}{path}"),
                        "the redirect names the other instance: {}",
                        got.body
                    );
                    let redirect: serde_json::Value =
                        serde_json::from_str(&got.body).expect("a JSON redirect");
                    assert_eq!(redirect["error"], "not_owner", "{redirect}");
                    let there = get(&b_text, &path)?;
                    (there.status == 200).then_some((b_text.clone(), there.body))
                }
                _ => None,
            });
            if let Some((at, body)) = answered {
                let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
                if balance_of(&answer) == Some(balance.unwrap_or(0)) {
                    assert_eq!(answer["found"], balance.is_some(), "{answer}");
                    answered_by.insert(key.clone(), at);
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{}: key {key} never answered its balance {balance:?} (logs in {})",
                live.namespace,
                logs.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for at in [&a_text, &b_text] {
        assert!(
            answered_by.values().any(|by| by == at),
            "the instance at {at} answered for its own tasks: {answered_by:?}"
        );
    }

    // Through the CLI, one key owned by each instance, and an unknown stage.
    for at in [&a_text, &b_text] {
        let key = answered_by
            .iter()
            .find(|(_, by)| *by == at)
            .map(|(key, _)| key.clone())
            .expect("a key of each instance");
        let (code, answer) = cli_query(&live, "balances", &key);
        assert_eq!(code, 0, "{answer}");
        assert_eq!(
            balance_of(&answer),
            Some(expected[&key].unwrap_or(0)),
            "{answer}"
        );
    }
    let (code, refused) = cli_query(&live, "nope", "account-1");
    assert_eq!(
        (code, refused["error"].as_str()),
        (2, Some("unknown_stage")),
        "{refused}"
    );
    let got = get(&a_text, "/query/nope/account-1").expect("an answer");
    assert_eq!(got.status, 404, "{}", got.body);
    assert!(got.body.contains("\"unknown_stage\""), "{}", got.body);

    // With both instances gone, no one owns a task: `moving`.
    terminate(&mut first.0);
    terminate(&mut second.0);
    let key = expected.keys().next().expect("a key").clone();
    let (code, moving) = cli_query(&live, "balances", &key);
    assert_eq!(
        (code, moving["error"].as_str()),
        (1, Some("moving")),
        "{moving}"
    );

    // In-process, with the whole share and balances/0's producer held back
    // 4 s as it starts: its keys answer `restoring` meanwhile (the Rust
    // API), then their balances.
    let transactional_id = format!("{}-balances-0", live.topology.app.id());
    parsley_live::faults::stall_next(
        parsley_live::TxnOp::Init,
        &transactional_id,
        Duration::from_secs(4),
    );
    let runtime = Runtime::start(
        Arc::new(live.topology.app.clone()),
        RuntimeConfig::new(live.client.config().clone()),
    )
    .await
    .expect("start");
    let queries = runtime.queries();
    let of_task_0 = expected
        .keys()
        .find(|key| parsley::partition_for(Some(key.as_bytes()), 4, 0) == 0)
        .expect("a key of balances/0")
        .clone();
    let mut restoring = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        match queries.query("balances", &of_task_0).await {
            Ok(answer) => break answer,
            Err(QueryError::Restoring { task, .. }) => {
                assert_eq!(task.to_string(), "balances/0");
                restoring = true;
            }
            Err(QueryError::Moving { .. }) => {}
            Err(other) => panic!("{other}"),
        }
        assert!(Instant::now() < deadline, "balances/0 never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        restoring,
        "a query while balances/0 restored answered `restoring`"
    );
    assert_eq!(
        answer.decode(&parsley::I64).expect("an I64"),
        expected[&of_task_0],
        "after its restore balances/0 answers what the TestDriver computes"
    );
    let error = runtime.query("nope", "account-1").await.unwrap_err();
    assert!(matches!(error, QueryError::UnknownStage { .. }), "{error}");
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop");
    }
}

/// Query latency, printed (not a timed test): two instances of
/// `balances`, caught up, then every key asked 100 times over HTTP of one
/// instance: its own keys answered from its store, the other's keys a
/// redirect (307) then the owner's answer, as `curl -L` would go.
///
/// cargo test -p parsley-examples --features live,mutations --test live -- --ignored --nocapture live_query::query_latency
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a benchmark: prints figures"]
async fn query_latency() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Balances, "query-bench", 4).await;
    let logs = std::env::temp_dir().join(format!("{}logs", live.namespace));
    std::fs::create_dir_all(&logs).expect("a log directory");
    let (a, b) = (free_address(), free_address());
    let _first = start(&live, a, &logs.join("a.log"));
    let _second = start(&live, b, &logs.join("b.log"));
    live.produce(2_000, 43).await;
    live.wait_caught_up().await;
    let keys: Vec<String> = (0..12).map(|n| format!("account-{n}")).collect();
    let a_text = a.to_string();
    // Settled: every key answers (directly or after one redirect).
    let deadline = Instant::now() + Duration::from_secs(30);
    for key in &keys {
        let path = format!("/query/balances/{key}");
        while !get(&a_text, &path).is_some_and(|got| got.status == 200 || got.status == 307) {
            assert!(Instant::now() < deadline, "{key} never answered");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let (mut direct, mut redirected) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        for key in &keys {
            let path = format!("/query/balances/{key}");
            let began = Instant::now();
            let got = get(&a_text, &path).expect("an answer");
            match (got.status, got.location) {
                (200, _) => direct.push(began.elapsed()),
                (307, Some(location)) => {
                    let owner = location
                        .strip_prefix("http://")
                        .and_then(|rest| rest.split_once('/'))
                        .map(|(host, _)| host.to_owned())
                        .expect("an http location");
                    let there = get(&owner, &path).expect("the owner's answer");
                    assert_eq!(there.status, 200, "{}", there.body);
                    redirected.push(began.elapsed());
                }
                (status, _) => panic!("HTTP {status}: {}", got.body),
            }
        }
    }
    let quantiles = |name: &str, mut times: Vec<Duration>| {
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        eprintln!(
            "{name}: {} queries, p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
            times.len(),
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0)
        );
    };
    quantiles("answered by the instance asked", direct);
    quantiles("redirected to the owner (two requests)", redirected);
}
