//! Issue 28 on the secured broker (`scripts/kafka/broker.sh start --secure`,
//! whose directory `PARSLEY_SECURE_KAFKA` names): clients on `SASL_SSL` with
//! SCRAM, `StandardAuthorizer` with `allow.everyone.if.no.acl.found=false`.
//! Everything goes through the `parsley-live` binary's own commands with
//! `--command-config`: the application's principal (`parsley-app`) holds
//! only the ACLs `setup --print-acls` prints; the inputs are produced, and
//! the result read back, by the broker's super user (`admin`). Without
//! `PARSLEY_SECURE_KAFKA` the tests skip (and fail when `CI` is set).

#![cfg(feature = "live")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use parsley_examples::live::{expected_balances, plan_inputs, PlannedInput};
use parsley_examples::{namespaced, TopologyName};
use parsley_live::{
    assemble_on, final_state, read_committed, wait_caught_up, LiveClient, LiveConfig,
};

const BIN: &str = env!("CARGO_BIN_EXE_parsley-live");
/// The examples' default tick interval, which the binary uses.
const TICK: Duration = Duration::from_millis(1000);
/// The application's principal, a SCRAM user of the secured broker.
const PRINCIPAL: &str = "User:parsley-app";

/// The secured broker: its directory of certificates and client
/// properties, its address, and the application user's password.
struct Secured {
    dir: PathBuf,
    bootstrap: String,
    password: String,
    /// Everything every command printed, for the search for the password.
    said: Arc<Mutex<Vec<String>>>,
}

fn secured() -> Option<Secured> {
    let Some(dir) = std::env::var_os("PARSLEY_SECURE_KAFKA").filter(|dir| !dir.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none_or(|value| value.is_empty()),
            "PARSLEY_SECURE_KAFKA is not set, but CI is: start the secured broker first with \
             `export \"$(bash scripts/kafka/broker.sh start --secure)\"`"
        );
        eprintln!("note: secured live test skipped: PARSLEY_SECURE_KAFKA is not set");
        return None;
    };
    let dir = PathBuf::from(dir);
    let bootstrap = std::fs::read_to_string(dir.join("bootstrap"))
        .expect("the secured broker's bootstrap file")
        .trim()
        .to_string();
    let properties = std::fs::read_to_string(dir.join("app.properties")).expect("app.properties");
    let password = properties
        .split("password=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the application user's password in app.properties")
        .to_string();
    assert!(password.len() >= 16, "a distinctive password to search for");
    Some(Secured {
        dir,
        bootstrap,
        password,
        said: Arc::default(),
    })
}

/// A namespace no other run uses.
fn namespace(kind: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("sec-{kind}-{:x}-", nanos & 0xffff_ffff_ffff)
}

impl Secured {
    /// `parsley-live ARGS` as `user` (`app` or `admin`) on the secured
    /// broker, in `namespace`.
    fn command(&self, user: &str, namespace: &str, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .args(["--namespace", namespace, "--bootstrap", &self.bootstrap])
            .arg("--command-config")
            .arg(self.dir.join(format!("{user}.properties")))
            .env("PARSLEY_LOG", "info,librdkafka=warn")
            .env_remove("PARSLEY_COMMAND_CONFIG");
        command
    }

    /// Runs a command to its end, keeping what it said.
    fn output(&self, mut command: Command) -> Output {
        let output = command.output().expect("parsley-live runs");
        let mut said = self.said.lock().unwrap();
        said.push(String::from_utf8_lossy(&output.stdout).into_owned());
        said.push(String::from_utf8_lossy(&output.stderr).into_owned());
        output
    }

    /// An instance with its output in `log`, read when it has exited.
    fn spawn(&self, mut command: Command, log: &Path) -> Child {
        let file = std::fs::File::create(log).expect("a log file");
        command
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("an instance")
    }

    fn keep_log(&self, log: &Path) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        self.said.lock().unwrap().push(text);
    }

    /// Runs `kafka-acls.sh` lines as the super user, in one JVM.
    fn acls(&self, lines: &str) {
        let mut child = Command::new("bash")
            .arg(workspace().join("scripts/kafka/broker.sh"))
            .args(["tool", "scripts/kafka/AclBatch.java", "--command-config"])
            .arg(self.dir.join("admin.properties"))
            .current_dir(workspace())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the ACL tool");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(lines.as_bytes())
            .unwrap();
        let output = child.wait_with_output().expect("the ACL tool ran");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The super user's configuration, for reading back independently.
    fn admin_config(&self) -> LiveConfig {
        let properties = parsley_live::properties::read_file(&self.dir.join("admin.properties"))
            .and_then(parsley_live::properties::translate_java)
            .expect("admin.properties");
        LiveConfig::new(self.bootstrap.clone()).with_properties(properties)
    }

    /// An HTTP GET of each of the paths an instance serves at `address`
    /// (`--metrics`), kept with what the commands said; returns the bodies.
    fn scrape(&self, address: &str) -> String {
        use std::io::{Read, Write};
        let mut bodies = String::new();
        for path in ["/metrics", "/health", "/ready"] {
            let Ok(mut stream) = std::net::TcpStream::connect(address) else {
                continue;
            };
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: parsley\r\nConnection: close\r\n\r\n");
            let mut response = String::new();
            if stream.write_all(request.as_bytes()).is_ok() {
                let _ = stream.read_to_string(&mut response);
            }
            bodies.push_str(&response);
            bodies.push('\n');
        }
        self.said.lock().unwrap().push(bodies.clone());
        bodies
    }

    /// No command said the application user's password, anywhere.
    fn assert_no_secret_said(&self) {
        let said = self.said.lock().unwrap();
        assert!(said.len() > 4, "outputs were kept");
        for text in said.iter() {
            assert!(
                !text.contains(&self.password),
                "the password appears in a command's output:\n{text}"
            );
        }
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `setup balances --print-acls` for the application's principal.
fn printed_acls(secured: &Secured, namespace: &str) -> String {
    let printed = secured.output(secured.command(
        "app",
        namespace,
        &["setup", "balances", "--print-acls", "parsley-app"],
    ));
    assert!(printed.status.success(), "{}", text(&printed));
    let acls = String::from_utf8(printed.stdout).unwrap();
    let lines: Vec<&str> = acls.lines().filter(|line| !line.starts_with('#')).collect();
    assert!(lines.len() >= 8, "{acls}");
    for line in &lines {
        assert!(
            line.starts_with(&format!(
                "kafka-acls.sh --bootstrap-server {} --add --allow-principal {PRINCIPAL} --operation ",
                secured.bootstrap
            )),
            "{line}"
        );
    }
    acls
}

/// Done means, first bullet: the application runs exactly-once over
/// SASL_SSL with only the printed ACLs — setup, two instances under
/// flowing input, one killed with SIGKILL, status, audit — and the state
/// read back by the super user is the fold of every input, each once.
/// Last bullet: no output of any command, nor what the instances serve at
/// `--metrics` (`/metrics`, `/health`, `/ready`), holds the password.
#[tokio::test(flavor = "multi_thread")]
async fn an_app_runs_exactly_once_over_sasl_ssl_with_only_the_printed_acls() {
    let Some(secured) = secured() else { return };
    let secured = Arc::new(secured);
    let namespace = namespace("eo");
    let acls = printed_acls(&secured, &namespace);
    // Before the ACLs, the application's principal may do nothing: setup
    // stops at the first topic it may not create, naming it.
    let denied = secured.output(secured.command(
        "app",
        &namespace,
        &["setup", "balances", "--partitions", "2"],
    ));
    assert_eq!(denied.status.code(), Some(8), "{}", text(&denied));
    assert!(
        text(&denied).contains("not authorized: no ACL allows User:parsley-app"),
        "{}",
        text(&denied)
    );
    secured.acls(&acls);
    let setup = secured.output(secured.command(
        "app",
        &namespace,
        &["setup", "balances", "--partitions", "2"],
    ));
    assert!(setup.status.success(), "{}", text(&setup));
    let mut clean = vec![text(&setup)];
    // `produce` is not the application's: with only its ACLs, producing as
    // its principal is refused naming the principal, the operation and
    // the input (exit 8); with `--print-acls --producer`'s too, it works.
    let produce_as_app = || {
        secured.output(secured.command(
            "app",
            &namespace,
            &[
                "produce", "balances", "--count", "40", "--keys", "8", "--seed", "1000",
            ],
        ))
    };
    let refused = produce_as_app();
    assert_eq!(refused.status.code(), Some(8), "{}", text(&refused));
    assert!(
        text(&refused).contains("not authorized: no ACL allows User:parsley-app Write on Topic:"),
        "{}",
        text(&refused)
    );
    assert!(text(&refused).contains("--producer"), "{}", text(&refused));
    let for_produce = secured.output(secured.command(
        "app",
        &namespace,
        &[
            "setup",
            "balances",
            "--print-acls",
            "parsley-app",
            "--producer",
        ],
    ));
    assert!(for_produce.status.success(), "{}", text(&for_produce));
    secured.acls(&String::from_utf8(for_produce.stdout).unwrap());
    // The refused batch may be partly appended; only the seeds below are
    // counted, so the refused one must have appended nothing.
    assert!(
        text(&refused).contains("0 records were appended"),
        "{}",
        text(&refused)
    );

    let logs = tempdir(&namespace);
    // Each instance serves its metrics, searched for the password too.
    let metrics: Vec<String> = (0..2)
        .map(|_| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().to_string()
        })
        .collect();
    let instance = |index: usize| {
        let mut command = secured.command("app", &namespace, &["run", "balances"]);
        command.args(["--session-timeout-ms", "6000", "--metrics", &metrics[index]]);
        secured.spawn(command, &logs.join(format!("run-{index}.log")))
    };
    let mut first = instance(0);
    let mut second = instance(1);
    // Input flows the whole time, produced by the super user.
    let flowing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (flowing, secured, namespace) = (
            Arc::clone(&flowing),
            Arc::clone(&secured),
            namespace.clone(),
        );
        std::thread::spawn(move || {
            let mut seeds = Vec::new();
            let started = Instant::now();
            while flowing.load(Ordering::Relaxed) || seeds.len() < 6 {
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "input kept flowing"
                );
                let seed = seeds.len() as u64;
                let produced = secured.output(secured.command(
                    "admin",
                    &namespace,
                    &[
                        "produce",
                        "balances",
                        "--count",
                        "40",
                        "--keys",
                        "8",
                        "--seed",
                        &seed.to_string(),
                    ],
                ));
                assert!(produced.status.success(), "{}", text(&produced));
                seeds.push(seed);
                std::thread::sleep(Duration::from_millis(300));
            }
            seeds
        })
    };
    tokio::time::sleep(Duration::from_secs(10)).await;
    secured.scrape(&metrics[0]);
    first.kill().expect("SIGKILL");
    first.wait().expect("reaped");
    tokio::time::sleep(Duration::from_secs(10)).await;
    flowing.store(false, Ordering::Relaxed);
    let mut seeds = producer.join().expect("the producer");
    // Once more as the application's principal, with the producer's ACLs.
    let produced = produce_as_app();
    assert!(produced.status.success(), "{}", text(&produced));
    clean.push(text(&produced));
    seeds.push(1000);

    let topology = namespaced(TopologyName::Balances, &namespace, TICK).expect("balances");
    let client = LiveClient::new(secured.admin_config()).expect("the super user's client");
    let assembly = assemble_on(&client, &topology.app)
        .await
        .expect("assembled");
    let caught_up = wait_caught_up(&client, &topology.app, &assembly, Duration::from_secs(120))
        .await
        .expect("progress");
    assert!(caught_up, "the survivor did not catch up");
    assert!(second.try_wait().unwrap().is_none(), "the survivor exited");

    let status = secured.output(secured.command("app", &namespace, &["status", "balances"]));
    assert!(status.status.success(), "{}", text(&status));
    let audit = secured.output(secured.command("app", &namespace, &["audit", "balances"]));
    assert!(audit.status.success(), "{}", text(&audit));
    // `query` as the application's principal finds each key's owner in the
    // instances' group and answers its committed balance, the fold of
    // every input.
    let plan: Vec<PlannedInput> = seeds
        .iter()
        .flat_map(|seed| plan_inputs(&topology, 40, 8, *seed))
        .collect();
    let expected = expected_balances(&topology, &plan).expect("a per-key sum");
    for key in ["account-0", "account-5"] {
        let balance = expected.get(key).copied().unwrap_or(0);
        clean.extend(query_balance(&secured, &namespace, key, balance));
    }

    let scraped = secured.scrape(&metrics[1]);
    assert!(
        scraped.contains("parsley_records_delivered_total"),
        "the survivor's metrics:\n{scraped}"
    );

    // The survivor stops gracefully.
    assert!(Command::new("kill")
        .args(["-TERM", &second.id().to_string()])
        .status()
        .unwrap()
        .success());
    let exit = second.wait().expect("the survivor exits");
    assert!(exit.success(), "a graceful stop exits 0, got {exit}");
    // Right after a clean stop, with no input left, every task of this
    // one-stage application is caught up (its ticks are not listed).
    let stopped = secured.output(secured.command("app", &namespace, &["status", "balances"]));
    assert!(stopped.status.success(), "{}", text(&stopped));
    assert!(
        !text(&stopped).contains("behind") && text(&stopped).contains("caught up"),
        "{}",
        text(&stopped)
    );
    secured.keep_log(&logs.join("run-0.log"));
    secured.keep_log(&logs.join("run-1.log"));
    // With exactly the printed ACLs, nothing the application does is
    // refused: no line of any log or output of its principal's commands
    // speaks of an authorization failure.
    clean.push(std::fs::read_to_string(logs.join("run-0.log")).unwrap());
    clean.push(std::fs::read_to_string(logs.join("run-1.log")).unwrap());
    clean.push(text(&status));
    clean.push(text(&stopped));
    clean.push(text(&audit));
    for said in &clean {
        for line in said.lines() {
            let lower = line.to_ascii_lowercase();
            assert!(
                !lower.contains("authoriz") && !lower.contains("not authorized"),
                "an authorization error with only the printed ACLs: {line}"
            );
        }
    }

    // Read back by the super user: the state is the fold of every input.
    let read = read_committed(&client, &topology.app, &assembly)
        .await
        .expect("read back");
    let actual: BTreeMap<String, i64> = final_state(&read.to_logs(), &topology.app)
        .iter()
        .map(|((_, key), value)| {
            let account = match parsley::SlotKey::from_changelog_key(key) {
                Ok(parsley::SlotKey::Key(account)) => account,
                other => panic!("a changelog key of an account's slot, got {other:?}"),
            };
            (
                parsley::Codec::<String>::decode(&parsley::Utf8, &account).unwrap(),
                parsley::Codec::<i64>::decode(&parsley::I64, value).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actual,
        expected,
        "the state is not the fold of the {} inputs",
        plan.len()
    );
    let report = parsley::audit::audit(&topology.app, &assembly, &read.to_logs());
    assert!(report.is_clean(), "{report}");
    secured.assert_no_secret_said();
}

/// `query balances balances KEY` as the application's principal, asked
/// until it answers `balance` (a task's last commit reaches its store just
/// after its delivery report) within 30 s; what each attempt said.
fn query_balance(secured: &Secured, namespace: &str, key: &str, balance: i64) -> Vec<String> {
    use base64::Engine;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut said = Vec::new();
    loop {
        let output = secured.output(secured.command(
            "app",
            namespace,
            &["query", "balances", "balances", key],
        ));
        said.push(text(&output));
        let answer: Option<serde_json::Value> = serde_json::from_slice(&output.stdout).ok();
        let answered = answer
            .filter(|_| output.status.success())
            .and_then(|answer| match answer["found"].as_bool()? {
                false => Some(0),
                true => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(answer["value"].as_str()?)
                        .ok()?;
                    parsley::Codec::<i64>::decode(&parsley::I64, &bytes).ok()
                }
            });
        if answered == Some(balance) {
            return said;
        }
        assert!(
            Instant::now() < deadline,
            "query never answered {key}'s balance {balance}: {}",
            said.join("\n")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A secret under a misspelt key, from the file, the environment and `-X`
/// (and a `-X` that is not KEY=VALUE), given to every command: each is
/// refused before it acts (exit 2) naming the key and where it was given,
/// and neither that value nor the password appears in any output.
#[test]
fn a_misspelt_secret_is_refused_by_every_command_without_its_value() {
    let Some(secured) = secured() else { return };
    let namespace = namespace("typo");
    let value = format!("misspelt-{}", namespace.trim_end_matches('-'));
    let dir = tempdir(&namespace);
    let file = dir.join("app-misspelt.properties");
    let mut properties =
        std::fs::read_to_string(secured.dir.join("app.properties")).expect("app.properties");
    let line = properties.lines().count() + 1;
    properties.push_str(&format!("sasl.pasword={value}\n"));
    std::fs::write(&file, properties).unwrap();
    let commands: [&[&str]; 8] = [
        &["setup", "balances"],
        &["setup", "balances", "--print-acls", "parsley-app"],
        &["produce", "balances", "--count", "1"],
        &["run", "balances", "--metrics", "127.0.0.1:0"],
        &["status", "balances"],
        &["status", "balances", "--json"],
        &["audit", "balances"],
        &[
            "skip",
            "balances",
            "--stage",
            "balances",
            "--topic",
            "orders",
            "--partition",
            "0",
            "--offset",
            "0",
        ],
    ];
    let sources: [(&str, String); 4] = [
        (
            "file",
            format!(
                "{}:{line}: client property `sasl.pasword` refused",
                file.display()
            ),
        ),
        (
            "env",
            "environment variable PARSLEY_CLIENT_SASL_PASSWROD: client property `sasl.passwrod` \
             refused"
                .into(),
        ),
        ("flag", "-X: client property `sasl.passwrd` refused".into()),
        ("malformed flag", "-X: expected KEY=VALUE".into()),
    ];
    for args in commands {
        for (source, message) in &sources {
            let mut command = secured.command("app", &namespace, args);
            match *source {
                "file" => {
                    // The same command with the misspelt file instead.
                    command = Command::new(BIN);
                    command
                        .args(args)
                        .args(["--namespace", &namespace, "--bootstrap", &secured.bootstrap])
                        .arg("--command-config")
                        .arg(&file)
                        .env("PARSLEY_LOG", "info,librdkafka=warn")
                        .env_remove("PARSLEY_COMMAND_CONFIG");
                }
                "env" => {
                    command.env("PARSLEY_CLIENT_SASL_PASSWROD", &value);
                }
                "flag" => {
                    command.args(["-X", &format!("sasl.passwrd={value}")]);
                }
                _ => {
                    command.args(["-X", &format!("sasl.password:{value}")]);
                }
            }
            let output = secured.output(command);
            let said = text(&output);
            assert!(
                !said.contains(&value),
                "{args:?} from the {source}:\n{said}"
            );
            if args.contains(&"--print-acls") {
                // It reads the application only, never the properties.
                assert!(output.status.success(), "{args:?}: {said}");
                continue;
            }
            assert_eq!(output.status.code(), Some(2), "{args:?} {source}: {said}");
            assert!(said.contains(message), "{args:?} {source}: {said}");
        }
    }
    secured.assert_no_secret_said();
}

/// A Java client's file as it is, and TLS configuration errors as TLS
/// errors: the super user's file with a PEM key store (key encrypted,
/// `ssl.key.password`), the empty host name check and `bootstrap.servers`,
/// and no `--bootstrap`, sets the application up; the same with a wrong
/// `ssl.key.password` exits 5 at once naming the file and the property; a
/// SASL_PLAINTEXT client at the TLS listener exits 5 pointing at
/// `security.protocol`.
#[test]
fn java_pem_key_stores_and_tls_mistakes_exit_with_their_codes() {
    let Some(secured) = secured() else { return };
    let namespace = namespace("java");
    let dir = tempdir(&namespace);
    let key_password = format!("key-{}", namespace.trim_end_matches('-'));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-days", "1"])
        .args(["-subj", "/CN=parsley-app", "-passout"])
        .arg(format!("pass:{key_password}"))
        .arg("-keyout")
        .arg(dir.join("client.key"))
        .arg("-out")
        .arg(dir.join("client.crt"))
        .output()
        .expect("openssl runs");
    assert!(made.status.success(), "{}", text(&made));
    let keystore = dir.join("client-keystore.pem");
    let pem = std::fs::read_to_string(dir.join("client.key")).unwrap()
        + &std::fs::read_to_string(dir.join("client.crt")).unwrap();
    std::fs::write(&keystore, pem).unwrap();
    let java_file = |name: &str, password: &str| {
        let mut properties = std::fs::read_to_string(secured.dir.join("admin.properties")).unwrap();
        properties.push_str(&format!(
            "bootstrap.servers={}\nssl.keystore.type=PEM\nssl.keystore.location={}\n\
             ssl.key.password={password}\nssl.endpoint.identification.algorithm=\n",
            secured.bootstrap,
            keystore.display()
        ));
        let file = dir.join(format!("java-{name}.properties"));
        std::fs::write(&file, properties).unwrap();
        file
    };
    let java = |file: &Path, args: &[&str]| {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .args(["--namespace", &namespace, "--command-config"])
            .arg(file)
            .env("PARSLEY_LOG", "info,librdkafka=warn")
            .env_remove("PARSLEY_COMMAND_CONFIG")
            .env_remove("KAFKA_BOOTSTRAP_SERVERS");
        let started = Instant::now();
        (secured.output(command), started.elapsed())
    };
    let (setup, _) = java(
        &java_file("right", &key_password),
        &["setup", "balances", "--partitions", "1"],
    );
    assert!(setup.status.success(), "{}", text(&setup));
    assert!(
        text(&setup).contains("host name is not checked"),
        "{}",
        text(&setup)
    );

    let wrong = "not-the-key-password";
    let (refused, took) = java(&java_file("wrong", wrong), &["status", "balances"]);
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(5), "{said}");
    assert!(
        said.contains(&keystore.display().to_string())
            && said.contains("ssl.key.password does not decrypt"),
        "{said}"
    );
    assert!(
        !said.contains(wrong) && !said.contains(&key_password),
        "{said}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}: {said}");

    let mut plaintext = secured.command("app", &namespace, &["status", "balances"]);
    plaintext.args(["-X", "security.protocol=SASL_PLAINTEXT"]);
    let started = Instant::now();
    let output = secured.output(plaintext);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(5), "{said}");
    assert!(
        said.contains("the listener speaks TLS") && said.contains("security.protocol to SSL"),
        "{said}"
    );
    assert!(started.elapsed() < Duration::from_secs(3), "{said}");
    secured.assert_no_secret_said();
}

fn tempdir(namespace: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("parsley-{namespace}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Done means, third bullet: a wrong password, an untrusted CA and a wrong
/// mechanism each fail at once with their own message and exit code.
#[test]
fn a_wrong_password_an_untrusted_ca_and_a_wrong_mechanism_fail_at_once() {
    let Some(secured) = secured() else { return };
    let namespace = namespace("auth");
    let other_ca = secured.dir.join("other-ca.pem");
    let cases: [(&str, Vec<String>, i32, &str); 3] = [
        (
            "wrong password",
            vec!["-X".into(), "sasl.password=not-the-password".into()],
            7,
            "the credentials were refused",
        ),
        (
            "untrusted CA",
            vec![
                "-X".into(),
                format!("ssl.ca.location={}", other_ca.display()),
            ],
            5,
            "the broker's certificate is not trusted",
        ),
        (
            "wrong mechanism",
            vec!["-X".into(), "sasl.mechanism=SCRAM-SHA-512".into()],
            6,
            "SASL mechanism SCRAM-SHA-512 is not enabled on the broker",
        ),
    ];
    for (what, extra, code, message) in cases {
        let mut command = secured.command("app", &namespace, &["status", "balances"]);
        command.args(&extra);
        let started = Instant::now();
        let output = secured.output(command);
        let took = started.elapsed();
        let said = text(&output);
        assert_eq!(output.status.code(), Some(code), "{what}: {said}");
        assert!(said.contains(message), "{what}: {said}");
        assert!(
            took < Duration::from_secs(10),
            "{what} took {took:?}: {said}"
        );
    }
    secured.assert_no_secret_said();
}

/// Done means, second bullet: with any one of the printed ACLs removed,
/// the application's commands (setup, run under input, audit) fail with
/// an error naming the ACL's resource, within the connect bound, exit 8,
/// and what the application committed meanwhile, read back by the super
/// user, holds nothing lost or doubled. Each ACL is left out of its own
/// namespace's set, all at once.
#[test]
fn removing_any_printed_acl_fails_naming_it() {
    let Some(secured) = secured() else { return };
    let secured = Arc::new(secured);
    let base = namespace("rm");
    let count = printed_acls(&secured, &format!("{base}0-"))
        .lines()
        .filter(|line| !line.starts_with('#'))
        .count();
    let mut grants = String::new();
    let mut removed = Vec::new();
    for index in 0..count {
        let namespace = format!("{base}{index}-");
        let acls = printed_acls(&secured, &namespace);
        let lines: Vec<&str> = acls.lines().filter(|line| !line.starts_with('#')).collect();
        for (at, line) in lines.iter().enumerate() {
            if at != index {
                grants.push_str(line);
                grants.push('\n');
            }
        }
        removed.push((namespace, lines[index].to_string()));
    }
    secured.acls(&grants);
    let checks: Vec<_> = removed
        .into_iter()
        .map(|(namespace, line)| {
            let secured = Arc::clone(&secured);
            std::thread::spawn(move || check_one_removed(&secured, &namespace, &line))
        })
        .collect();
    let failures: Vec<String> = checks
        .into_iter()
        .filter_map(|check| check.join().expect("a check").err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    secured.assert_no_secret_said();
}

/// The resource an ACL line names, as the errors name resources
/// (`Topic:NAME`; a prefix is the start of the names it covers).
fn resource_of(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|word| *word == flag)
            .map(|at| words[at + 1])
    };
    if let Some(topic) = after("--topic") {
        format!("Topic:{topic}")
    } else if let Some(group) = after("--group") {
        format!("Group:{group}")
    } else if let Some(id) = after("--transactional-id") {
        format!("TransactionalId:{id}")
    } else {
        "Cluster:".to_string()
    }
}

/// How long an instance may take, from its start, to exit 8 on a missing
/// ACL: joining the instances' group and starting its tasks take seconds; a
/// look-up that waited out its 30 s timeout instead would not make it. Two
/// partitions, so a stage's group refused fails both of its tasks, the
/// second too within seconds (they share one consumer, to which librdkafka
/// reports the refusal once).
const PROMPTLY: Duration = Duration::from_secs(15);

/// Setup, then (input produced by the super user) an instance for up to
/// 40 s, then audit: one of them must exit 8 naming the resource (a
/// stage's group too: its refused coordinator look-up is typed), the
/// instance within [`PROMPTLY`]. Whatever
/// the verdict, once input was produced the super user reads every topic
/// back with `read_committed` and audits it: nothing the application
/// committed is lost or doubled.
fn check_one_removed(secured: &Secured, namespace: &str, line: &str) -> Result<(), String> {
    let resource = resource_of(line);
    let mut said = Vec::new();
    let named = |output: &str| output.contains(&resource) && output.contains("not authorized");
    let setup = secured.output(secured.command(
        "app",
        namespace,
        &["setup", "balances", "--partitions", "2"],
    ));
    said.push(format!(
        "setup: {:?}\n{}",
        setup.status.code(),
        text(&setup)
    ));
    if setup.status.code() == Some(8) && named(&text(&setup)) {
        return Ok(());
    }
    if !setup.status.success() {
        // The super user makes the topics the application could not.
        let admin = secured.output(secured.command(
            "admin",
            namespace,
            &["setup", "balances", "--partitions", "2"],
        ));
        said.push(format!(
            "admin setup: {:?}\n{}",
            admin.status.code(),
            text(&admin)
        ));
    }
    let produced = secured.output(secured.command(
        "admin",
        namespace,
        &["produce", "balances", "--count", "20", "--keys", "4"],
    ));
    said.push(format!(
        "produce: {:?}\n{}",
        produced.status.code(),
        text(&produced)
    ));
    let log = tempdir(namespace).join("run.log");
    let mut run = {
        let mut command = secured.command("app", namespace, &["run", "balances"]);
        command.args(["--session-timeout-ms", "6000"]);
        secured.spawn(command, &log)
    };
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = run.try_wait().unwrap() {
            break Some(exit);
        }
        if started.elapsed() > Duration::from_secs(40) {
            let _ = Command::new("kill")
                .args(["-TERM", &run.id().to_string()])
                .status();
            let _ = run.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let took = started.elapsed();
    secured.keep_log(&log);
    let run_said = std::fs::read_to_string(&log).unwrap_or_default();
    said.push(format!("run: {exit:?} after {took:?}\n{run_said}"));
    let verdict = if exit.and_then(|exit| exit.code()) == Some(8) && named(&run_said) {
        eprintln!("without `{line}`: run exited 8 naming {resource} after {took:?}");
        if took < PROMPTLY {
            Ok(())
        } else {
            Err(format!(
                "run exited 8 naming {resource}, but only after {took:?}"
            ))
        }
    } else {
        let audit = secured.output(secured.command("app", namespace, &["audit", "balances"]));
        said.push(format!(
            "audit: {:?}\n{}",
            audit.status.code(),
            text(&audit)
        ));
        if audit.status.code() == Some(8) && named(&text(&audit)) {
            Ok(())
        } else {
            Err(format!("no command failed naming {resource}"))
        }
    };
    let kept = nothing_lost_or_doubled(secured, namespace);
    match (verdict, kept) {
        (Ok(()), Ok(())) => Ok(()),
        (verdict, kept) => Err(format!(
            "without `{line}`: {}{}:\n{}",
            verdict.err().unwrap_or_default(),
            kept.err()
                .map_or(String::new(), |kept| format!("; read back: {kept}")),
            said.join("\n")
        )),
    }
}

/// The super user reads the application in `namespace` back with
/// `read_committed` and audits it: no committed output lost or doubled,
/// state and ticks committed once, causal order.
fn nothing_lost_or_doubled(secured: &Secured, namespace: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    runtime.block_on(async {
        let topology = namespaced(TopologyName::Balances, namespace, TICK)
            .map_err(|error| error.to_string())?;
        let client = LiveClient::new(secured.admin_config()).map_err(|error| error.to_string())?;
        let assembly = assemble_on(&client, &topology.app)
            .await
            .map_err(|error| error.to_string())?;
        let read = read_committed(&client, &topology.app, &assembly)
            .await
            .map_err(|error| error.to_string())?;
        let report = parsley::audit::audit(&topology.app, &assembly, &read.to_logs());
        if report.is_clean() {
            Ok(())
        } else {
            Err(report.to_string())
        }
    })
}
