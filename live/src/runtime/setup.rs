//! Start-up against a real cluster: the assembly check (C3) on the
//! cluster's metadata, and a helper that creates the topics the contract
//! probe (C4) lists.
//!
//! A topic the application derives (a stage's changelog, tick topic or
//! dead-letter topic) with the wrong partition count can only be deleted
//! and recreated, and that discards what it holds; the fix each error
//! suggests says what is lost.

use std::collections::BTreeMap;

use parsley::App;
use parsley::{assemble, Assembly, AssemblyError, AssemblyFailure};
use parsley::{PartitionRule, TopicContract};

use super::super::client::LiveClient;
use super::RuntimeError;

/// What deleting `topic` discards, when the application derives it: its
/// stage's state, pending ticks or dead letters.
pub(crate) fn what_deleting_discards(app: &App, topic: &str) -> Option<String> {
    app.stages().iter().find_map(|plan| {
        let is = |derived: &Option<parsley::TopicName>| {
            derived.as_ref().is_some_and(|name| name.as_str() == topic)
        };
        if is(&plan.changelog) {
            Some(format!(
                "deleting it discards stage {:?}'s state (the changelog is its only durable copy): every key starts again from its initial value, while the stage's committed positions stay where they are, so the records delivered before are not delivered again",
                plan.name()
            ))
        } else if is(&plan.tick_topic) {
            Some(format!(
                "deleting it discards stage {:?}'s ticks not yet delivered",
                plan.name()
            ))
        } else if is(&plan.dead_letter) {
            Some(format!(
                "deleting it discards the dead letters stage {:?} wrote there; read them first",
                plan.name()
            ))
        } else {
            None
        }
    })
}

/// `error` with each mis-sized derived topic's fix saying what deleting
/// it discards.
fn with_what_is_lost(app: &App, mut error: AssemblyError) -> AssemblyError {
    for failure in &mut error.failures {
        if let AssemblyFailure::WrongPartitionCount { topic, fix, .. } = failure {
            if fix.starts_with("delete") {
                if let Some(lost) = what_deleting_discards(app, topic) {
                    fix.push_str(&format!(" (warning: {lost})"));
                }
            }
        }
    }
    error
}

/// C3 on the cluster `client` reaches: reads the partition count of every
/// topic the application needs and assembles. A missing topic, or a tick or
/// changelog topic whose partition count does not match its stage's tasks,
/// is an [`parsley::AssemblyError`] listing every problem.
pub async fn assemble_on(client: &LiveClient, app: &App) -> Result<Assembly, RuntimeError> {
    let mut known: BTreeMap<String, u32> = BTreeMap::new();
    for contract in TopicContract::list(app) {
        let name = contract.name.as_str();
        if let Some(partitions) = client.partitions(name).await? {
            known.insert(name.to_owned(), partitions);
        }
    }
    assemble(app, &known).map_err(|error| RuntimeError::Assembly(with_what_is_lost(app, error)))
}

/// What [`create_topics`] did with one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSetup {
    /// The topic's name.
    pub topic: String,
    /// Its partition count: the one it was created with, or the one it had.
    pub partitions: u32,
    /// False when the topic existed already and was left as it was.
    pub created: bool,
}

/// Creates every topic [`TopicContract::list`] lists that does not exist
/// yet, with its suggested settings. Sources and sinks (the user's choice of
/// partition count) get `partitions_of(topic)`, or `default_partitions`; a
/// derived topic gets the partition count of the widest topic its rule
/// names. Existing topics are left alone.
///
/// Before creating anything, every existing topic is checked: a derived
/// topic whose partition count is not its rule's, or a source or sink
/// named in `partitions_of` with another count than asked, refuses the
/// whole setup ([`RuntimeError::Assembly`], every such topic named with its
/// count, the expected one and the fix), and nothing is created.
pub async fn create_topics(
    client: &LiveClient,
    app: &App,
    default_partitions: u32,
    partitions_of: &BTreeMap<String, u32>,
) -> Result<Vec<TopicSetup>, RuntimeError> {
    let contracts = TopicContract::list(app);
    let mut chosen: BTreeMap<String, u32> = BTreeMap::new();
    // User topics first: derived topics are sized from them.
    for contract in &contracts {
        if contract.partitions == PartitionRule::Any {
            let name = contract.name.as_str();
            let partitions = match client.partitions(name).await? {
                Some(existing) => existing,
                None => partitions_of
                    .get(name)
                    .copied()
                    .unwrap_or(default_partitions),
            };
            chosen.insert(name.to_owned(), partitions);
        }
    }
    // Then derived topics, each once the topics it is sized from are: a
    // repartition topic (R1) is derived, and sizes its consumers' own.
    loop {
        let mut progressed = false;
        for contract in &contracts {
            let name = contract.name.as_str();
            let PartitionRule::MatchWidestOf(topics) = &contract.partitions else {
                continue;
            };
            if chosen.contains_key(name)
                || !topics
                    .iter()
                    .all(|topic| chosen.contains_key(topic.as_str()))
            {
                continue;
            }
            let widest = topics
                .iter()
                .filter_map(|topic| chosen.get(topic.as_str()))
                .copied()
                .max()
                .unwrap_or(default_partitions);
            chosen.insert(name.to_owned(), widest);
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    let mut planned = Vec::new();
    let mut failures = Vec::new();
    for contract in &contracts {
        let name = contract.name.as_str();
        let (partitions, demanded) = match &contract.partitions {
            PartitionRule::Any => (chosen[name], partitions_of.get(name).copied()),
            PartitionRule::MatchWidestOf(_) => {
                let widest = chosen.get(name).copied().unwrap_or(default_partitions);
                (widest, Some(widest))
            }
        };
        let existing = client.partitions(name).await?;
        if let (Some(found), Some(expected)) = (existing, demanded) {
            if found != expected {
                let fix = match &contract.partitions {
                    PartitionRule::Any => format!(
                        "use it with its {found} partitions (leave out the partition count asked), or delete and recreate it with {expected}"
                    ),
                    PartitionRule::MatchWidestOf(_) => {
                        let mut fix = format!(
                            "delete and recreate it with {expected} partitions: kafka-topics.sh --delete --topic {name}, then run setup again"
                        );
                        if let Some(lost) = what_deleting_discards(app, name) {
                            fix.push_str(&format!(" (warning: {lost})"));
                        }
                        fix
                    }
                };
                failures.push(AssemblyFailure::WrongPartitionCount {
                    topic: name.to_owned(),
                    role: contract
                        .roles
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    expected,
                    found,
                    fix,
                });
            }
        }
        planned.push((contract, partitions, existing));
    }
    if !failures.is_empty() {
        return Err(RuntimeError::Assembly(AssemblyError {
            app: app.id().to_owned(),
            failures,
        }));
    }
    let mut done = Vec::new();
    for (contract, partitions, existing) in planned {
        let name = contract.name.as_str();
        if let Some(existing) = existing {
            done.push(TopicSetup {
                topic: name.to_owned(),
                partitions: existing,
                created: false,
            });
            continue;
        }
        client
            .create_topic_with(name, partitions, &contract.settings)
            .await?;
        done.push(TopicSetup {
            topic: name.to_owned(),
            partitions,
            created: true,
        });
    }
    Ok(done)
}
