//! The example topologies under a namespace, so that many runs share one
//! broker, and their inputs: planned from a seed, produced for real.

use std::collections::BTreeMap;
use std::time::Duration;

use parsley::assembly::Assembly;
use parsley::partitioner::partition_for;
use parsley::{Claim, Parsley, RecordData, Stamp, Tp};
use parsley_live::{LiveClient, LiveError};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::topologies::example::{ExampleTopology, InputTopic};
use crate::topologies::TopologyName;
use crate::topologies::{
    self, ChainTopics, DiamondTopics, FanInTopics, PaymentsTopics, TimerTopics,
};

/// How long the timers example holds a reservation live: short, so a run
/// sees its timers fire (the simulator uses `topologies::RESERVATION_MS`).
pub const LIVE_RESERVATION_MS: i64 = 1_500;

/// Why an example cannot run live.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// The namespaced topology does not compose into an application.
    #[error("the example does not compose: {0}")]
    Composition(#[from] parsley::CompositionError),
}

/// `name` with every topic and the application id prefixed by `namespace`.
pub fn namespaced(
    name: TopologyName,
    namespace: &str,
    tick_interval: Duration,
) -> Result<ExampleTopology, ExampleError> {
    let topic = |base: &str| format!("{namespace}{base}");
    let input = |name: &parsley::TopicName, orders: bool| InputTopic {
        name: name.clone(),
        orders,
    };
    let (app, inputs, cross_claims) = match name {
        TopologyName::Balances | TopologyName::AuditCut | TopologyName::DeadLetter => {
            let topics = PaymentsTopics::with_prefix(namespace);
            let stage = match name {
                TopologyName::Balances => topologies::balances_stage_every(&topics, tick_interval),
                TopologyName::DeadLetter => {
                    topologies::balances_stage_dead_letters(&topics, tick_interval)
                }
                _ => topologies::audit_cut_stage_every(&topics, tick_interval),
            };
            let app = Parsley::named(topic("payments")).stage(stage).build()?;
            (app, vec![input(topics.orders.name(), true)], false)
        }
        TopologyName::Chain => {
            let topics = ChainTopics::with_prefix(namespace);
            let app = topologies::chain_named(&topic("chain"), &topics, tick_interval)?;
            (app, vec![input(topics.input.name(), false)], false)
        }
        TopologyName::FanIn => {
            let topics = FanInTopics::with_prefix(namespace);
            let app = topologies::fan_in_named(&topic("fan-in"), &topics, tick_interval)?;
            let inputs = vec![
                input(topics.payments.name(), false),
                input(topics.orders.name(), false),
            ];
            (app, inputs, true)
        }
        TopologyName::Diamond => {
            let topics = DiamondTopics::with_prefix(namespace);
            let app = topologies::diamond_named(&topic("diamond"), &topics, tick_interval)?;
            (app, vec![input(topics.events.name(), false)], false)
        }
        TopologyName::Sessions => {
            let topics = topologies::SessionTopics::with_prefix(namespace);
            let app = topologies::sessions_named(&topic("sessions"), &topics, LIVE_RESERVATION_MS)?;
            (app, vec![input(topics.clicks.name(), false)], false)
        }
        TopologyName::Timers => {
            let topics = TimerTopics::with_prefix(namespace);
            let app = topologies::timers_with(&topic("timers"), &topics, LIVE_RESERVATION_MS)?;
            let inputs = vec![input(topics.orders.name(), true)];
            return Ok(ExampleTopology {
                name,
                app,
                inputs,
                timers: Some(topics),
                cross_claims: false,
            });
        }
    };
    Ok(ExampleTopology {
        name,
        app,
        inputs,
        timers: None,
        cross_claims,
    })
}

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
    parsley_live::runtime::wall_clock_ms()
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
