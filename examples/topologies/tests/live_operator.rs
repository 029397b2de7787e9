//! The operator's input and output (issue 21 item 6), through the
//! `parsley-live` binary: settings out of range refused at start, an
//! address that accepts and stays silent said unreachable, a skip refused
//! before it fences anyone, a mis-sized topic refused by `setup`, `status`
//! with owners and `--json`, and one meaning per exit code. The tests that
//! need a broker skip without one (`KAFKA_BOOTSTRAP_SERVERS`).

#![cfg(feature = "live")]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use parsley_live::{test_broker, LiveClient};

fn parsley_live(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_parsley-live"))
        .args(args)
        .env("PARSLEY_LOG", "warn")
        .output()
        .expect("parsley-live runs");
    (output, started.elapsed())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A namespace no other run uses.
fn namespace(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("op-{test}-{}-{nanos}-", std::process::id())
}

/// Pins item 1: a value out of range is refused before anything runs,
/// with exit code 2 and a message naming the flag, the value and the
/// range; no cluster is needed (the address given is never dialled).
#[test]
fn settings_out_of_range_are_refused_at_start_with_the_range() {
    for (args, flag, range) in [
        (
            vec!["--session-timeout-ms", "1000"],
            "--session-timeout-ms",
            "6000..=300000",
        ),
        (
            vec!["--session-timeout-ms", "300001"],
            "--session-timeout-ms",
            "6000..=300000",
        ),
        (
            vec!["--commit-interval-ms", "0"],
            "--commit-interval-ms",
            "1..=30000",
        ),
        (
            vec!["--commit-interval-ms", "60000"],
            "--commit-interval-ms",
            "1..=30000",
        ),
    ] {
        let mut command = vec!["run", "balances", "--bootstrap", "127.0.0.1:1"];
        command.extend(&args);
        let (output, took) = parsley_live(&command);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(flag), "{text}");
        assert!(text.contains(args[1]), "{text}");
        assert!(text.contains(range), "{text}");
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
    }
    let (output, _) = parsley_live(&["setup", "balances", "--partitions", "0"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--partitions"),
        "{}",
        stderr(&output)
    );
}

/// Pins item 10: `--metrics` takes a host name, and refuses one that does
/// not resolve with exit 2 naming it; `--on-failure` (item 9) takes the two
/// policies and refuses anything else.
#[test]
fn metrics_take_a_host_name_and_on_failure_a_policy() {
    let (output, took) = parsley_live(&[
        "run",
        "balances",
        "--bootstrap",
        "127.0.0.1:1",
        "--metrics",
        "no-such-host.invalid:9464",
    ]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("no-such-host.invalid:9464"), "{text}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // A host name that resolves passes parsing: the run goes on to the
    // cluster, which is unreachable (exit 4), not a refused argument.
    let (output, _) = parsley_live(&[
        "run",
        "balances",
        "--bootstrap",
        "127.0.0.1:1",
        "--metrics",
        "localhost:0",
        "--on-failure",
        "keep-others-running",
    ]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let (output, _) = parsley_live(&["run", "balances", "--on-failure", "retry"]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("stop-instance") && text.contains("keep-others-running"),
        "{text}"
    );
}

/// Pins item 2: an address that accepts TCP connections and never answers
/// fails with exit code 4 naming the address, within the 10 s connect
/// bound (it took 30 s and exited 2, naming no address, before).
#[test]
fn a_silent_listener_is_unreachable_naming_it_within_the_connect_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            // Accept, never write: hold the connection open.
            held.push(stream);
        }
    });
    let (output, took) = parsley_live(&["status", "balances", "--bootstrap", &address]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(4), "{text}");
    assert!(text.contains(&address), "{text}");
    assert!(text.contains("no Kafka answer"), "{text}");
    assert!(took < Duration::from_secs(14), "took {took:?}");
}

/// Pins item 4 without a broker: the same unreachable cluster is exit 4
/// for every command, `skip` included.
#[test]
fn an_unreachable_cluster_is_exit_4_for_every_command() {
    for command in [
        vec!["setup", "balances"],
        vec!["status", "balances"],
        vec!["audit", "balances"],
        vec![
            "skip",
            "dead-letter",
            "--stage",
            "balances",
            "--topic",
            "orders",
            "--partition",
            "0",
            "--offset",
            "0",
        ],
    ] {
        let mut args = command.clone();
        args.extend(["--bootstrap", "127.0.0.1:1"]);
        let (output, _) = parsley_live(&args);
        assert_eq!(
            output.status.code(),
            Some(4),
            "{command:?}: {}",
            stderr(&output)
        );
    }
}

/// Issue 29, item 5: a refused connection says "refused" and how soon it
/// was (milliseconds, not the 10 s bound); an address that drops
/// connection attempts (a listener whose accept queue is full, as behind a
/// firewall) says it timed out, after the 10 s bound. Both exit 4.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_refused_at_once_and_a_dropped_one_times_out() {
    let (output, took) = parsley_live(&["status", "balances", "--bootstrap", "127.0.0.1:1"]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(4), "{text}");
    assert!(
        text.contains("127.0.0.1:1: connection refused after ") && text.contains(" ms: "),
        "{text}"
    );
    assert!(
        !text.contains("timed out") && !text.contains("within"),
        "{text}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");

    // Backlog 0 and one connection waiting: Linux drops every further SYN.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let _filler = std::net::TcpStream::connect(&address).unwrap();
    let (output, took) = parsley_live(&["status", "balances", "--bootstrap", &address]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(4), "{text}");
    assert!(
        text.contains(&format!(
            "{address}: no answer: the connection timed out after 10."
        )),
        "{text}"
    );
    assert!(!text.contains("refused"), "{text}");
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(15),
        "took {took:?}"
    );
    drop(listener);
}

fn broker() -> Option<String> {
    test_broker().map(|config| config.bootstrap_servers)
}

fn set_up(bootstrap: &str, app: &str, ns: &str, partitions: &str) {
    let (output, _) = parsley_live(&[
        "setup",
        app,
        "--namespace",
        ns,
        "--partitions",
        partitions,
        "--bootstrap",
        bootstrap,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

/// Pins items 3 and 4 on the real broker: a skip to an offset beyond the
/// log end is refused at once (it blocked 184 s before) with exit 2,
/// naming the tp, the offset and the log end; it does so before its
/// producer could fence the instance running the task, which here has a
/// static share and would exit 3 if fenced. A skip on a stage without a
/// dead-letter topic, or of an unusable cluster (no topics), is exit 2
/// too, as every refused command is.
#[test]
fn a_skip_beyond_the_log_end_is_refused_at_once_and_fences_nobody() {
    let Some(bootstrap) = broker() else { return };
    let ns = namespace("skip");
    let skip = |app: &str, ns: &str, offset: &str| {
        parsley_live(&[
            "skip",
            app,
            "--namespace",
            ns,
            "--stage",
            "balances",
            "--topic",
            "orders",
            "--partition",
            "0",
            "--offset",
            offset,
            "--bootstrap",
            &bootstrap,
        ])
    };
    // No topics: an unusable cluster is 2, as for every other command.
    let (output, _) = skip("dead-letter", &ns, "0");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("does not exist"),
        "{}",
        stderr(&output)
    );

    set_up(&bootstrap, "dead-letter", &ns, "1");
    let (output, _) = parsley_live(&[
        "produce",
        "dead-letter",
        "--namespace",
        &ns,
        "--count",
        "20",
        "--bootstrap",
        &bootstrap,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let mut instance = Command::new(env!("CARGO_BIN_EXE_parsley-live"))
        .args([
            "run",
            "dead-letter",
            "--namespace",
            &ns,
            "--instance",
            "0/1",
            "--bootstrap",
            &bootstrap,
        ])
        .env("PARSLEY_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("parsley-live runs");
    std::thread::sleep(Duration::from_secs(5));

    let (output, took) = skip("dead-letter", &ns, "1000000");
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    let tp = format!("{ns}orders-0");
    assert!(text.contains(&format!("{tp}@1000000")), "{text}");
    assert!(text.contains("log end"), "{text}");
    assert!(text.contains("nothing was skipped"), "{text}");
    assert!(took < Duration::from_secs(15), "took {took:?}");

    // The running instance was not fenced: stopped now, it exits 0, not 3.
    let code = stop(&mut instance);
    assert_eq!(code.0, Some(0), "the instance: {}", code.1);
    assert!(!code.1.contains("fenced"), "{}", code.1);

    // Issue 29: a partition the topic does not have is refused, naming
    // the topic's partition count.
    let (output, _) = parsley_live(&[
        "skip",
        "dead-letter",
        "--namespace",
        &ns,
        "--stage",
        "balances",
        "--topic",
        "orders",
        "--partition",
        "9",
        "--offset",
        "0",
        "--bootstrap",
        &bootstrap,
    ]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!("does not consume {ns}orders-9")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "topic `{ns}orders` has 1 partition (partition 0), no partition 9"
        )),
        "{text}"
    );
    assert!(text.contains("nothing was skipped"), "{text}");

    // A stage without a dead-letter topic: refused, 2.
    let plain = namespace("skip-plain");
    set_up(&bootstrap, "balances", &plain, "1");
    let (output, _) = skip("balances", &plain, "0");
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("no dead-letter topic"), "{text}");
}

/// SIGINT to a child, then its exit code and stdout and stderr.
fn stop(child: &mut Child) -> (Option<i32>, String) {
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-INT", &pid]).status();
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "the instance did not stop");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    (status.code(), text)
}

/// Pins item 5 on the real broker: `setup` refuses a derived topic that
/// exists with the wrong partition count (it printed `exists` and exited 0
/// before), naming the topic, its count and the expected one, creates
/// nothing, and says that recreating a changelog discards the stage's
/// state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_refuses_a_mis_sized_topic_and_says_what_recreating_it_loses() {
    let Some(bootstrap) = broker() else { return };
    let ns = namespace("setup");
    let client = LiveClient::new(parsley_live::LiveConfig::new(bootstrap.clone())).unwrap();
    let changelog = format!("{ns}payments-balances-state-changelog");
    client.create_topic(&changelog, 3).await.unwrap();
    let (output, took) = parsley_live(&[
        "setup",
        "balances",
        "--namespace",
        &ns,
        "--partitions",
        "2",
        "--bootstrap",
        &bootstrap,
    ]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!("{changelog:?}")) && text.contains("has 3 partitions, expected 2"),
        "{text}"
    );
    assert!(
        text.contains("discards stage \"balances\"'s state"),
        "{text}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(
        client.partitions(&format!("{ns}orders")).await.unwrap(),
        None,
        "nothing is created when setup is refused"
    );
    // An existing source asked for with another count is refused too.
    let other = namespace("setup-src");
    client
        .create_topic(&format!("{other}orders"), 1)
        .await
        .unwrap();
    let (output, _) = parsley_live(&[
        "setup",
        "balances",
        "--namespace",
        &other,
        "--partitions",
        "2",
        "--bootstrap",
        &bootstrap,
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("has 1 partitions, expected 2"),
        "{}",
        stderr(&output)
    );
    // Left out, the existing source is used as it is.
    let (output, _) = parsley_live(&[
        "setup",
        "balances",
        "--namespace",
        &other,
        "--bootstrap",
        &bootstrap,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains(&format!("exists {other}orders (1 partitions)")));
}

/// Pins item 8 on the real broker: `status --json` is one JSON document
/// with, per task, its owner (`-` with no instance running), state
/// (`unowned`), and per tp the committed offset, log end, lag and whether
/// the lag is exact; the table has an owner column.
#[test]
fn status_json_names_owner_state_and_positions() {
    let Some(bootstrap) = broker() else { return };
    let ns = namespace("status");
    set_up(&bootstrap, "balances", &ns, "2");
    let (output, _) = parsley_live(&[
        "produce",
        "balances",
        "--namespace",
        &ns,
        "--count",
        "10",
        "--bootstrap",
        &bootstrap,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (output, _) = parsley_live(&[
        "status",
        "balances",
        "--namespace",
        &ns,
        "--json",
        "--bootstrap",
        &bootstrap,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let document: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(document["app"], format!("{ns}payments"));
    let tasks = document["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 2);
    let mut produced = 0;
    for (partition, task) in tasks.iter().enumerate() {
        assert_eq!(task["task"], format!("balances/{partition}"));
        assert_eq!(task["owner"], "-");
        assert_eq!(task["state"], "unowned");
        assert!(task["since_ms"].is_null());
        let tps = task["tps"].as_array().expect("tps");
        assert_eq!(tps.len(), 1);
        let tp = &tps[0];
        assert_eq!(tp["tp"], format!("{ns}orders-{partition}"));
        assert!(tp["committed"].is_null());
        assert_eq!(tp["lag"], tp["log_end"]);
        assert_eq!(tp["exact"], true);
        produced += tp["log_end"].as_u64().unwrap();
    }
    assert_eq!(produced, 10);
    let (output, _) = parsley_live(&[
        "status",
        "balances",
        "--namespace",
        &ns,
        "--bootstrap",
        &bootstrap,
    ]);
    let table = stdout(&output);
    assert!(table.lines().next().unwrap().contains("owner"), "{table}");
    assert!(table.contains("unowned, behind"), "{table}");
}

/// Issue 29, item 5: during a failover the new owner's producer waits for
/// the coordinator to abort the transaction the dead owner (killed with
/// `kill -9` under flowing input) left open. librdkafka's repeated `Failed
/// to acquire transactional PID … concurrent operation` warnings are
/// replaced by one INFO line per task, naming the task, its transactional
/// id and the dead instance (from its last report to the group).
#[test]
fn a_failover_explains_the_wait_for_the_dead_owners_transaction_once() {
    let Some(bootstrap) = broker() else { return };
    let ns = namespace("failover");
    set_up(&bootstrap, "balances", &ns, "4");
    // The first instance commits every 5 s, so that each of its tasks
    // dies with records in an open transaction, which the coordinator
    // must abort before the second instance's producers may start.
    let run = |log: &std::path::Path, commit_interval_ms: &str| {
        Command::new(env!("CARGO_BIN_EXE_parsley-live"))
            .args(["run", "balances", "--namespace", &ns])
            .args(["--session-timeout-ms", "6000", "--bootstrap", &bootstrap])
            .args(["--commit-interval-ms", commit_interval_ms])
            .env("PARSLEY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .expect("parsley-live runs")
    };
    let dir = std::env::temp_dir();
    let (first_log, second_log) = (
        dir.join(format!("{ns}first.log")),
        dir.join(format!("{ns}second.log")),
    );
    let mut first = run(&first_log, "5000");
    std::thread::sleep(Duration::from_secs(6));
    let mut input = Command::new(env!("CARGO_BIN_EXE_parsley-live"))
        .args(["produce", "balances", "--namespace", &ns])
        .args([
            "--rate",
            "2000",
            "--duration",
            "20s",
            "--bootstrap",
            &bootstrap,
        ])
        .env("PARSLEY_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("parsley-live produce runs");
    std::thread::sleep(Duration::from_secs(5));
    let dead = first.id();
    first.kill().expect("kill -9 the first instance");
    let _ = first.wait();
    let mut second = run(&second_log, "100");
    std::thread::sleep(Duration::from_secs(18));
    let _ = Command::new("kill")
        .args(["-INT", &second.id().to_string()])
        .status();
    let status = second.wait().expect("the second instance exits");
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        std::fs::read_to_string(&second_log).unwrap()
    );
    assert!(input.wait().expect("produce exits").success());
    let log = std::fs::read_to_string(&second_log).unwrap();
    let explained: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("waiting for Kafka's transaction coordinator"))
        .collect();
    assert!(!explained.is_empty(), "{log}");
    for line in &explained {
        assert!(line.contains(" INFO "), "{line}");
        assert!(line.contains("task balances/"), "{line}");
        assert!(
            line.contains(&format!("-{dead} (it last reported the task")),
            "{line}"
        );
    }
    // Once per task (each died with records in an open transaction), and
    // no warning of librdkafka's for it.
    assert_eq!(explained.len(), 4, "{log}");
    assert!(
        !log.lines()
            .any(|line| line.contains("WARN")
                && line.contains("Failed to acquire transactional PID")),
        "{log}"
    );
}
