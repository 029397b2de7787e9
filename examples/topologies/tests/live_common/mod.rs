//! What the live example tests share: an example under a fresh namespace
//! on the broker, its inputs, its instances as child processes, and the
//! checks run on what it committed.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use parsley::audit::audit;
use parsley::Assembly;
use parsley_examples::live::{expected_balances, plan_inputs, produce_inputs, PlannedInput};
use parsley_examples::namespaced;
use parsley_examples::ExampleTopology;
use parsley_examples::TopologyName;
use parsley_live::{
    assemble_on, create_topics, final_state, read_committed, wait_caught_up, LiveClient,
    LiveConfig, ReadBack,
};

pub const TICK: Duration = Duration::from_millis(500);
pub const PATIENCE: Duration = Duration::from_secs(120);

fn namespace(kind: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("live-{kind}-{:x}-{}-", nanos, std::process::id())
}

pub struct Live {
    pub client: LiveClient,
    pub topology: ExampleTopology,
    pub assembly: Assembly,
    pub namespace: String,
}

pub async fn set_up(live: &LiveConfig, name: TopologyName, kind: &str, partitions: u32) -> Live {
    let namespace = namespace(kind);
    let client = LiveClient::new(live.clone()).expect("client");
    let topology = namespaced(name, &namespace, TICK).expect("a live example");
    create_topics(&client, &topology.app, partitions, &BTreeMap::new())
        .await
        .expect("topics");
    let assembly = assemble_on(&client, &topology.app)
        .await
        .expect("assembles");
    Live {
        client,
        topology,
        assembly,
        namespace,
    }
}

impl Live {
    pub async fn produce(&self, count: usize, seed: u64) -> Vec<PlannedInput> {
        let plan = plan_inputs(&self.topology, count, 12, seed);
        produce_inputs(&self.client, &self.topology, &self.assembly, &plan)
            .await
            .expect("inputs");
        plan
    }

    pub async fn wait_caught_up(&self) {
        let done = wait_caught_up(&self.client, &self.topology.app, &self.assembly, PATIENCE)
            .await
            .expect("progress");
        assert!(done, "{}: the application did not catch up", self.namespace);
    }

    /// Reads everything back, audits it and returns it.
    pub async fn read_and_audit(&self) -> ReadBack {
        let read = read_committed(&self.client, &self.topology.app, &self.assembly)
            .await
            .expect("read back");
        let report = audit(&self.topology.app, &self.assembly, &read.to_logs());
        assert!(report.is_clean(), "{}: {report}", self.namespace);
        assert!(report.summary.notes.is_empty(), "inconclusive: {report}");
        eprintln!("{}: {report}", self.namespace);
        read
    }

    /// The committed state equals the fold of every input (S1), and every
    /// input tp's committed offset is past its last record.
    pub fn assert_state_is_the_fold(&self, read: &ReadBack, plan: &[PlannedInput]) {
        let expected = expected_balances(&self.topology, plan).expect("a per-key sum");
        let state = final_state(&read.to_logs(), &self.topology.app);
        let actual: BTreeMap<String, i64> = state
            .iter()
            .map(|((_, key), value)| {
                let account = match parsley::SlotKey::from_changelog_key(key) {
                    Ok(parsley::SlotKey::Key(account)) => account,
                    other => panic!("a changelog key of an account's slot, got {other:?}"),
                };
                let balance = parsley::Codec::<i64>::decode(&parsley::I64, value)
                    .expect("the examples keep balances as I64");
                (
                    parsley::Codec::<String>::decode(&parsley::Utf8, &account)
                        .expect("the examples' keys are UTF-8"),
                    balance,
                )
            })
            .collect();
        assert_eq!(
            actual, expected,
            "{}: state is not the fold of the input",
            self.namespace
        );
    }

    /// `parsley-live run` with the static share `share`.
    pub fn command(&self, share: &str) -> Command {
        let mut command = self.run_command();
        command
            .args(["--instance", share])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }

    /// `parsley-live run` sharing the tasks by group membership, with a
    /// short session; its log goes to `log`, where a test can read it.
    pub fn group_command(&self, log: &std::path::Path) -> Command {
        let mut command = self.run_command();
        let file = std::fs::File::create(log).expect("the instance's log file");
        command
            .args(["--session-timeout-ms", "6000"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(file));
        command
    }

    fn run_command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_parsley-live"));
        command
            .args(["run", TopologyName::as_str(self.topology.name)])
            .args(["--namespace", &self.namespace])
            .args(["--set", &format!("tick-ms={}", TICK.as_millis())])
            .args(["--bootstrap", &self.client.config().bootstrap_servers]);
        command
    }
}

/// SIGTERM: the graceful stop; the instance commits what is pending.
pub fn terminate(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    let exit = child.wait().expect("the instance exits");
    assert!(exit.success(), "a graceful stop exits 0, got {exit}");
}
