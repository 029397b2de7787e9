//! Assembly (C3): before anything runs, every declared topic must exist, and
//! each derived topic must have its stage's task count of partitions.
//!
//! The check is pure: drivers hand it what their cluster says about topics
//! ([`TopicMetadata`]), and it returns either the resolved layout (tasks per
//! stage, partitions per topic) or every failure, each naming the topic, what
//! was expected, what was found and what to create.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::app::{App, StagePlan};
use crate::contract::{Role, TopicContract};
use crate::operator::CoPartitioned;
use crate::task::TaskId;
use crate::tp::TopicName;

/// What a cluster says about its topics.
pub trait TopicMetadata {
    /// The partition count of `topic`, or `None` when it does not exist.
    fn partitions(&self, topic: &str) -> Option<u32>;
}

impl TopicMetadata for BTreeMap<String, u32> {
    fn partitions(&self, topic: &str) -> Option<u32> {
        self.get(topic).copied()
    }
}

impl TopicMetadata for HashMap<String, u32> {
    fn partitions(&self, topic: &str) -> Option<u32> {
        self.get(topic).copied()
    }
}

/// The resolved layout of an application on one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembly {
    /// Tasks per stage, in the application's stage order.
    pub tasks: Vec<(String, u32)>,
    /// Partitions of every topic the application touches.
    pub partitions: BTreeMap<TopicName, u32>,
}

impl Assembly {
    /// How many tasks `stage` runs, if it is in the application.
    pub fn tasks_of(&self, stage: &str) -> Option<u32> {
        self.tasks
            .iter()
            .find(|(name, _)| name == stage)
            .map(|(_, tasks)| *tasks)
    }

    /// The partition count of `topic`, if the application touches it.
    pub fn partitions_of(&self, topic: &str) -> Option<u32> {
        self.partitions.get(topic).copied()
    }

    /// Every task of the application, in stage order and then by partition.
    pub fn task_ids(&self) -> Vec<TaskId> {
        self.tasks
            .iter()
            .flat_map(|(stage, tasks)| {
                (0..*tasks).map(|partition| TaskId {
                    stage: stage.as_str().into(),
                    partition,
                })
            })
            .collect()
    }
}

/// One way the cluster does not fit the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssemblyFailure {
    /// The topic does not exist.
    Missing {
        /// The topic.
        topic: String,
        /// What the topic is to the application (see `Role`).
        role: String,
        /// The partition count it must have, when the rules fix one.
        expected_partitions: Option<u32>,
        /// What to create or change, as a command.
        fix: String,
    },
    /// The topic exists with the wrong partition count.
    WrongPartitionCount {
        /// The topic.
        topic: String,
        /// What the topic is to the application (see `Role`).
        role: String,
        /// The partition count it must have.
        expected: u32,
        /// The partition count it has.
        found: u32,
        /// What to create or change, as a command.
        fix: String,
    },
}

impl fmt::Display for AssemblyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AssemblyFailure::Missing {
                topic,
                role,
                expected_partitions,
                fix,
            } => {
                write!(f, "C3 (docs/RULES.md#c3): topic {topic:?} ({role}) does not exist")?;
                if let Some(expected) = expected_partitions {
                    write!(f, "; expected {expected} partitions")?;
                }
                write!(f, "; fix: {fix}")
            }
            AssemblyFailure::WrongPartitionCount {
                topic,
                role,
                expected,
                found,
                fix,
            } => write!(
                f,
                "C3 (docs/RULES.md#c3): topic {topic:?} ({role}) has {found} partitions, expected {expected}; fix: {fix}"
            ),
        }
    }
}

/// Every failure of one assembly check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct AssemblyError {
    /// The application id.
    pub app: String,
    /// Every failure found, in topic order.
    pub failures: Vec<AssemblyFailure>,
}

impl fmt::Display for AssemblyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "application {:?} cannot start: {} topic problem(s)",
            self.app,
            self.failures.len()
        )?;
        for failure in &self.failures {
            write!(f, "\n  - {failure}")?;
        }
        Ok(())
    }
}

fn create_command(contract: &TopicContract, partitions: Option<u32>) -> String {
    let mut command = format!("kafka-topics.sh --create --topic {}", contract.name);
    match partitions {
        Some(partitions) => command.push_str(&format!(" --partitions {partitions}")),
        None => command.push_str(" --partitions <N>"),
    }
    for (key, value) in &contract.settings {
        command.push_str(&format!(" --config {key}={value}"));
    }
    command
}

fn task_count(plan: &StagePlan, metadata: &dyn TopicMetadata) -> Option<u32> {
    plan.stage
        .sources()
        .iter()
        .filter_map(|source| metadata.partitions(source.name.as_str()))
        .max()
}

/// C3: the second topic of `(leader, follower)` must have as many
/// partitions as the first (when both exist); otherwise a failure naming
/// the follower's `role` and the `fix`.
fn co_partitioned(
    metadata: &dyn TopicMetadata,
    failures: &mut Vec<AssemblyFailure>,
    pair: CoPartitioned,
) {
    let expected = metadata.partitions(pair.leader.as_str());
    let found = metadata.partitions(pair.follower.as_str());
    if let (Some(expected), Some(found)) = (expected, found) {
        if expected != found {
            failures.push(AssemblyFailure::WrongPartitionCount {
                topic: pair.follower.to_string(),
                role: pair.role,
                expected,
                found,
                fix: pair.fix,
            });
        }
    }
}

/// Checks `app` against `metadata` (C3).
pub fn assemble(app: &App, metadata: &dyn TopicMetadata) -> Result<Assembly, AssemblyError> {
    let contracts = TopicContract::list(app);
    let mut failures = Vec::new();
    let mut partitions = BTreeMap::new();
    let mut tasks = Vec::new();
    for plan in app.stages() {
        tasks.push((
            plan.name().to_string(),
            task_count(plan, metadata).unwrap_or(0),
        ));
    }
    for contract in &contracts {
        let role = contract.describe_roles();
        // Derived topics must match their stage's task count exactly: each task
        // writes its own partition of them. A foreign-key join's follow the
        // table they are co-partitioned with (J11).
        let expected = match contract.owner() {
            Some(owner) => app.stage(owner).and_then(|plan| task_count(plan, metadata)),
            None => contract.followed_count(metadata),
        };
        match (metadata.partitions(contract.name.as_str()), expected) {
            (None, expected) => failures.push(AssemblyFailure::Missing {
                topic: contract.name.to_string(),
                role,
                expected_partitions: expected,
                fix: format!("create it: {}", create_command(contract, expected)),
            }),
            (Some(found), Some(expected)) if found != expected => {
                failures.push(AssemblyFailure::WrongPartitionCount {
                    topic: contract.name.to_string(),
                    role,
                    expected,
                    found,
                    fix: format!(
                        "delete and recreate it with {expected} partitions: {}",
                        create_command(contract, Some(expected))
                    ),
                })
            }
            (Some(found), _) => {
                partitions.insert(contract.name.clone(), found);
            }
        }
    }
    // C3: what an operator needs co-partitioned (a join's sides, J4; a
    // timer service's requests and fires, K2).
    for plan in app.stages() {
        for operator in &plan.stage.def.operators {
            for pair in operator.co_partitioned(plan.name()) {
                co_partitioned(metadata, &mut failures, pair);
            }
        }
    }
    if failures.is_empty() {
        Ok(Assembly { tasks, partitions })
    } else {
        Err(AssemblyError {
            app: app.id().to_string(),
            failures,
        })
    }
}

impl TopicContract {
    /// The stage that owns this derived topic (tick topic, changelog or
    /// dead-letter topic).
    pub fn owner(&self) -> Option<&str> {
        self.roles.iter().find_map(|role| match role {
            Role::Ticks { stage }
            | Role::Changelog { stage }
            | Role::DeadLetter { stage }
            | Role::Repartition { stage } => Some(stage.as_str()),
            _ => None,
        })
    }

    /// The partition count of a foreign-key join's derived topic: the
    /// count of the table it is co-partitioned with (J11), when it exists;
    /// `None` for any other topic.
    fn followed_count(&self, metadata: &dyn TopicMetadata) -> Option<u32> {
        let follows = self.roles.iter().find_map(|role| match role {
            Role::Subscription { right, .. } => Some(right),
            Role::Response { left, .. } => Some(left),
            _ => None,
        })?;
        metadata.partitions(follows.as_str())
    }

    fn describe_roles(&self) -> String {
        self.roles
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Json, Parsley, Stage, Step, Topic};

    fn app() -> App {
        let orders: Topic<String, i64> = Topic::new("orders");
        let audits: Topic<String, String> = Topic::new("audits");
        let balances = Stage::named("balances")
            .state(Json, || 0i64)
            .on(&orders, |b, _| Step::of(b))
            .ticks(Duration::from_secs(60), |_| Vec::new())
            .into(&audits)
            .build();
        Parsley::named("payments").stage(balances).build().unwrap()
    }

    fn metadata(topics: &[(&str, u32)]) -> BTreeMap<String, u32> {
        topics
            .iter()
            .map(|(name, count)| (name.to_string(), *count))
            .collect()
    }

    #[test]
    fn c3_complete_cluster_assembles() {
        let assembly = assemble(
            &app(),
            &metadata(&[
                ("orders", 4),
                ("audits", 2),
                ("payments-balances-ticks", 4),
                ("payments-balances-state-changelog", 4),
            ]),
        )
        .unwrap();
        assert_eq!(assembly.tasks_of("balances"), Some(4));
        assert_eq!(assembly.partitions_of("audits"), Some(2));
    }

    /// C3: a missing topic fails loudly, naming the topic and the fix.
    #[test]
    fn c3_missing_topic_names_the_fix() {
        let error = assemble(
            &app(),
            &metadata(&[
                ("orders", 4),
                ("audits", 2),
                ("payments-balances-state-changelog", 4),
            ]),
        )
        .unwrap_err();
        assert_eq!(error.failures.len(), 1);
        let message = error.to_string();
        assert!(message.contains("\"payments-balances-ticks\" (ticks of stage balances) does not exist; expected 4 partitions"), "{message}");
        assert!(
            message.contains(
                "kafka-topics.sh --create --topic payments-balances-ticks --partitions 4"
            ),
            "{message}"
        );
    }

    /// C3, K2: a timer service's fire topic must have as many partitions
    /// as its request topic.
    #[test]
    fn c3_a_fire_topic_of_the_wrong_size_is_named() {
        let requests = Topic::<String, i64>::with_codecs("requests", crate::Utf8, crate::I64);
        let fires = Topic::<String, i64>::with_codecs("fires", crate::Utf8, crate::I64);
        let timers = Stage::named("timers")
            .timer_service(&requests, &fires)
            .build();
        let app = Parsley::named("app").stage(timers).build().unwrap();
        let error = assemble(
            &app,
            &metadata(&[
                ("requests", 4),
                ("fires", 2),
                ("app-timers-ticks", 4),
                ("app-timers-state-changelog", 4),
            ]),
        )
        .unwrap_err();
        let message = error.to_string();
        assert_eq!(error.failures.len(), 1, "{message}");
        assert!(message.contains("topic \"fires\" (fires of timer service timers, which must match its requests requests) has 2 partitions, expected 4"), "{message}");
    }

    /// C3: a tick topic's partition count must equal the widest source's.
    #[test]
    fn c3_wrong_tick_partition_count_fails() {
        let error = assemble(
            &app(),
            &metadata(&[
                ("orders", 4),
                ("audits", 2),
                ("payments-balances-ticks", 3),
                ("payments-balances-state-changelog", 4),
            ]),
        )
        .unwrap_err();
        assert_eq!(
            error.failures,
            vec![AssemblyFailure::WrongPartitionCount {
                topic: "payments-balances-ticks".into(),
                role: "ticks of stage balances".into(),
                expected: 4,
                found: 3,
                fix: "delete and recreate it with 4 partitions: kafka-topics.sh --create --topic payments-balances-ticks --partitions 4 --config cleanup.policy=delete --config retention.ms=3600000".into(),
            }]
        );
    }

    /// C3, X5: a stage that opts in to dead letters needs its `-dlq` topic,
    /// with one partition per task.
    #[test]
    fn c3_x5_dead_letter_topic_must_exist() {
        let orders: Topic<String, i64> = Topic::new("orders");
        let picky = Stage::named("picky")
            .on(&orders, |_| Vec::new())
            .dead_letter_queue()
            .build();
        let app = Parsley::named("shop").stage(picky).build().unwrap();
        let error = assemble(&app, &metadata(&[("orders", 3)])).unwrap_err();
        assert_eq!(
            error.failures,
            vec![AssemblyFailure::Missing {
                topic: "shop-picky-dlq".into(),
                role: "dead letters of stage picky".into(),
                expected_partitions: Some(3),
                fix: "create it: kafka-topics.sh --create --topic shop-picky-dlq --partitions 3 --config cleanup.policy=delete".into(),
            }]
        );
        let error = assemble(&app, &metadata(&[("orders", 3), ("shop-picky-dlq", 1)])).unwrap_err();
        assert!(matches!(
            error.failures[..],
            [AssemblyFailure::WrongPartitionCount {
                expected: 3,
                found: 1,
                ..
            }]
        ));
        let assembly = assemble(&app, &metadata(&[("orders", 3), ("shop-picky-dlq", 3)])).unwrap();
        assert_eq!(assembly.partitions_of("shop-picky-dlq"), Some(3));
    }

    /// C3: every failure is reported at once, sources and sinks included.
    #[test]
    fn c3_reports_every_missing_topic() {
        let error = assemble(&app(), &metadata(&[])).unwrap_err();
        let topics: Vec<_> = error
            .failures
            .iter()
            .map(|failure| match failure {
                AssemblyFailure::Missing { topic, .. } => topic.as_str(),
                other => panic!("unexpected {other}"),
            })
            .collect();
        assert_eq!(
            topics,
            [
                "audits",
                "orders",
                "payments-balances-state-changelog",
                "payments-balances-ticks"
            ]
        );
    }
}
