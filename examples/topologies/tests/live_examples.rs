//! The example topologies on a real broker:
//!
//! - conformance: each runs live and under the TestDriver with the same
//!   inputs, and commits the same state per key and the same keyed outputs
//!   per key (interleavings across tps may differ; tick emissions follow the
//!   wall clock, so they are compared by the audit, not by value);
//! - kill -9: `parsley-live run balances` as a child process, killed with
//!   SIGKILL at random points five times and restarted each time;
//! - scale-out: two instances share the tasks, one is killed and replaced;
//! - timers (K2): the request/reply shape with a live scheduler.
//!
//! After each, the committed topics are read back with `read_committed` and
//! audited (the log-only checks of the simulator's checker: no lost or
//! duplicated output, each committed tick delivered once, causal order), and
//! the committed state is compared with the fold of the inputs.

#![cfg(feature = "live")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parsley::assemble;
use parsley_examples::live::expected_balances;
use parsley_examples::namespaced;
use parsley_examples::TopologyName;
use parsley_live::{final_state, keyed_outputs, read_committed, ReadBack};
use parsley_live::{test_broker, Runtime, RuntimeConfig};
use parsley_sim::audit::{committed_logs, CommittedLogs};
use parsley_sim::TestDriver;
use rand_core::{RngCore, SeedableRng};

use crate::live_common;
use crate::live_query::{balance_of, get};

use live_common::{set_up, terminate, Live, PATIENCE, TICK};

// ----- a call that never returns -----

/// No call to Kafka blocks a task past its deadline (issue 13's wedge,
/// planted): one `send_offsets_to_transaction` of task balances/0 sleeps
/// far past the runtime's deadline, as librdkafka's does when the
/// coordinator goes away. The runtime abandons it, drops the task's clients
/// and restarts the task inside the instance from its committed checkpoint;
/// the fresh producer fences the abandoned one. The task catches up, no task
/// ends, and what was committed audits clean and folds to the inputs.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_past_its_deadline_restarts_the_task_and_loses_nothing() {
    let Some(config) = test_broker() else { return };
    let config = config.with_timeout(Duration::from_secs(2));
    let stall = config.deadline() * 3;
    restarts_once_and_loses_nothing(config, "stall", stall).await;
}

/// A task whose transaction the broker aborted notices and restarts: with
/// a 3 s `transaction.timeout.ms`, task balances/0's
/// `send_offsets_to_transaction` is held back 6 s (inside the call's
/// deadline), so the broker aborts the open transaction and bumps the
/// producer's epoch meanwhile. The producer then reports itself fenced,
/// although no other owner exists: the runtime tells the two apart by how
/// long the transaction was open and restarts the task instead of ending it.
#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_the_broker_aborted_restarts_the_task_and_loses_nothing() {
    let Some(config) = test_broker() else { return };
    let config = config
        .with_timeout(Duration::from_secs(10))
        .with_transaction_timeout(Duration::from_secs(3));
    restarts_once_and_loses_nothing(config, "txn-timeout", Duration::from_secs(6)).await;
}

/// Holds back one `send_offsets_to_transaction` of task balances/0 by
/// `stall` under `config`, with input before and after; asserts that task
/// restarted exactly once inside the instance, no task ended, and what was
/// committed audits clean and folds to the inputs. balances/1 reads from the
/// same stage consumer throughout: the restart unassigns and reassigns
/// balances/0's partitions only, and balances/1 never restarts.
async fn restarts_once_and_loses_nothing(
    config: parsley_live::LiveConfig,
    kind: &str,
    stall: Duration,
) {
    let live = set_up(&config, TopologyName::Balances, kind, 2).await;
    let transactional_id = format!("{}-balances-0", live.topology.app.id());
    parsley_live::faults::stall_next(parsley_live::TxnOp::SendOffsets, &transactional_id, stall);
    let mut plan = live.produce(200, 21).await;
    let runtime = Runtime::start(
        Arc::new(live.topology.app.clone()),
        RuntimeConfig::new(config),
    )
    .await
    .expect("start");
    plan.extend(live.produce(200, 22).await);
    live.wait_caught_up().await;
    let ended = runtime.take_ended();
    assert!(ended.is_empty(), "no task ends: {ended:?}");
    runtime.stopper().stop();
    let runs = runtime.wait().await;
    for run in &runs {
        assert!(run.outcome.is_ok(), "{}: {:?}", run.task, run.outcome);
        let expected = u32::from(run.task.to_string() == "balances/0");
        assert_eq!(run.restarts, expected, "restarts of {}", run.task);
    }
    let read = live.read_and_audit().await;
    live.assert_state_is_the_fold(&read, &plan);
}

// ----- failover by group membership -----

/// Waits until `log` holds `line`, for up to `patience`.
async fn wait_for_log(log: &std::path::Path, line: &str, patience: Duration) -> bool {
    let until = std::time::Instant::now() + patience;
    while std::time::Instant::now() < until {
        if std::fs::read_to_string(log).is_ok_and(|text| text.contains(line)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// Issue 13's failover, with input flowing: two instances share balances'
/// four tasks through the group `<app>.instances`; one is killed (-9) and
/// its tasks come up on the other without anyone acting, within the session
/// timeout plus restore time; a third instance joins and takes tasks over
/// from the survivor. Lag returns to zero after each, and everything
/// committed audits clean and folds to the inputs.
#[tokio::test(flavor = "multi_thread")]
async fn group_membership_moves_a_dead_instances_tasks_and_gives_a_new_one_its_share() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Balances, "failover", 4).await;
    let logs = std::env::temp_dir().join(&live.namespace);
    std::fs::create_dir_all(&logs).expect("a log directory");
    let (log_a, log_b, log_c) = (logs.join("a.log"), logs.join("b.log"), logs.join("c.log"));
    let mut a = live
        .group_command(&log_a)
        .spawn()
        .expect("spawn instance a");
    let mut b = live
        .group_command(&log_b)
        .spawn()
        .expect("spawn instance b");
    let taking = "group rebalance: taking tasks";
    for log in [&log_a, &log_b] {
        assert!(
            wait_for_log(log, taking, PATIENCE).await,
            "{} took no task: {}",
            log.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
    let mut plan = live.produce(300, 31).await;
    live.wait_caught_up().await;

    b.kill().expect("kill -9 instance b");
    b.wait().expect("instance b is gone");
    let killed = std::time::Instant::now();
    for seed in 32..36 {
        plan.extend(live.produce(100, seed).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    live.wait_caught_up().await;
    eprintln!(
        "{}: caught up {:.1}s after instance b was killed",
        live.namespace,
        killed.elapsed().as_secs_f64()
    );
    assert!(
        a.try_wait().expect("status").is_none(),
        "instance a runs on"
    );

    let mut c = live
        .group_command(&log_c)
        .spawn()
        .expect("spawn instance c");
    assert!(
        wait_for_log(&log_c, taking, PATIENCE).await,
        "the new instance took no task: {}",
        std::fs::read_to_string(&log_c).unwrap_or_default()
    );
    assert!(
        wait_for_log(&log_a, "group rebalance: releasing tasks", PATIENCE).await,
        "the survivor released nothing to the new instance"
    );
    plan.extend(live.produce(300, 36).await);
    live.wait_caught_up().await;
    terminate(&mut a);
    terminate(&mut c);
    let read = live.read_and_audit().await;
    live.assert_state_is_the_fold(&read, &plan);
    if std::env::var_os("PARSLEY_KEEP_LOGS").is_none() {
        let _ = std::fs::remove_dir_all(&logs);
    }
}

// ----- past a poison record -----

/// X5's operator path on a real broker. The stage declares its dead-letter
/// topic: orders its logic refuses (negative amounts) go there with their
/// error while the task runs on. A record whose claim can never resolve
/// (G6) still stops the instance, exit code 1, with its committed position
/// before it; `parsley-live skip` dead-letters that one record as skipped,
/// and the instance started again drains the rest. Everything committed
/// audits clean, the dead-letter topic holds exactly the refused and the
/// skipped records, and the state is the fold of the accepted orders.
#[tokio::test(flavor = "multi_thread")]
async fn x5_dead_letters_and_the_skip_command_get_past_poison_records() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::DeadLetter, "dlq", 2).await;
    let producer = live.client.plain_producer().expect("a producer");
    let orders = live.topology.inputs[0].name.clone();
    let append = |key: &str, amount: i64, headers: Vec<parsley::Header>| {
        let (key, value) = live.topology.encode_input(0, key, amount);
        let data = parsley::RecordData {
            key: Some(key),
            value: Some(value),
            headers,
            timestamp: 0,
        };
        let tp = parsley::Tp::new(orders.clone(), 0);
        let producer = &producer;
        async move { producer.append(&tp, &data).await.expect("appended") }
    };
    let mut plan = live.produce(100, 41).await;
    let refused = [
        append("account-1", -5, vec![]).await,
        append("account-2", -7, vec![]).await,
    ];
    // A claim far beyond the log end of its own tp: it never resolves (G6).
    let beyond = parsley::Claim::new(parsley::Tp::new(orders.clone(), 0), 1_000_000);
    let stamp = parsley::header::stamp_header(&parsley::Stamp::from_claims([beyond]));
    let poison = append("account-3", 9, vec![stamp]).await;
    let after = live.produce(100, 42).await;

    let mut first = live.command("0/1").spawn().expect("spawn parsley-live");
    let until = std::time::Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = first.try_wait().expect("status") {
            break status;
        }
        assert!(
            std::time::Instant::now() < until,
            "the poison record did not stop the instance"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        status.code(),
        Some(1),
        "a stopped task stops the instance with exit code 1"
    );

    let skip = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_parsley-live"))
            .args(["skip", "dead-letter", "--namespace", &live.namespace])
            .args(["--bootstrap", &live.client.config().bootstrap_servers])
            .args([
                "--stage",
                "balances",
                "--topic",
                "orders",
                "--partition",
                "0",
            ])
            .args(["--offset", &poison.to_string()])
            .output()
            .expect("parsley-live skip")
    };
    let skipped = skip();
    let said = String::from_utf8_lossy(&skipped.stdout);
    assert!(
        skipped.status.success() && said.contains(&format!("@{poison} dead-lettered as skipped")),
        "skip: {said} {}",
        String::from_utf8_lossy(&skipped.stderr)
    );
    // Skipping it again is refused before anything is done (exit 2): it is
    // behind the committed position.
    let again = skip();
    assert_eq!(
        again.status.code(),
        Some(2),
        "a second skip of the same record is refused"
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("delivered already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    let mut second = live.command("0/1").spawn().expect("spawn parsley-live");
    live.wait_caught_up().await;
    terminate(&mut second);
    plan.extend(after);

    let read = live.read_and_audit().await;
    live.assert_state_is_the_fold(&read, &plan);
    let dlq = format!("{}-balances-dlq", live.topology.app.id());
    let mut dead: Vec<(parsley::DeadLetterKind, u64)> = read
        .topic(&dlq)
        .iter()
        .map(|(_, record)| {
            let letter = parsley::DeadLetter::from_record(&record.data).expect("a dead letter");
            (letter.kind, letter.offset)
        })
        .collect();
    dead.sort_by_key(|(_, offset)| *offset);
    let expected = vec![
        (parsley::DeadLetterKind::Logic, refused[0]),
        (parsley::DeadLetterKind::Logic, refused[1]),
        (parsley::DeadLetterKind::Skipped, poison),
    ];
    assert_eq!(
        dead, expected,
        "the dead-letter topic holds the refused and the skipped records"
    );
}

// ----- conformance -----

/// The same inputs through the TestDriver: the committed logs of its model.
fn under_the_test_driver(live: &Live, read: &ReadBack) -> CommittedLogs {
    let app = &live.topology.app;
    let mut builder = TestDriver::builder(app);
    for (topic, partitions) in &live.assembly.partitions {
        builder = builder.partitions(topic.as_str(), *partitions);
    }
    let driver = builder.build().expect("driver");
    // Input by input topic, each partition in offset order: the offsets come
    // out as they are live, so the fan-in's claims name the same records.
    for input in &live.topology.inputs {
        let handle = driver.input_raw(input.name.as_str()).expect("input");
        for (tp, record) in read.topic(input.name.as_str()) {
            let data = record.data.clone();
            let (landed, offset) = handle
                .pipe_raw(tp.partition, data.key, data.value, data.headers)
                .expect("pipe");
            assert_eq!((landed.partition, offset), (tp.partition, record.offset));
        }
    }
    let cluster = driver.cluster();
    let assembly = assemble(app, &*cluster).expect("the driver's assembly");
    committed_logs(&cluster, app, &assembly)
}

async fn conformance(name: TopologyName, kind: &str) {
    let Some(live) = test_broker() else { return };
    let live = set_up(&live, name, kind, 2).await;
    live.produce(300, 7).await;
    let runtime = Runtime::start(
        Arc::new(live.topology.app.clone()),
        RuntimeConfig::new(live.client.config().clone()),
    )
    .await
    .expect("start");
    live.wait_caught_up().await;
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop");
    }
    let read = live.read_and_audit().await;
    let driven = under_the_test_driver(&live, &read);
    let logs = read.to_logs();
    let app = &live.topology.app;
    assert_eq!(
        final_state(&logs, app),
        final_state(&driven, app),
        "state per key"
    );
    let outputs = keyed_outputs(&logs, app);
    assert_eq!(
        outputs,
        keyed_outputs(&driven, app),
        "keyed outputs per key"
    );
    assert!(
        !final_state(&logs, app).is_empty() || !outputs.is_empty(),
        "the comparison compared something"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn conformance_balances_live_matches_the_test_driver() {
    conformance(TopologyName::Balances, "conf-balances").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn conformance_fan_in_live_matches_the_test_driver() {
    conformance(TopologyName::FanIn, "conf-fan-in").await;
}

/// The audit cut folds balances per account as `balances` does; its cuts
/// (keyless, every fifth tick) follow the wall clock and are left to the
/// audit, which also checks the tick slot's changelog against the ticks.
#[tokio::test(flavor = "multi_thread")]
async fn conformance_audit_cut_live_matches_the_test_driver() {
    conformance(TopologyName::AuditCut, "conf-audit-cut").await;
}

/// The chain's middle stage ticks without a key: how many ticks there are
/// depends on the wall clock, so they are left to the audit.
#[tokio::test(flavor = "multi_thread")]
async fn conformance_chain_live_matches_the_test_driver() {
    conformance(TopologyName::Chain, "conf-chain").await;
}

// ----- timers (K2) -----

/// K2 live: the stage asks for a timer per order, the application's timer
/// service fires each when due, and the stage releases the reservation.
/// Every request fires exactly once (read back from the committed fire
/// topic, independently of the runtime), and every reservation is released
/// exactly once: the expiries sum to the orders' totals and no slot is left
/// holding anything.
#[tokio::test(flavor = "multi_thread")]
async fn k2_timers_run_live_with_the_timer_service() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Timers, "timers", 2).await;
    let plan = live.produce(100, 3).await;
    let runtime = Runtime::start(
        Arc::new(live.topology.app.clone()),
        RuntimeConfig::new(config.clone()),
    )
    .await
    .expect("start");
    let timers = live.topology.timers.clone().expect("the timer topics");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let read = read_committed(&live.client, &live.topology.app, &live.assembly)
            .await
            .expect("read back");
        let fired = read.topic(timers.fires.name().as_str()).len();
        if fired >= plan.len() {
            assert_eq!(fired, plan.len(), "every request fires exactly once");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{fired} of {} timers fired",
            plan.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    live.wait_caught_up().await;
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop");
    }
    let read = live.read_and_audit().await;
    let released: i64 = read
        .topic(timers.expiries.name().as_str())
        .iter()
        .map(|(_, record)| {
            let value = record.data.value.clone().unwrap_or_default();
            parsley::Codec::<i64>::decode(&parsley::I64, &value).expect("an amount")
        })
        .sum();
    let ordered: i64 = plan.iter().map(|input| input.amount).sum();
    assert_eq!(released, ordered, "every reservation is released once");
    let held = final_state(&read.to_logs(), &live.topology.app);
    assert!(held.is_empty(), "reservations still held: {held:?}");
}

// ----- kill -9 -----

/// X3, G7, T6, S6: SIGKILL at random points, five times, restarting each
/// time; then every output and changelog is read back and checked. Each
/// task's local store checkpoints at every commit (`--checkpoint-every 1`:
/// an fsync of the store, then the checkpoint file written whole), so the
/// kills fall among flushes; after them, every account's balance asked of
/// the last instance, which answers from its restored local stores, is the
/// fold of the input, and some start restored from a store kept on disk.
#[tokio::test(flavor = "multi_thread")]
async fn kill_9_five_times_loses_and_repeats_nothing() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Balances, "kill9", 4).await;
    let dir = std::env::temp_dir().join(format!("{}state", live.namespace));
    let logs: Vec<std::path::PathBuf> = (0..6)
        .map(|round| dir.join(format!("run-{round}.log")))
        .collect();
    std::fs::create_dir_all(&dir).expect("a state directory");
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let spawn = |round: usize| {
        let log = std::fs::File::create(&logs[round]).expect("a log file");
        live.command("0/1")
            .args(["--checkpoint-every", "1", "--metrics", &address])
            .arg("--state-dir")
            .arg(&dir)
            .stderr(log)
            .spawn()
            .expect("spawn parsley-live")
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let mut plan = Vec::new();
    for round in 0..5u64 {
        plan.extend(live.produce(400, round).await);
        let mut child = spawn(round as usize);
        let after = Duration::from_millis(700 + rng.next_u64() % 2000);
        tokio::time::sleep(after).await;
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        eprintln!("round {round}: killed after {after:?}");
    }
    let mut child = spawn(5);
    live.wait_caught_up().await;
    let expected = expected_balances(&live.topology, &plan).expect("a per-key sum");
    let deadline = std::time::Instant::now() + PATIENCE;
    for (account, balance) in &expected {
        loop {
            let answered = query(&address, &format!("/query/balances/{account}"));
            if answered == Some(*balance) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{}: account {account} answers {answered:?} from its restored store, not {balance} (logs in {})",
                live.namespace,
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    terminate(&mut child);
    let restores: Vec<String> = logs
        .iter()
        .flat_map(|log| {
            std::fs::read_to_string(log)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|line| line.contains("state restored"))
        .collect();
    let from_stores = restores
        .iter()
        .filter(|line| line.contains("rebuilt=false") && !line.contains("from_store=0"))
        .count();
    eprintln!(
        "{} starts of a task, {from_stores} of them from a store kept on disk",
        restores.len()
    );
    assert!(
        from_stores > 0,
        "no start restored from a store kept on disk: {restores:#?}"
    );
    let read = live.read_and_audit().await;
    live.assert_state_is_the_fold(&read, &plan);
    std::fs::remove_dir_all(&dir).expect("the state directory removed");
}

/// The balance `GET path` on `address` answers; `None` while no instance
/// answers it.
fn query(address: &str, path: &str) -> Option<i64> {
    let got = get(address, path).filter(|got| got.status == 200)?;
    balance_of(&serde_json::from_str(&got.body).ok()?)
}

// ----- scale-out -----

/// Two instances share the tasks (static shares 0/2 and 1/2); one is killed
/// with SIGKILL and a replacement takes its share, fencing the dead
/// instance's producers (X4). The result is as if one instance ran.
#[tokio::test(flavor = "multi_thread")]
async fn two_instances_share_the_tasks_and_survive_losing_one() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Balances, "scale", 4).await;
    let mut plan = live.produce(600, 1).await;
    let mut first = live.command("0/2").spawn().expect("spawn instance 0");
    let mut second = live.command("1/2").spawn().expect("spawn instance 1");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    second.kill().expect("SIGKILL");
    second.wait().expect("reaped");
    plan.extend(live.produce(600, 2).await);
    let mut replacement = live.command("1/2").spawn().expect("spawn the replacement");
    live.wait_caught_up().await;
    terminate(&mut first);
    terminate(&mut replacement);
    let read = live.read_and_audit().await;
    live.assert_state_is_the_fold(&read, &plan);
}

// ----- two stages on one source (X6) -----

/// X6 live: in the diamond, `enrich` and `score` both consume `events`.
/// Three instances deal the tasks so that `score/0` (on instance 2/3) and
/// `enrich/0` (on 0/3) read `events-0` from different processes. Instance
/// 2/3 is killed with SIGKILL while input keeps flowing and `enrich/0`
/// keeps committing, then replaced. Each stage resumes from its own group's
/// position: every event is counted exactly once (`scored` runs 1, 2, …, n
/// per key), and the audit of everything committed is clean.
#[tokio::test(flavor = "multi_thread")]
async fn x6_a_stage_killed_beside_a_sibling_on_the_same_source_loses_and_repeats_nothing() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Diamond, "fan-out", 2).await;
    let mut plan = live.produce(200, 21).await;
    let mut first = live.command("0/3").spawn().expect("spawn instance 0");
    let mut second = live.command("1/3").spawn().expect("spawn instance 1");
    let mut third = live.command("2/3").spawn().expect("spawn instance 2");
    plan.extend(live.produce(200, 22).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    third.kill().expect("SIGKILL");
    third.wait().expect("reaped");
    // `enrich/0` goes on past where `score/0` stopped.
    plan.extend(live.produce(200, 23).await);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut replacement = live.command("2/3").spawn().expect("spawn the replacement");
    plan.extend(live.produce(200, 24).await);
    live.wait_caught_up().await;
    terminate(&mut first);
    terminate(&mut second);
    terminate(&mut replacement);
    let read = live.read_and_audit().await;

    let mut per_key: BTreeMap<String, i64> = BTreeMap::new();
    for input in &plan {
        *per_key.entry(input.key.clone()).or_default() += 1;
    }
    let scored = live.namespace.clone() + "scored";
    let outputs = keyed_outputs(&read.to_logs(), &live.topology.app);
    for (key, count) in per_key {
        let counts: Vec<i64> = outputs
            .get(&(scored.clone(), bytes::Bytes::from(key.clone())))
            .map(|values| {
                values
                    .iter()
                    .map(|value| parsley::Codec::<i64>::decode(&parsley::I64, value).unwrap())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            counts,
            (1..=count).collect::<Vec<_>>(),
            "{}: the counts of {key} skip or repeat an event",
            live.namespace
        );
    }
}

#[test]
fn shares_deal_every_task_to_exactly_one_instance() {
    let topology = namespaced(TopologyName::Chain, "x-", TICK).expect("chain");
    let partitions: BTreeMap<String, u32> = parsley::TopicContract::list(&topology.app)
        .into_iter()
        .map(|contract| (contract.name.to_string(), 3))
        .collect();
    let assembly = assemble(&topology.app, &partitions).expect("assembles");
    let all = assembly.task_ids();
    assert_eq!(all.len(), 9, "three stages of three tasks");
    let mut dealt: Vec<_> = (0..2)
        .flat_map(|index| {
            parsley_live::InstanceShare::new(index, 2)
                .unwrap()
                .tasks(&assembly)
        })
        .collect();
    dealt.sort();
    let mut expected = all.clone();
    expected.sort();
    assert_eq!(dealt, expected);
    assert!(parsley_live::InstanceShare::new(2, 2).is_err());
    assert!(parsley_live::InstanceShare::new(0, 0).is_err());
}

// ----- metrics -----

/// The body of an HTTP GET of `address`'s `/metrics`, or `None` while
/// nothing answers.
fn scrape(address: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: parsley\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// A metric's value per task, from the Prometheus text of one scrape.
fn per_task(body: &str, metric: &str, app: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter_map(|line| line.strip_prefix(metric)?.strip_prefix('{'))
        .filter(|rest| rest.contains(&format!("app=\"{app}\"")))
        .filter_map(|rest| {
            let (labels, value) = rest.split_once("} ")?;
            let task = labels.split("task=\"").nth(1)?.split('"').next()?;
            Some((task.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Operators see each task's figures: `status` reads every task behind
/// before an instance runs; while it runs, the Prometheus text shows
/// deliveries climbing and the consumer lag drained to zero once it has
/// caught up; and `status` then reads every task caught up, with lag 0.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_and_status_show_lag_draining_to_zero() {
    let Some(config) = test_broker() else { return };
    let live = set_up(&config, TopologyName::Balances, "metrics", 2).await;
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    live.produce(400, 3).await;
    // Before any instance runs, the cluster shows every task behind.
    let before = status(&live);
    assert!(
        before.iter().all(|row| row.ends_with("behind")) && before.len() == 2,
        "{before:#?}"
    );
    let mut child = live
        .command("0/1")
        .args(["--metrics", &address])
        .spawn()
        .expect("spawn parsley-live");
    live.wait_caught_up().await;
    let app = live.topology.app.id().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (delivered, lag) = loop {
        let body = scrape(&address).unwrap_or_default();
        let delivered = per_task(&body, "parsley_records_delivered_total", &app);
        let lag = per_task(&body, "parsley_consumer_lag", &app);
        let total: f64 = delivered.values().sum();
        if (total >= 400.0 && lag.len() == 2 && lag.values().all(|lag| *lag == 0.0))
            || std::time::Instant::now() > deadline
        {
            break (delivered, lag);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    terminate(&mut child);
    assert_eq!(
        delivered.keys().collect::<Vec<_>>(),
        ["balances/0", "balances/1"],
        "{delivered:?}"
    );
    assert!(delivered.values().sum::<f64>() >= 400.0, "{delivered:?}");
    assert_eq!(
        lag.values().copied().collect::<Vec<_>>(),
        [0.0, 0.0],
        "{lag:?}"
    );
    // And after, caught up with no lag, from the cluster alone.
    let after = status(&live);
    assert_eq!(after.len(), 2, "{after:#?}");
    for row in &after {
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(columns[4], "0", "{row}");
        assert!(row.ends_with("caught up"), "{row}");
    }
}

/// `parsley-live status`'s task rows for this namespace.
fn status(live: &Live) -> Vec<String> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_parsley-live"))
        .args(["status", "balances", "--namespace", &live.namespace])
        .args(["--bootstrap", &live.client.config().bootstrap_servers])
        .output()
        .expect("parsley-live status runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}
