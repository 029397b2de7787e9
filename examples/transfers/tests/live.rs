//! The application's own binary on a real broker (`KAFKA_BOOTSTRAP_SERVERS`,
//! e.g. from `scripts/kafka/broker.sh` of the Parsley repository): two
//! instances under group membership, transfers flowing the whole time (out
//! of order in event time by up to ten seconds), one instance killed with
//! SIGKILL mid-stream. Afterwards, read back from the committed topics
//! independently of the runtime: every total is counted, and each
//! account's last balance is its credit and debit over the transfers the
//! last total covers; the surviving instance stops gracefully, and the
//! audit is clean.
//!
//! With the total a consistent view (the binary's default), no total is
//! impossible, and the last covers every epoch the transfers closed (its
//! cut one above the highest of them a transfer falls in).
//! Without it (`--set epoch-ms=0`, the ignored test), some totals are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parsley::header::cut_of;
use parsley::{Assembly, Codec, Json, I64};
use parsley_live::{assemble_on, read_committed, task_status, test_broker, LiveClient, ReadBack};
use parsley_transfers::{app, Balance, Topics, TransferValue};

const BIN: &str = env!("CARGO_BIN_EXE_parsley-transfers");

fn command(bootstrap: &str, namespace: &str, epoch_ms: u64, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .args(["--namespace", namespace, "--bootstrap", bootstrap])
        .args(["--set", &format!("epoch-ms={epoch_ms}")]);
    command
}

/// An instance of the binary, its log (stderr) kept in `log` so that a
/// failure can show what the instances did.
fn instance(bootstrap: &str, namespace: &str, epoch_ms: u64, log: &Path) -> Child {
    let file = std::fs::File::create(log).expect("the instance's log file");
    command(bootstrap, namespace, epoch_ms, &["run", "transfers"])
        .args(["--session-timeout-ms", "6000"])
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("spawn an instance")
}

/// The last `lines` lines of each log, for a failure's message.
fn log_tails(logs: &[PathBuf], lines: usize) -> String {
    let mut out = String::new();
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        out.push_str(&format!(
            "--- the last {lines} lines of {}\n",
            log.display()
        ));
        for line in &all[all.len().saturating_sub(lines)..] {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// What was committed, read back with a plain `read_committed` consumer.
struct Committed {
    /// The totals in the order written, each with its cut when it has one.
    totals: Vec<(i64, Option<i64>)>,
    /// Each account's last balance: its credit and debit.
    balances: BTreeMap<String, (i64, i64)>,
    /// The transfers, per partition in offset order: value and timestamp.
    transfers: Vec<Vec<(TransferValue, i64)>>,
}

fn committed(read: &ReadBack, topics: &Topics) -> Committed {
    // Data records only: region topics also hold progress records (V4),
    // with neither key nor value.
    let data = |topic: &str| {
        read.topic(topic)
            .into_iter()
            .filter(|(_, record)| record.data.value.is_some())
            .map(|(tp, record)| (tp.partition, &record.data))
            .collect::<Vec<_>>()
    };
    let totals = data(topics.totals.name().as_str())
        .into_iter()
        .map(|(_, record)| {
            let total = I64.decode(record.value.as_deref().unwrap_or_default());
            (total.expect("a long"), cut_of(record))
        })
        .collect();
    // Every balance of an account is on one partition, in the order written.
    let mut balances = BTreeMap::new();
    for (_, record) in data(topics.balances.name().as_str()) {
        let balance: Balance = Json
            .decode(record.value.as_deref().unwrap_or_default())
            .expect("a balance");
        balances.insert(balance.account, (balance.credit, balance.debit));
    }
    let mut transfers: Vec<Vec<(TransferValue, i64)>> = Vec::new();
    for (partition, record) in data(topics.transfers.name().as_str()) {
        let transfer: TransferValue = Json
            .decode(record.value.as_deref().unwrap_or_default())
            .expect("a transfer");
        let partition = partition as usize;
        transfers.resize_with(transfers.len().max(partition + 1), Vec::new);
        transfers[partition].push((transfer, record.timestamp));
    }
    Committed {
        totals,
        balances,
        transfers,
    }
}

impl Committed {
    /// Each account's credit and debit over the transfers of the epochs
    /// below `cut` (V3: a transfer's epoch is the highest timestamp of its
    /// partition up to it, in epochs); `None`: over every transfer.
    fn expected(&self, epoch_ms: u64, cut: Option<i64>) -> BTreeMap<String, (i64, i64)> {
        let mut sums: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for partition in &self.transfers {
            let mut highest = i64::MIN;
            for (transfer, timestamp) in partition {
                highest = highest.max(*timestamp);
                if cut.is_none_or(|cut| highest.div_euclid(epoch_ms as i64) < cut) {
                    sums.entry(transfer.to.clone()).or_default().0 += transfer.amount;
                    sums.entry(transfer.from.clone()).or_default().1 += transfer.amount;
                }
            }
        }
        sums
    }

    /// The lowest epoch the transfers' partitions reached: how far a view
    /// can go (its last epoch stays open, V5).
    fn reached(&self, epoch_ms: u64, partitions: usize) -> Option<i64> {
        if self.transfers.len() < partitions || self.transfers.iter().any(Vec::is_empty) {
            return None;
        }
        let highest = |partition: &Vec<(TransferValue, i64)>| {
            partition.iter().map(|(_, timestamp)| *timestamp).max()
        };
        self.transfers
            .iter()
            .filter_map(highest)
            .map(|timestamp| timestamp.div_euclid(epoch_ms as i64))
            .min()
    }

    /// The cut the view's last release carries once it has released every
    /// epoch below `reached`: one above the highest of those epochs that
    /// holds a transfer. An epoch no transfer falls in (the partitions'
    /// highest timestamps jumped past it between two batches) has no
    /// deliveries, so the view writes nothing at its end (V5).
    fn expected_last_cut(&self, epoch_ms: u64, reached: i64) -> Option<i64> {
        let mut highest_below = None;
        for partition in &self.transfers {
            let mut highest = i64::MIN;
            for (_, timestamp) in partition {
                highest = highest.max(*timestamp);
                let epoch = highest.div_euclid(epoch_ms as i64);
                if epoch < reached {
                    highest_below = highest_below.max(Some(epoch));
                }
            }
        }
        highest_below.map(|epoch| epoch + 1)
    }

    /// The last total's cut, if any.
    fn last_cut(&self) -> Option<i64> {
        self.totals.last().and_then(|(_, cut)| *cut)
    }

    fn impossible(&self) -> usize {
        self.totals.iter().filter(|(total, _)| *total != 0).count()
    }
}

/// Runs the binary as the module docs say, with the view's epoch
/// `epoch_ms` (0: no view), and returns what it committed.
async fn kill_9_under_flowing_transfers(epoch_ms: u64) -> Option<Committed> {
    let config = test_broker()?;
    let bootstrap = config.bootstrap_servers.clone();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let namespace = format!("transfers-{nanos:x}-");
    let setup = command(
        &bootstrap,
        &namespace,
        epoch_ms,
        &["setup", "transfers", "--partitions", "2"],
    )
    .output()
    .expect("setup");
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );

    let logs: Vec<PathBuf> = ["first", "second"]
        .iter()
        .map(|name| std::env::temp_dir().join(format!("{namespace}{name}.log")))
        .collect();
    let mut first = instance(&bootstrap, &namespace, epoch_ms, &logs[0]);
    let mut second = instance(&bootstrap, &namespace, epoch_ms, &logs[1]);
    // Transfers flow the whole time: a batch every 300 ms until told to stop.
    let flowing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (flowing, bootstrap, namespace) =
            (Arc::clone(&flowing), bootstrap.clone(), namespace.clone());
        std::thread::spawn(move || {
            let mut batches = 0u64;
            while flowing.load(Ordering::Relaxed) {
                let seed = batches.to_string();
                let produced = command(&bootstrap, &namespace, epoch_ms, &["produce", "transfers"])
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
    let epoch = (epoch_ms > 0).then(|| Duration::from_millis(epoch_ms));
    let app = app(&namespace, &topics, epoch).unwrap();
    let client = LiveClient::new(config).expect("client");
    let assembly: Assembly = assemble_on(&client, &app).await.expect("assembled");
    // Caught up: without a view, every task's lag is 0; with one, the view
    // has released every epoch the transfers closed that holds a transfer
    // (the last stays open, held, so lag stays above 0).
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
        let caught_up = match epoch {
            Some(_) => committed.reached(epoch_ms, 2).is_some_and(|reached| {
                let expected = committed.expected_last_cut(epoch_ms, reached);
                expected.is_some() && committed.last_cut() == expected
            }),
            None => {
                let statuses = task_status(&client, &app, &assembly).await.expect("status");
                statuses.iter().map(|task| task.lag()).sum::<u64>() == 0
            }
        };
        if caught_up {
            break;
        }
        if Instant::now() >= deadline {
            let reached = committed.reached(epoch_ms.max(1), 2);
            let statuses = task_status(&client, &app, &assembly).await.expect("status");
            let lags: Vec<String> = statuses
                .iter()
                .map(|task| format!("{}/{}: lag {}", task.stage, task.partition, task.lag()))
                .collect();
            panic!(
                "not caught up 120 s after the transfers stopped: the last cut {:?}, the transfers' epochs reached {reached:?}, the last cut expected {:?}; tasks {lags:?}\n{}",
                committed.last_cut(),
                reached.and_then(|reached| committed.expected_last_cut(epoch_ms.max(1), reached)),
                log_tails(&logs, 80)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The survivor stops gracefully; then the committed topics are read
    // back at rest (the audit's cut is then everything).
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
    let transfers: usize = committed.transfers.iter().map(Vec::len).sum();
    assert!(transfers >= 400, "{transfers} transfers");
    let cut = epoch.and(committed.last_cut());
    assert_eq!(
        committed.balances,
        committed.expected(epoch_ms.max(1), cut),
        "each account's last balance, below the cut {cut:?}"
    );
    assert_eq!(
        committed.totals.last().map(|(total, _)| *total),
        Some(0),
        "the last total"
    );
    println!(
        "live, epoch-ms={epoch_ms}: {} of {} totals impossible over {transfers} transfers",
        committed.impossible(),
        committed.totals.len(),
    );
    // The audit of the committed logs: the view's region tasks it leaves to
    // the simulator's checker, with a note; the rest it checks.
    let report = parsley::audit::audit(&app, &assembly, &read.to_logs());
    assert!(report.is_clean(), "{report}");
    for log in &logs {
        let _ = std::fs::remove_file(log);
    }
    Some(committed)
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_under_flowing_transfers_a_consistent_total_is_never_impossible() {
    let Some(committed) = kill_9_under_flowing_transfers(1_000).await else {
        return;
    };
    assert_eq!(committed.impossible(), 0, "totals {:?}", committed.totals);
    let cuts: Vec<i64> = committed
        .totals
        .iter()
        .map(|(_, cut)| cut.expect("a view's total carries its cut"))
        .collect();
    assert!(
        cuts.windows(2).all(|pair| pair[0] < pair[1]),
        "cuts {cuts:?}"
    );
    assert!(
        cuts.len() >= 10,
        "{} totals over 22 s of transfers",
        cuts.len()
    );
}

/// The same run without the declaration, for the baseline: a minute more
/// of the broker.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "the baseline without a consistent view: run it with --ignored"]
async fn kill_9_under_flowing_transfers_without_a_view_some_totals_are_impossible() {
    let Some(committed) = kill_9_under_flowing_transfers(0).await else {
        return;
    };
    assert!(
        committed.impossible() > 0,
        "without a consistent view some totals are impossible"
    );
}
