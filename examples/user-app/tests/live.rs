//! The application's own binary on a real broker (`KAFKA_BOOTSTRAP_SERVERS`,
//! e.g. from `scripts/kafka/broker.sh` of the Parsley repository): two
//! instances under group membership, input flowing the whole time, one
//! instance killed with SIGKILL mid-stream. Afterwards, read back from the
//! committed topics independently of the runtime: every timer request fired
//! exactly once, never before its time; every task's lag is zero; the audit
//! is clean; the surviving instance stops gracefully.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parsley::Assembly;
use parsley::{Codec, I64};
use parsley_live::{assemble_on, read_committed, task_status, test_broker, LiveClient, ReadBack};
use parsley_user_app::{app, Topics};

const GAP_MS: &str = "1500";
const BIN: &str = env!("CARGO_BIN_EXE_parsley-user-app");

fn command(bootstrap: &str, namespace: &str, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .args(["--namespace", namespace, "--bootstrap", bootstrap])
        .args(["--set", &format!("gap-ms={GAP_MS}")]);
    command
}

fn instance(bootstrap: &str, namespace: &str) -> Child {
    command(bootstrap, namespace, &["run", "fraud-watch"])
        .args(["--session-timeout-ms", "6000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn an instance")
}

/// The requests and fires committed, by (key, time): each request must
/// have exactly one fire.
fn timers(read: &ReadBack, topics: &Topics) -> (BTreeMap<(Vec<u8>, i64), usize>, Vec<String>) {
    let time = |bytes: &Option<bytes::Bytes>| {
        Codec::<i64>::decode(&I64, bytes.as_deref().unwrap_or_default()).expect("a time")
    };
    let mut count: BTreeMap<(Vec<u8>, i64), usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (_, request) in read.topic(topics.requests.name().as_str()) {
        let key = request.data.key.as_deref().unwrap_or_default().to_vec();
        *count.entry((key, time(&request.data.value))).or_default() += 1;
    }
    for (tp, fire) in read.topic(topics.fires.name().as_str()) {
        let key = fire.data.key.as_deref().unwrap_or_default().to_vec();
        let at = time(&fire.data.value);
        if fire.data.timestamp < at {
            problems.push(format!(
                "{tp}@{} fired at {} before its time {at}",
                fire.offset, fire.data.timestamp
            ));
        }
        match count.get_mut(&(key, at)) {
            Some(left) if *left > 0 => *left -= 1,
            _ => problems.push(format!(
                "{tp}@{} fires a timer no request asked for, or twice",
                fire.offset
            )),
        }
    }
    count.retain(|_, left| *left > 0);
    (count, problems)
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_one_of_two_instances_under_flowing_input_fires_every_timer_once() {
    let Some(config) = test_broker() else { return };
    let bootstrap = config.bootstrap_servers.clone();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let namespace = format!("user-{nanos:x}-");
    let setup = command(
        &bootstrap,
        &namespace,
        &["setup", "fraud-watch", "--partitions", "2"],
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
    // Input flows the whole time: a batch every 300 ms until told to stop.
    let flowing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (flowing, bootstrap, namespace) =
            (Arc::clone(&flowing), bootstrap.clone(), namespace.clone());
        std::thread::spawn(move || {
            let mut batches = 0u64;
            while flowing.load(Ordering::Relaxed) {
                let seed = batches.to_string();
                let produced = command(&bootstrap, &namespace, &["produce", "fraud-watch"])
                    .args(["--count", "40", "--keys", "12", "--seed", &seed])
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
    // timeout, while input keeps coming.
    tokio::time::sleep(Duration::from_secs(14)).await;
    flowing.store(false, Ordering::Relaxed);
    let batches = producer.join().expect("the producer");
    assert!(batches >= 10, "input flowed: {batches} batches");

    let topics = Topics::new(&namespace);
    let app = app(&namespace, &topics, GAP_MS.parse().unwrap()).unwrap();
    let client = LiveClient::new(config).expect("client");
    let assembly: Assembly = assemble_on(&client, &app).await.expect("assembled");
    let deadline = Instant::now() + Duration::from_secs(120);
    let read = loop {
        assert!(
            second.try_wait().expect("status").is_none(),
            "the surviving instance exited"
        );
        let read = read_committed(&client, &app, &assembly)
            .await
            .expect("read back");
        let (unfired, problems) = timers(&read, &topics);
        assert!(problems.is_empty(), "{problems:#?}");
        let statuses = task_status(&client, &app, &assembly).await.expect("status");
        let lag: u64 = statuses.iter().map(|task| task.lag()).sum();
        if unfired.is_empty() && lag == 0 {
            break read;
        }
        assert!(
            Instant::now() < deadline,
            "{} requests not fired, lag {lag} after the input stopped",
            unfired.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let requests = read.topic(topics.requests.name().as_str()).len();
    assert!(requests > 200, "{requests} timer requests");

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
    let (unfired, problems) = timers(&read, &topics);
    assert!(
        problems.is_empty() && unfired.is_empty(),
        "{problems:#?} {unfired:?}"
    );
    let report = parsley::audit::audit(&app, &assembly, &read.to_logs());
    assert!(report.is_clean(), "{report}");
}
