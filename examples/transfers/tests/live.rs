//! The application's own binary on a real broker (`KAFKA_BOOTSTRAP_SERVERS`,
//! e.g. from `scripts/kafka/broker.sh` of the Parsley repository): two
//! instances under group membership, transfers flowing the whole time (out
//! of order in event time by up to ten seconds), one instance killed with
//! SIGKILL mid-stream. Afterwards, read back from the committed topics
//! independently of the runtime: once every task's lag is zero, each
//! account's last balance is its credit and debit over every transfer
//! committed, the last total is 0, the audit is clean and the surviving
//! instance stops gracefully; and every total committed is counted.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parsley::{Assembly, Codec, Json, I64};
use parsley_live::{assemble_on, read_committed, task_status, test_broker, LiveClient, ReadBack};
use parsley_transfers::{app, Balance, Topics, TransferValue};

const BIN: &str = env!("CARGO_BIN_EXE_parsley-transfers");
/// `--set epoch-ms=`: 0 for no consistent view.
const EPOCH_MS: &str = "0";

fn command(bootstrap: &str, namespace: &str, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .args(["--namespace", namespace, "--bootstrap", bootstrap])
        .args(["--set", &format!("epoch-ms={EPOCH_MS}")]);
    command
}

fn instance(bootstrap: &str, namespace: &str) -> Child {
    command(bootstrap, namespace, &["run", "transfers"])
        .args(["--session-timeout-ms", "6000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn an instance")
}

/// The data records of `topic` (progress records, with neither key nor
/// value, left out), decoded.
fn values<V>(read: &ReadBack, topic: &str, decode: impl Fn(&[u8]) -> V) -> Vec<V> {
    read.topic(topic)
        .into_iter()
        .filter_map(|(_, record)| record.data.value.as_deref().map(&decode))
        .collect()
}

/// What was committed: the totals in the order they were written, each
/// account's last balance, and each account's credit and debit over every
/// transfer.
struct Committed {
    totals: Vec<i64>,
    last_balances: BTreeMap<String, (i64, i64)>,
    expected: BTreeMap<String, (i64, i64)>,
    transfers: usize,
}

fn committed(read: &ReadBack, topics: &Topics) -> Committed {
    let long = |bytes: &[u8]| Codec::<i64>::decode(&I64, bytes).expect("a long");
    let totals = values(read, topics.totals.name().as_str(), long);
    let mut last_balances = BTreeMap::new();
    let balance = |bytes: &[u8]| Codec::<Balance>::decode(&Json, bytes).expect("a balance");
    // Every balance of an account is on one partition, in the order written.
    for balance in values(read, topics.balances.name().as_str(), balance) {
        last_balances.insert(balance.account, (balance.credit, balance.debit));
    }
    let transfer = |bytes: &[u8]| Codec::<TransferValue>::decode(&Json, bytes).expect("a transfer");
    let transfers = values(read, topics.transfers.name().as_str(), transfer);
    let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for transfer in &transfers {
        expected.entry(transfer.to.clone()).or_default().0 += transfer.amount;
        expected.entry(transfer.from.clone()).or_default().1 += transfer.amount;
    }
    Committed {
        totals,
        last_balances,
        expected,
        transfers: transfers.len(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_one_of_two_instances_under_flowing_transfers() {
    let Some(config) = test_broker() else { return };
    let bootstrap = config.bootstrap_servers.clone();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let namespace = format!("transfers-{nanos:x}-");
    let setup = command(
        &bootstrap,
        &namespace,
        &["setup", "transfers", "--partitions", "2"],
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
    // Transfers flow the whole time: a batch every 300 ms until told to stop.
    let flowing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (flowing, bootstrap, namespace) =
            (Arc::clone(&flowing), bootstrap.clone(), namespace.clone());
        std::thread::spawn(move || {
            let mut batches = 0u64;
            while flowing.load(Ordering::Relaxed) {
                let seed = batches.to_string();
                let produced = command(&bootstrap, &namespace, &["produce", "transfers"])
                    .args(["--count", "40", "--seed", &seed])
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
    // The survivor takes the dead instance's tasks within the session
    // timeout, while transfers keep coming.
    tokio::time::sleep(Duration::from_secs(14)).await;
    flowing.store(false, Ordering::Relaxed);
    let batches = producer.join().expect("the producer");
    assert!(batches >= 10, "transfers flowed: {batches} batches");

    let topics = Topics::new(&namespace);
    let epoch = EPOCH_MS.parse().map(Duration::from_millis).unwrap();
    let app = app(&namespace, &topics, (!epoch.is_zero()).then_some(epoch)).unwrap();
    let client = LiveClient::new(config).expect("client");
    let assembly: Assembly = assemble_on(&client, &app).await.expect("assembled");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            second.try_wait().expect("status").is_none(),
            "the surviving instance exited"
        );
        let read = read_committed(&client, &app, &assembly)
            .await
            .expect("read back");
        let committed = committed(&read, &topics);
        let statuses = task_status(&client, &app, &assembly).await.expect("status");
        let lag: u64 = statuses.iter().map(|task| task.lag()).sum();
        if lag == 0 && committed.last_balances == committed.expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lag {lag} after the transfers stopped"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The survivor stops gracefully; then the committed topics, read back
    // at rest (the cut is then everything), audit clean.
    let status = Command::new("kill")
        .args(["-TERM", &second.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    let exit = second.wait().expect("the survivor exits");
    assert!(exit.success(), "a graceful stop exits 0, got {exit}");
    let read = read_committed(&client, &app, &assembly)
        .await
        .expect("read back");
    let committed = committed(&read, &topics);
    assert!(
        committed.transfers >= 400,
        "{} transfers",
        committed.transfers
    );
    assert_eq!(
        committed.last_balances, committed.expected,
        "each account's last balance"
    );
    assert_eq!(committed.totals.last(), Some(&0), "the last total");
    let impossible = committed.totals.iter().filter(|total| **total != 0).count();
    println!(
        "live, epoch-ms={EPOCH_MS}: {impossible} of {} totals impossible over {} transfers",
        committed.totals.len(),
        committed.transfers
    );
    let report = parsley::audit::audit(&app, &assembly, &read.to_logs());
    assert!(report.is_clean(), "{report}");
}
