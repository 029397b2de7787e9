//! Start-up against a real cluster: the assembly check (C3) on the
//! cluster's metadata, and a helper that creates the topics the contract
//! probe (C4) lists.

use std::collections::BTreeMap;

use parsley::app::App;
use parsley::assembly::{assemble, Assembly};
use parsley::probe::{ContractProbes, PartitionRule};

use super::super::client::LiveClient;
use super::RuntimeError;

/// C3 on the cluster `client` reaches: reads the partition count of every
/// topic the application needs and assembles. A missing topic, or a tick or
/// changelog topic whose partition count does not match its stage's tasks,
/// is an [`parsley::assembly::AssemblyError`] listing every problem.
pub async fn assemble_on(client: &LiveClient, app: &App) -> Result<Assembly, RuntimeError> {
    let mut known: BTreeMap<String, u32> = BTreeMap::new();
    for contract in ContractProbes::probe(app) {
        let name = contract.name.as_str();
        if let Some(partitions) = client.partitions(name).await? {
            known.insert(name.to_owned(), partitions);
        }
    }
    Ok(assemble(app, &known)?)
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

/// Creates every topic [`ContractProbes::probe`] lists that does not exist
/// yet, with its suggested settings. Sources and sinks (the user's choice of
/// partition count) get `partitions_of(topic)`, or `default_partitions`; a
/// derived topic gets the partition count of the widest topic its rule
/// names. Existing topics are left alone: the assembly check judges them.
pub async fn create_topics(
    client: &LiveClient,
    app: &App,
    default_partitions: u32,
    partitions_of: &BTreeMap<String, u32>,
) -> Result<Vec<TopicSetup>, RuntimeError> {
    let contracts = ContractProbes::probe(app);
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
    let mut done = Vec::new();
    for contract in &contracts {
        let name = contract.name.as_str();
        let partitions = match &contract.partitions {
            PartitionRule::Any => chosen[name],
            PartitionRule::MatchWidestOf(topics) => topics
                .iter()
                .filter_map(|topic| chosen.get(topic.as_str()))
                .copied()
                .max()
                .unwrap_or(default_partitions),
        };
        if let Some(existing) = client.partitions(name).await? {
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
