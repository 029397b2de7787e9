//! The pipeline's own binary on a real broker (`KAFKA_BOOTSTRAP_SERVERS`,
//! e.g. from `scripts/kafka/broker.sh` of the Parsley repository): two
//! instances under group membership, input flowing the whole time, one
//! instance killed with SIGKILL mid-stream. Afterwards, read back from the
//! committed topics independently of the runtime: every order id written
//! once to unique-orders and enriched once, every duplicate dropped, every
//! window exact (its revenue the sum of its on-time sales), every sale in a
//! window or in late-sales; every task's lag zero; the audit clean; the
//! survivor stops gracefully.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parsley::window::WindowedCodec;
use parsley::{Codec, Json, Utf8, I64};
use parsley_live::{assemble_on, read_committed, task_status, test_broker, LiveClient, ReadBack};
use parsley_shop_app::{app, Enriched, Order, Topics};

const WINDOW_MS: i64 = 2_000;
const GRACE_MS: i64 = 1_000;
const BIN: &str = env!("CARGO_BIN_EXE_parsley-shop-app");

fn command(bootstrap: &str, namespace: &str, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .args(["--namespace", namespace, "--bootstrap", bootstrap])
        .args(["--set", &format!("window-ms={WINDOW_MS}")])
        .args(["--set", &format!("grace-ms={GRACE_MS}")]);
    command
}

fn instance(bootstrap: &str, namespace: &str) -> Child {
    command(bootstrap, namespace, &["run", "shop"])
        .args(["--session-timeout-ms", "6000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn an instance")
}

/// What the committed topics say, checked; `Err` names what is not (yet)
/// right. `Ok` carries the order count and the revenue windows' count.
fn check(read: &ReadBack, topics: &Topics) -> Result<(usize, usize), String> {
    let decode = |bytes: &Option<_>| -> Vec<u8> {
        Option::as_deref(bytes)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    };
    let ids: BTreeSet<String> = read
        .topic(topics.orders.name().as_str())
        .iter()
        .map(|(_, record)| {
            Codec::<Order>::decode(&Json, &decode(&record.data.value))
                .expect("an order")
                .id
        })
        .collect();
    let once = |topic: &str, id_of: &dyn Fn(&[u8]) -> String| -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for (tp, record) in read.topic(topic) {
            let id = id_of(&decode(&record.data.value));
            if !seen.insert(id.clone()) {
                return Err(format!(
                    "{topic}: order {id} twice (again at {tp}@{})",
                    record.offset
                ));
            }
        }
        match seen == ids {
            true => Ok(()),
            false => Err(format!(
                "{topic} holds {} of {} order ids",
                seen.len(),
                ids.len()
            )),
        }
    };
    once(topics.unique_orders.name().as_str(), &|bytes| {
        Codec::<Order>::decode(&Json, bytes).expect("an order").id
    })?;
    once(topics.enriched.name().as_str(), &|bytes| {
        Codec::<Enriched>::decode(&Json, bytes)
            .expect("an enriched order")
            .order
            .id
    })?;
    // Every enriched sale is on time for its window or late, once.
    let late: BTreeSet<String> = read
        .topic(topics.late.name().as_str())
        .iter()
        .map(|(_, record)| {
            Codec::<Enriched>::decode(&Json, &decode(&record.data.value))
                .expect("a sale")
                .order
                .id
        })
        .collect();
    let mut expected: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for (_, record) in read.topic(topics.enriched.name().as_str()) {
        let sale = Codec::<Enriched>::decode(&Json, &decode(&record.data.value)).expect("a sale");
        if late.contains(&sale.order.id) {
            continue;
        }
        let start = record.data.timestamp - record.data.timestamp.rem_euclid(WINDOW_MS);
        *expected
            .entry((sale.order.product.clone(), start))
            .or_default() += sale.due;
    }
    let mut written: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for (tp, record) in read.topic(topics.revenue.name().as_str()) {
        let window = WindowedCodec(Utf8)
            .decode(&decode(&record.data.key))
            .expect("a window");
        let revenue = Codec::<i64>::decode(&I64, &decode(&record.data.value)).expect("a revenue");
        if written
            .insert((window.key.clone(), window.start), revenue)
            .is_some()
        {
            return Err(format!(
                "window {} [{}, {}) written twice (again at {tp}@{})",
                window.key, window.start, window.end, record.offset
            ));
        }
    }
    if written != expected {
        let missing = expected
            .iter()
            .filter(|(window, due)| written.get(*window) != Some(due))
            .count();
        return Err(format!(
            "{missing} of {} windows not (yet) exact",
            expected.len()
        ));
    }
    Ok((ids.len(), written.len()))
}

/// The committed topics, read back; a read that times out (the broker
/// shares this machine's cores with both instances) is tried again, a few
/// times, naming each failure.
async fn read_back(
    client: &LiveClient,
    app: &parsley::App,
    assembly: &parsley::Assembly,
) -> ReadBack {
    let mut failures = Vec::new();
    for _ in 0..5 {
        match read_committed(client, app, assembly).await {
            Ok(read) => return read,
            Err(error) => failures.push(error.to_string()),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("reading back failed five times: {failures:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_one_of_two_instances_under_flowing_input_keeps_every_order_once_and_every_window_exact(
) {
    let Some(config) = test_broker() else { return };
    let bootstrap = config.bootstrap_servers.clone();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let namespace = format!("shop-{nanos:x}-");
    let setup = command(
        &bootstrap,
        &namespace,
        &["setup", "shop", "--partitions", "2"],
    )
    .output()
    .expect("setup");
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );

    let mut first = instance(&bootstrap, &namespace);
    let mut second = instance(&bootstrap, &namespace);
    let flowing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (flowing, bootstrap, namespace) =
            (Arc::clone(&flowing), bootstrap.clone(), namespace.clone());
        std::thread::spawn(move || {
            let mut batches = 0u64;
            while flowing.load(Ordering::Relaxed) {
                let seed = batches.to_string();
                let produced = command(&bootstrap, &namespace, &["produce", "shop"])
                    .args(["--count", "40", "--keys", "8", "--seed", &seed])
                    .output()
                    .expect("produce");
                assert!(
                    produced.status.success(),
                    "{}",
                    String::from_utf8_lossy(&produced.stderr)
                );
                batches += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
            batches
        })
    };
    tokio::time::sleep(Duration::from_secs(8)).await;
    first.kill().expect("SIGKILL");
    first.wait().expect("the killed instance is reaped");
    tokio::time::sleep(Duration::from_secs(14)).await;
    flowing.store(false, Ordering::Relaxed);
    let batches = producer.join().expect("the producer");
    assert!(batches >= 10, "input flowed: {batches} batches");

    let topics = Topics::new(&namespace);
    let app = app(
        &namespace,
        &topics,
        Duration::from_millis(WINDOW_MS as u64),
        Duration::from_millis(GRACE_MS as u64),
    )
    .unwrap();
    let client = LiveClient::new(config).expect("client");
    let assembly = assemble_on(&client, &app).await.expect("assembled");
    let deadline = Instant::now() + Duration::from_secs(120);
    let (orders, windows, duplicates) = loop {
        assert!(
            second.try_wait().expect("status").is_none(),
            "the surviving instance exited"
        );
        let read = read_back(&client, &app, &assembly).await;
        let checked = check(&read, &topics);
        let statuses = task_status(&client, &app, &assembly).await.expect("status");
        let lag: u64 = statuses.iter().map(|task| task.lag()).sum();
        match checked {
            Ok((orders, windows)) if lag == 0 => {
                break (
                    orders,
                    windows,
                    read.topic(topics.orders.name().as_str()).len() - orders,
                )
            }
            other => assert!(
                Instant::now() < deadline,
                "{other:?}, lag {lag}, after the input stopped"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        orders > 200 && windows > 5,
        "{orders} orders, {windows} windows"
    );
    assert!(duplicates > 50, "{duplicates} duplicates dropped");

    let status = Command::new("kill")
        .args(["-TERM", &second.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    let exit = second.wait().expect("the survivor exits");
    assert!(exit.success(), "a graceful stop exits 0, got {exit}");
    let read = read_back(&client, &app, &assembly).await;
    check(&read, &topics).expect("still exact at rest");
    let report = parsley::audit::audit(&app, &assembly, &read.to_logs());
    assert!(report.is_clean(), "{report}");
}
