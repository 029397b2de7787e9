//! The examples' inputs on a real Kafka cluster (feature `live`): planned
//! from a seed, produced for real. The runtime of `parsley-live` runs the
//! examples themselves ([`crate::namespaced`]); reading them back and their
//! status are `parsley-live`'s.

use std::collections::BTreeMap;

use parsley::partition_for;
use parsley::Assembly;
use parsley::{Claim, RecordData, Stamp, Tp};
use parsley_live::{LiveClient, LiveError};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::example::ExampleTopology;
use crate::TopologyName;

/// One input record of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedInput {
    /// Index into the topology's inputs.
    pub input: usize,
    /// The record's key: the account, `account-<n>`.
    pub key: String,
    /// The amount: an order's total, or a fan-in payment's value.
    pub amount: i64,
}

/// `count` inputs over `keys` keys, drawn from `seed`: amounts 1..=100, so
/// no logic error (the examples refuse negative amounts). A fan-in's inputs
/// alternate between payments and orders.
pub fn plan_inputs(
    topology: &ExampleTopology,
    count: usize,
    keys: usize,
    seed: u64,
) -> Vec<PlannedInput> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let keys = keys.max(1) as u64;
    (0..count)
        .map(|index| PlannedInput {
            input: index % topology.inputs.len(),
            key: format!("account-{}", rng.next_u64() % keys),
            amount: 1 + (rng.next_u64() % 100) as i64,
        })
        .collect()
}

/// The final state of each key after folding `plan` (S1): balances and the
/// audit cut take orders off, a fan-in adds payments and takes orders off.
/// `None` for topologies whose state is not a per-key sum.
pub fn expected_balances(
    topology: &ExampleTopology,
    plan: &[PlannedInput],
) -> Option<BTreeMap<String, i64>> {
    let mut balances = BTreeMap::new();
    for input in plan {
        let change = match (topology.name, input.input) {
            (TopologyName::Balances | TopologyName::AuditCut | TopologyName::DeadLetter, _) => {
                -input.amount
            }
            (TopologyName::FanIn, 0) => input.amount,
            (TopologyName::FanIn, _) => -input.amount,
            _ => return None,
        };
        *balances.entry(input.key.clone()).or_insert(0) += change;
    }
    Some(balances)
}

fn now_ms() -> i64 {
    parsley_live::wall_clock_ms()
}

/// Produces `plan` with an idempotent producer and returns where each record
/// landed, in plan order. In a fan-in, payments go first; each order then
/// claims the latest payment produced before it on its partition, so the
/// gate must hold it until that payment is delivered.
pub async fn produce_inputs(
    client: &LiveClient,
    topology: &ExampleTopology,
    assembly: &Assembly,
    plan: &[PlannedInput],
) -> Result<Vec<(Tp, u64)>, LiveError> {
    let producer = client.plain_producer()?;
    let tp_of = |planned: &PlannedInput| {
        let name = &topology.inputs[planned.input].name;
        let partitions = assembly.partitions_of(name.as_str()).unwrap_or(1);
        let (key, _) = topology.encode_input(planned.input, &planned.key, planned.amount);
        Tp::new(name.clone(), partition_for(Some(&key), partitions, 0))
    };
    let mut landed: Vec<Option<(Tp, u64)>> = vec![None; plan.len()];
    // Phase by input index: claims point from later inputs to input 0.
    let phases: Vec<usize> = (0..topology.inputs.len()).collect();
    for phase in phases {
        let mut pending = Vec::new();
        let mut latest_payment: BTreeMap<u32, u64> = BTreeMap::new();
        for (index, planned) in plan.iter().enumerate() {
            if topology.cross_claims && phase > 0 && planned.input == 0 {
                if let Some((tp, offset)) = &landed[index] {
                    latest_payment.insert(tp.partition, *offset);
                }
            }
            if planned.input != phase {
                continue;
            }
            let tp = tp_of(planned);
            let (key, value) = topology.encode_input(planned.input, &planned.key, planned.amount);
            let mut headers = Vec::new();
            if topology.cross_claims && phase > 0 {
                if let Some(&payment) = latest_payment.get(&tp.partition) {
                    let payments = Tp::new(topology.inputs[0].name.clone(), tp.partition);
                    headers.push(parsley::header::stamp_header(&Stamp::from_claims([
                        Claim::new(payments, payment),
                    ])));
                }
            }
            let data = RecordData {
                key: Some(key),
                value: Some(value),
                headers,
                timestamp: now_ms(),
            };
            pending.push((index, producer.enqueue(&tp, &data)?));
        }
        for (index, delivery) in pending {
            let tp = delivery.tp().clone();
            landed[index] = Some((tp, delivery.wait().await?));
        }
    }
    Ok(landed
        .into_iter()
        .map(|landed| landed.expect("every planned input was produced"))
        .collect())
}
