//! The example topologies: worked examples for the docs, the test driver's
//! tests, the benchmarks and (later) the simulator's scenarios.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Tick, Topic};

/// An order against an account; the key is the account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    pub total: i64,
}

impl Order {
    pub fn total(&self) -> i64 {
        self.total
    }
}

/// The topics of the `payments` examples.
#[derive(Clone, Debug)]
pub struct PaymentsTopics {
    pub orders: Topic<String, Order>,
    pub audits: Topic<String, String>,
}

impl PaymentsTopics {
    pub fn new() -> Self {
        PaymentsTopics {
            orders: Topic::new("orders"),
            audits: Topic::new("audits"),
        }
    }
}

impl Default for PaymentsTopics {
    fn default() -> Self {
        PaymentsTopics::new()
    }
}

/// The seed's `balances` stage: each order's total is taken off its
/// account's balance, and every minute the stage cuts an audit marker.
///
/// The tick's stamp claims everything the task had delivered when the minute
/// fired, so whoever reads `cut@…` from `audits` is gated behind those
/// orders.
pub fn balances_stage(topics: &PaymentsTopics) -> Stage {
    let audits = topics.audits.clone();
    Stage::named("balances")
        .state(Json, || 0i64)
        .on(&topics.orders, |balance: i64, order| Step::of(balance - order.value().total()))
        .ticks(Duration::from_secs(60), move |tick| {
            vec![audits.send(None, format!("cut@{}", tick.timestamp))]
        })
        .into(&topics.audits)
        .build()
}

pub fn balances(topics: &PaymentsTopics) -> Result<App, CompositionError> {
    Parsley::named("payments").stage(balances_stage(topics)).build()
}

/// The fifth-tick audit cut: the tick slot counts quiet ticks, and every
/// fifth one emits a cut marker and resets the count.
pub fn audit_cut_policy(audits: &Topic<String, String>, quiet: i64, tick: &Tick) -> Step<i64> {
    if quiet + 1 >= 5 {
        Step::of(0).emit(audits.send(None, format!("cut@{}", tick.timestamp)))
    } else {
        Step::of(quiet + 1)
    }
}

/// The `audit-cut` stage: balances folded per account as in `balances`, with
/// the fifth-tick cut as its tick fold over the integer tick slot.
pub fn audit_cut_stage(topics: &PaymentsTopics) -> Stage {
    let audits = topics.audits.clone();
    Stage::named("audit-cut")
        .state(Json, || 0i64)
        .on(&topics.orders, |balance: i64, order| Step::of(balance - order.value().total()))
        .tick_fold(Duration::from_secs(60), move |quiet, tick| audit_cut_policy(&audits, quiet, tick))
        .into(&topics.audits)
        .build()
}

pub fn audit_cut(topics: &PaymentsTopics) -> Result<App, CompositionError> {
    Parsley::named("payments").stage(audit_cut_stage(topics)).build()
}

/// The topics of the three-stage chain.
#[derive(Clone, Debug)]
pub struct ChainTopics {
    pub input: Topic<String, i64>,
    pub enriched: Topic<String, i64>,
    pub metered: Topic<String, i64>,
    pub output: Topic<String, i64>,
}

impl ChainTopics {
    pub fn new() -> Self {
        ChainTopics {
            input: Topic::new("input"),
            enriched: Topic::new("enriched"),
            metered: Topic::new("metered"),
            output: Topic::new("output"),
        }
    }
}

impl Default for ChainTopics {
    fn default() -> Self {
        ChainTopics::new()
    }
}

/// A three-stage chain with ticks in the middle stage: `enrich` doubles each
/// value, `meter` keeps a running total per key and emits it, and on every
/// tick emits the task's record count under the key `"tick"`; `settle`
/// forwards everything. Keys are preserved, so the chain is co-partitioned.
pub fn chain(topics: &ChainTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    let enriched = topics.enriched.clone();
    let enrich = Stage::named("enrich")
        .on(&topics.input, move |record| vec![enriched.send(record.key().cloned(), record.value() * 2)])
        .into(&topics.enriched)
        .build();
    let metered = topics.metered.clone();
    let metered_ticks = topics.metered.clone();
    let meter = Stage::named("meter")
        .state(Json, || 0i64)
        .on(&topics.enriched, move |total: i64, record| {
            let total = total + record.value();
            Step::of(total).emit(metered.send(record.key().cloned(), total))
        })
        .ticks(tick_interval, move |tick| vec![metered_ticks.send("tick".to_string(), tick.timestamp)])
        .into(&topics.metered)
        .build();
    let output = topics.output.clone();
    let settle = Stage::named("settle")
        .on(&topics.metered, move |record| vec![output.send(record.key().cloned(), *record.value())])
        .into(&topics.output)
        .build();
    Parsley::named("chain").stage(enrich).stage(meter).stage(settle).build()
}
