//! The one list of example topologies ([`TopologyName`]), and each as the
//! live runner drives it: the application under a namespace, its input
//! topics, and how to encode an input record. (The simulator runs the
//! examples through its public API: [`crate::simulations`].)

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use parsley::{App, Codec, Json, Parsley, TopicName, Utf8, I64};
use parsley_sim::sim::{BoxError, Settings, SimulationBuilder};

use crate::simulations;
use crate::{ChainTopics, DiamondTopics, FanInTopics, Order, PaymentsTopics, TimerTopics};

/// The example topologies, each by the name scenario files and the
/// command-line runners use: the one list both registries are built from
/// ([`crate::registry`] for `parsley-sim`, the `parsley-live` binary's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TopologyName {
    /// The balances stage with its audit ticks.
    Balances,
    /// The fifth-tick audit cut.
    AuditCut,
    /// The timer request/reply shape (K2).
    Timers,
    /// A multi-stage chain.
    Chain,
    /// A fan-in of two sources with cross-topic causes.
    FanIn,
    /// A diamond: two stages consume one source (X6), a third joins them.
    Diamond,
    /// Two stages, one stateful and one not, on the same source.
    FanOut,
    /// The balances stage with X5's dead-letter opt-in: refused orders go
    /// to `<app>-balances-dlq`.
    DeadLetter,
    /// Sessions closed by timers (K2), and a report of the summaries.
    Sessions,
    /// A wide topic regrouped, with holds behind another topic.
    Regroup,
    /// The dead-letter stage fed input some of which does not decode.
    BadBytes,
    /// Windowed aggregation (W1–W5): tumbling, hopping and session windows
    /// fanned out from one source, and a stage reading the closed windows.
    Windows,
    /// Stream–table joins (J1–J4): a left and an inner join fanned out
    /// over one table with tombstones, orders claiming table updates, the
    /// inner join in timestamp order (G9).
    Enrichment,
    /// Expiring state (E1–E3): a deduplication window by stream time and
    /// a repeat count expired by the wall clock, over one source.
    Dedupe,
    /// Re-keying (R1, R2): sales re-keyed from customer to product through
    /// a derived repartition topic, summed per product per second.
    ByProduct,
    /// Stream–stream joins (J5–J7): orders and payments joined within a
    /// window, an outer join and an inner one in timestamp order (G9).
    Settlement,
    /// Table–table joins (J8): balances and credit limits joined into each
    /// account's headroom (inner) and its view (outer), tombstones deleting.
    Credit,
    /// Foreign-key joins (J10–J15): orders joined with their customers'
    /// tiers, an inner and a left join, orders moving between customers
    /// ([`crate::order_labels()`]).
    OrderLabels,
    /// Every operator over shared sources: a dedupe, a stream–table, a
    /// stream–stream and a table–table join, a re-key into windows, and
    /// sessions ([`crate::storefront()`]).
    Storefront,
    /// Versioned tables and as-of joins (J16–J18): orders priced at the
    /// discount in force at their time, over a table updated out of order,
    /// beside a plain join ([`crate::as_of()`]).
    AsOf,
    /// A consistent view (V1–V5): transfers re-keyed by recipient and by
    /// sender, summed, joined into balances and totalled, the total the
    /// view ([`crate::ledger()`]).
    Ledger,
    /// A consistent view (V1–V5) of a table–table join: ledger entries
    /// split into charges and payments, summed per customer, joined into
    /// what each owes ([`crate::invoices()`]).
    Invoices,
    /// Forty branch ledgers consolidated per account: histories that reach
    /// Kafka's offset metadata limit ([`crate::branches()`]).
    Branches,
}

impl TopologyName {
    /// Every topology, in declaration order.
    pub const ALL: [TopologyName; 23] = [
        TopologyName::Balances,
        TopologyName::AuditCut,
        TopologyName::Timers,
        TopologyName::Chain,
        TopologyName::FanIn,
        TopologyName::Diamond,
        TopologyName::FanOut,
        TopologyName::DeadLetter,
        TopologyName::Sessions,
        TopologyName::Regroup,
        TopologyName::BadBytes,
        TopologyName::Windows,
        TopologyName::Enrichment,
        TopologyName::Dedupe,
        TopologyName::ByProduct,
        TopologyName::Settlement,
        TopologyName::Credit,
        TopologyName::OrderLabels,
        TopologyName::Storefront,
        TopologyName::AsOf,
        TopologyName::Ledger,
        TopologyName::Invoices,
        TopologyName::Branches,
    ];

    /// The name as written in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyName::Balances => "balances",
            TopologyName::AuditCut => "audit-cut",
            TopologyName::Timers => "timers",
            TopologyName::Chain => "chain",
            TopologyName::FanIn => "fan-in",
            TopologyName::Diamond => "diamond",
            TopologyName::FanOut => "fan-out",
            TopologyName::DeadLetter => "dead-letter",
            TopologyName::Sessions => "sessions",
            TopologyName::Regroup => "regroup",
            TopologyName::BadBytes => "bad-bytes",
            TopologyName::Windows => "windows",
            TopologyName::Enrichment => "enrichment",
            TopologyName::Dedupe => "dedupe",
            TopologyName::ByProduct => "by-product",
            TopologyName::Settlement => "settlement",
            TopologyName::Credit => "credit",
            TopologyName::OrderLabels => "order-labels",
            TopologyName::Storefront => "storefront",
            TopologyName::AsOf => "as-of",
            TopologyName::Ledger => "ledger",
            TopologyName::Invoices => "invoices",
            TopologyName::Branches => "branches",
        }
    }

    /// The topology as a simulation over the settings of a run.
    pub fn simulation(self) -> fn(&Settings) -> Result<SimulationBuilder, BoxError> {
        match self {
            TopologyName::Balances => simulations::balances,
            TopologyName::AuditCut => simulations::audit_cut,
            TopologyName::Timers => simulations::timers,
            TopologyName::Chain => simulations::chain,
            TopologyName::FanIn => simulations::fan_in,
            TopologyName::Diamond => simulations::diamond,
            TopologyName::FanOut => simulations::fan_out,
            TopologyName::DeadLetter => simulations::dead_letter,
            TopologyName::Sessions => simulations::sessions,
            TopologyName::Regroup => simulations::regroup,
            TopologyName::BadBytes => simulations::bad_bytes,
            TopologyName::Windows => simulations::windows,
            TopologyName::Enrichment => simulations::enrichment,
            TopologyName::Dedupe => simulations::dedupe,
            TopologyName::ByProduct => simulations::by_product,
            TopologyName::Settlement => simulations::settlement,
            TopologyName::Credit => simulations::credit,
            TopologyName::OrderLabels => simulations::order_labels,
            TopologyName::Storefront => simulations::storefront,
            TopologyName::AsOf => simulations::as_of,
            TopologyName::Ledger => simulations::ledger,
            TopologyName::Invoices => simulations::invoices,
            TopologyName::Branches => simulations::branches,
        }
    }

    /// Whether the live runner runs it ([`namespaced`]): the topologies
    /// whose shape only the simulator explores (a regrouped wide topic,
    /// malformed bytes, a fan-out the diamond already covers live) do not;
    /// nor, yet, the windows, whose live check needs input timestamps the
    /// live producer does not set, or the joins, whose needs tombstones,
    /// or the dedupe, whose needs repeated ids with timestamps, or the
    /// by-product windows, for the windows' reason, or the settlement
    /// joins, whose windows need input timestamps too, or the credit
    /// joins, whose tables need tombstones, or the order labels, for the
    /// same reason, or the storefront, which needs all of these, or the as-of joins,
    /// whose tables need tombstones and out-of-order timestamps, or the
    /// consistent views, whose epochs need input timestamps too, or the
    /// branches, whose task stops at the offset metadata limit.
    pub fn runs_live(self) -> bool {
        !matches!(
            self,
            TopologyName::FanOut
                | TopologyName::Regroup
                | TopologyName::BadBytes
                | TopologyName::Windows
                | TopologyName::Enrichment
                | TopologyName::Dedupe
                | TopologyName::ByProduct
                | TopologyName::Settlement
                | TopologyName::Credit
                | TopologyName::OrderLabels
                | TopologyName::Storefront
                | TopologyName::AsOf
                | TopologyName::Ledger
                | TopologyName::Invoices
                | TopologyName::Branches
        )
    }
}

impl fmt::Display for TopologyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An input topic and the shape of its values.
#[derive(Clone, Debug)]
pub struct InputTopic {
    /// The topic name.
    pub name: TopicName,
    /// Values are `Order { total }` (else a bare integer).
    pub orders: bool,
}

/// An example topology, ready for the live runner: the application, its inputs, and the timer shape if it has one.
pub struct ExampleTopology {
    /// The topic name.
    pub name: TopologyName,
    /// The application.
    pub app: App,
    /// The topics inputs are produced to.
    pub inputs: Vec<InputTopic>,
    /// The timer shape (K2): requests the scheduler reads and fires it writes.
    pub timers: Option<TimerTopics>,
    /// The fan-in: orders (input 1) may claim payments (input 0).
    pub cross_claims: bool,
}

impl ExampleTopology {
    /// The encoded key and value of an input record, in the formats of the
    /// examples' topics (see `topologies`).
    pub fn encode_input(&self, input: usize, key: &str, amount: i64) -> (Bytes, Bytes) {
        let key = Codec::<String>::encode(&Utf8, &key.to_string()).expect("strings encode");
        let value = if self.inputs[input].orders {
            Codec::<Order>::encode(&Json, &Order { total: amount })
        } else {
            Codec::<i64>::encode(&I64, &amount)
        }
        .expect("amounts encode");
        (key, value)
    }
}

/// How long the timers example holds a reservation live: short, so a run
/// sees its timers fire (the simulator uses `crate::RESERVATION_MS`).
pub const LIVE_RESERVATION_MS: i64 = 1_500;

/// Why an example cannot run live.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// The namespaced topology does not compose into an application.
    #[error("the example does not compose: {0}")]
    Composition(#[from] parsley::CompositionError),
    /// The topology is one only the simulator runs
    /// ([`TopologyName::runs_live`]).
    #[error("the example {0} runs in the simulator only")]
    SimulatorOnly(TopologyName),
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
                TopologyName::Balances => crate::balances_stage_every(&topics, tick_interval),
                TopologyName::DeadLetter => {
                    crate::balances_stage_dead_letters(&topics, tick_interval)
                }
                _ => crate::audit_cut_stage_every(&topics, tick_interval),
            };
            let app = Parsley::named(topic("payments")).stage(stage).build()?;
            (app, vec![input(topics.orders.name(), true)], false)
        }
        TopologyName::Chain => {
            let topics = ChainTopics::with_prefix(namespace);
            let app = crate::chain_named(&topic("chain"), &topics, tick_interval)?;
            (app, vec![input(topics.input.name(), false)], false)
        }
        TopologyName::FanIn => {
            let topics = FanInTopics::with_prefix(namespace);
            let app = crate::fan_in_named(&topic("fan-in"), &topics, tick_interval)?;
            let inputs = vec![
                input(topics.payments.name(), false),
                input(topics.orders.name(), false),
            ];
            (app, inputs, true)
        }
        TopologyName::Diamond => {
            let topics = DiamondTopics::with_prefix(namespace);
            let app = crate::diamond_named(&topic("diamond"), &topics, tick_interval)?;
            (app, vec![input(topics.events.name(), false)], false)
        }
        TopologyName::Sessions => {
            let topics = crate::SessionTopics::with_prefix(namespace);
            let app = crate::sessions_named(&topic("sessions"), &topics, LIVE_RESERVATION_MS)?;
            (app, vec![input(topics.clicks.name(), false)], false)
        }
        TopologyName::FanOut
        | TopologyName::Regroup
        | TopologyName::BadBytes
        | TopologyName::Windows
        | TopologyName::Enrichment
        | TopologyName::Dedupe
        | TopologyName::ByProduct
        | TopologyName::Settlement
        | TopologyName::Credit
        | TopologyName::OrderLabels
        | TopologyName::Storefront
        | TopologyName::AsOf
        | TopologyName::Ledger
        | TopologyName::Invoices
        | TopologyName::Branches => return Err(ExampleError::SimulatorOnly(name)),
        TopologyName::Timers => {
            let topics = TimerTopics::with_prefix(namespace);
            let app = crate::timers_with(&topic("timers"), &topics, LIVE_RESERVATION_MS)?;
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
