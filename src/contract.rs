//! The topic contracts (C4): every topic an application needs, listed without
//! any cluster, with its role, its partition rule and suggested settings.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::app::App;
use crate::join::ForeignKeyJoinPart;
use crate::tp::TopicName;

/// What a topic is to the application.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// A topic the stage consumes.
    Source {
        /// The stage.
        stage: String,
    },
    /// A topic the stage may emit to.
    Sink {
        /// The stage.
        stage: String,
    },
    /// The stage's tick topic (T2).
    Ticks {
        /// The stage.
        stage: String,
    },
    /// The stage's changelog (S5).
    Changelog {
        /// The stage.
        stage: String,
    },
    /// The stage's dead-letter topic (X5), when it opts in.
    DeadLetter {
        /// The stage.
        stage: String,
    },
    /// The re-key stage's repartition topic (R1).
    Repartition {
        /// The stage.
        stage: String,
    },
    /// A foreign-key join's subscription topic, written by its subscribe
    /// stage, with its right table's partition count (J10, J11).
    Subscription {
        /// The subscribe stage.
        stage: String,
        /// The right table it follows.
        right: TopicName,
    },
    /// A foreign-key join's response topic, written by its respond stage,
    /// with its left table's partition count (J10, J11).
    Response {
        /// The respond stage.
        stage: String,
        /// The left table it follows.
        left: TopicName,
    },
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Source { stage } => write!(f, "source of stage {stage}"),
            Role::Sink { stage } => write!(f, "sink of stage {stage}"),
            Role::Ticks { stage } => write!(f, "ticks of stage {stage}"),
            Role::Changelog { stage } => write!(f, "changelog of stage {stage}"),
            Role::DeadLetter { stage } => write!(f, "dead letters of stage {stage}"),
            Role::Repartition { stage } => write!(f, "repartition topic of stage {stage}"),
            Role::Subscription { stage, right } => write!(
                f,
                "subscription topic of stage {stage}, co-partitioned with its right table {right} (J11)"
            ),
            Role::Response { stage, left } => write!(
                f,
                "response topic of stage {stage}, co-partitioned with its left table {left} (J11)"
            ),
        }
    }
}

/// How many partitions a topic must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartitionRule {
    /// The user's choice (sources and sinks).
    Any,
    /// Exactly the partition count of the widest of these topics: a derived
    /// topic has one partition per task of its stage.
    MatchWidestOf(Vec<TopicName>),
}

/// One topic the application needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicContract {
    /// The topic name.
    pub name: TopicName,
    /// Every role it plays, one per stage that uses it.
    pub roles: Vec<Role>,
    /// How many partitions it must have.
    pub partitions: PartitionRule,
    /// Suggested topic configuration, as `kafka-topics.sh --config` pairs.
    pub settings: Vec<(String, String)>,
}

/// Tick topics are transient, but a tick must outlive consumer lag: keep them
/// an hour, or ten intervals if that is longer.
fn tick_retention(interval: Duration) -> Duration {
    (interval * 10).max(Duration::from_secs(3600))
}

impl TopicContract {
    /// C4: every topic `app` needs of a cluster, sorted by name, computed
    /// without one.
    pub fn list(app: &App) -> Vec<TopicContract> {
        let mut contracts: BTreeMap<TopicName, TopicContract> = BTreeMap::new();
        let mut add = |name: &TopicName,
                       role: Role,
                       partitions: PartitionRule,
                       settings: Vec<(String, String)>| {
            let contract = contracts
                .entry(name.clone())
                .or_insert_with(|| TopicContract {
                    name: name.clone(),
                    roles: Vec::new(),
                    partitions: PartitionRule::Any,
                    settings: Vec::new(),
                });
            // A derived topic's rule wins over the `Any` of the stages
            // that consume it (a repartition topic's consumers).
            if partitions != PartitionRule::Any || contract.roles.is_empty() {
                contract.partitions = partitions;
                contract.settings = settings;
            }
            contract.roles.push(role);
        };
        for plan in app.stages() {
            let stage = plan.name().to_string();
            let sources: Vec<TopicName> = plan
                .stage
                .sources()
                .iter()
                .map(|source| source.name.clone())
                .collect();
            for source in &sources {
                add(
                    source,
                    Role::Source {
                        stage: stage.clone(),
                    },
                    PartitionRule::Any,
                    Vec::new(),
                );
            }
            for sink in plan.stage.sinks() {
                add(
                    &sink.name,
                    Role::Sink {
                        stage: stage.clone(),
                    },
                    PartitionRule::Any,
                    Vec::new(),
                );
            }
            if let (Some(tick), Some(decl)) = (&plan.tick_topic, plan.stage.ticks()) {
                let retention = tick_retention(decl.interval).as_millis().to_string();
                add(
                    tick,
                    Role::Ticks {
                        stage: stage.clone(),
                    },
                    PartitionRule::MatchWidestOf(sources.clone()),
                    vec![
                        ("cleanup.policy".into(), "delete".into()),
                        ("retention.ms".into(), retention),
                    ],
                );
            }
            if let Some(changelog) = &plan.changelog {
                add(
                    changelog,
                    Role::Changelog {
                        stage: stage.clone(),
                    },
                    PartitionRule::MatchWidestOf(sources.clone()),
                    vec![("cleanup.policy".into(), "compact".into())],
                );
            }
            // One partition per task, like the other derived topics: task p
            // writes partition p, so each source partition's dead letters
            // stay in offset order. Kept like any data topic (no retention
            // suggested): an operator reads and replays them.
            // A repartition topic has one partition per task of the stage
            // that writes it, as its other derived topics do (R1, R3).
            for repartition in plan.stage.hooks().repartitions() {
                add(
                    repartition,
                    Role::Repartition {
                        stage: stage.clone(),
                    },
                    PartitionRule::MatchWidestOf(sources.clone()),
                    vec![("cleanup.policy".into(), "delete".into())],
                );
            }
            // A foreign-key join's derived topics follow the table they are
            // co-partitioned with, not their writer's task count (J11).
            if let Some(join) = plan
                .stage
                .hooks()
                .operator::<crate::join::ForeignKeyJoinDecl>()
            {
                let derived = match join.part {
                    ForeignKeyJoinPart::Subscribe => Some((
                        &join.subscription,
                        Role::Subscription {
                            stage: stage.clone(),
                            right: join.right.clone(),
                        },
                        &join.right,
                    )),
                    ForeignKeyJoinPart::Respond => Some((
                        &join.response,
                        Role::Response {
                            stage: stage.clone(),
                            left: join.left.clone(),
                        },
                        &join.left,
                    )),
                    ForeignKeyJoinPart::Resolve => None,
                };
                if let Some((topic, role, follows)) = derived {
                    add(
                        topic,
                        role,
                        PartitionRule::MatchWidestOf(vec![follows.clone()]),
                        vec![("cleanup.policy".into(), "delete".into())],
                    );
                }
            }
            if let Some(dead_letter) = &plan.dead_letter {
                add(
                    dead_letter,
                    Role::DeadLetter {
                        stage: stage.clone(),
                    },
                    PartitionRule::MatchWidestOf(sources.clone()),
                    vec![("cleanup.policy".into(), "delete".into())],
                );
            }
        }
        contracts.into_values().collect()
    }
}

impl fmt::Display for TopicContract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let roles: Vec<String> = self.roles.iter().map(ToString::to_string).collect();
        write!(f, "{}  [{}]  partitions: ", self.name, roles.join("; "))?;
        match &self.partitions {
            PartitionRule::Any => f.write_str("any")?,
            PartitionRule::MatchWidestOf(topics) => {
                let names: Vec<&str> = topics.iter().map(TopicName::as_str).collect();
                write!(f, "= widest of {}", names.join(", "))?;
            }
        }
        for (key, value) in &self.settings {
            write!(f, "  {key}={value}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Json, Parsley, Stage, Step, Topic};

    /// C4: the probe lists every topic, role, partition rule and setting.
    #[test]
    fn c4_probe_lists_every_topic() {
        let orders: Topic<String, i64> = Topic::new("orders");
        let refunds: Topic<String, i64> = Topic::new("refunds");
        let audits: Topic<String, String> = Topic::new("audits");
        let balances = Stage::named("balances")
            .state(Json, || 0i64)
            .on(&orders, |b, _| Step::of(b))
            .on(&refunds, |b, _| Step::of(b))
            .ticks(Duration::from_secs(60), |_| Vec::new())
            .into(&audits)
            .build();
        let app = Parsley::named("payments").stage(balances).build().unwrap();
        let listing: Vec<String> = TopicContract::list(&app)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            listing,
            [
                "audits  [sink of stage balances]  partitions: any",
                "orders  [source of stage balances]  partitions: any",
                "payments-balances-state-changelog  [changelog of stage balances]  partitions: = widest of orders, refunds  cleanup.policy=compact",
                "payments-balances-ticks  [ticks of stage balances]  partitions: = widest of orders, refunds  cleanup.policy=delete  retention.ms=3600000",
                "refunds  [source of stage balances]  partitions: any",
            ]
        );
    }

    /// C4, X5: a stage that opts in to dead letters needs its `-dlq` topic.
    #[test]
    fn c4_x5_probe_lists_the_dead_letter_topic() {
        let orders: Topic<String, i64> = Topic::new("orders");
        let picky = Stage::named("picky")
            .on(&orders, |_| Vec::new())
            .dead_letter_queue()
            .build();
        let app = Parsley::named("shop").stage(picky).build().unwrap();
        let listing: Vec<String> = TopicContract::list(&app)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            listing,
            [
                "orders  [source of stage picky]  partitions: any",
                "shop-picky-dlq  [dead letters of stage picky]  partitions: = widest of orders  cleanup.policy=delete",
            ]
        );
    }
}
