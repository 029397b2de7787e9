//! The example topologies as the live runner drives them: the application,
//! its input topics, and how to encode an input record. (The simulator runs
//! the examples through its public API: [`super::simulations`].)

use std::time::Duration;

use bytes::Bytes;
use parsley::{App, Codec, Json, TopicName, Utf8, I64};

use std::fmt;

use crate::topologies::{
    self, ChainTopics, DiamondTopics, FanInTopics, Order, PaymentsTopics, TimerTopics,
};

/// The example topologies the live runner and its tests run
/// (`sim/src/topologies/mod.rs`).
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
    /// The balances stage with X5's dead-letter opt-in: refused orders go
    /// to `<app>-balances-dlq`.
    DeadLetter,
    /// Sessions closed by timers (K2), and a report of the summaries.
    Sessions,
}

impl TopologyName {
    /// Every topology, in declaration order.
    pub const ALL: [TopologyName; 8] = [
        TopologyName::Balances,
        TopologyName::AuditCut,
        TopologyName::Timers,
        TopologyName::Chain,
        TopologyName::FanIn,
        TopologyName::Diamond,
        TopologyName::DeadLetter,
        TopologyName::Sessions,
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
            TopologyName::DeadLetter => "dead-letter",
            TopologyName::Sessions => "sessions",
        }
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
    /// Builds the example topology `name` with the given tick interval.
    pub fn build(name: TopologyName, tick_interval: Duration) -> ExampleTopology {
        let input = |name: &TopicName, orders: bool| InputTopic {
            name: name.clone(),
            orders,
        };
        let built = match name {
            TopologyName::Balances => {
                let topics = PaymentsTopics::new();
                let stage = topologies::balances_stage_every(&topics, tick_interval);
                let app = parsley::Parsley::named("payments").stage(stage).build();
                (app, vec![input(topics.orders.name(), true)], None, false)
            }
            TopologyName::DeadLetter => {
                let topics = PaymentsTopics::new();
                let stage = topologies::balances_stage_dead_letters(&topics, tick_interval);
                let app = parsley::Parsley::named("payments").stage(stage).build();
                (app, vec![input(topics.orders.name(), true)], None, false)
            }
            TopologyName::AuditCut => {
                let topics = PaymentsTopics::new();
                let stage = topologies::audit_cut_stage_every(&topics, tick_interval);
                let app = parsley::Parsley::named("payments").stage(stage).build();
                (app, vec![input(topics.orders.name(), true)], None, false)
            }
            TopologyName::Chain => {
                let topics = ChainTopics::new();
                let app = topologies::chain(&topics, tick_interval);
                (app, vec![input(topics.input.name(), false)], None, false)
            }
            TopologyName::FanIn => {
                let topics = FanInTopics::new();
                let app = topologies::fan_in(&topics, tick_interval);
                let inputs = vec![
                    input(topics.payments.name(), false),
                    input(topics.orders.name(), false),
                ];
                (app, inputs, None, true)
            }
            TopologyName::Diamond => {
                let topics = DiamondTopics::new();
                let app = topologies::diamond(&topics, tick_interval);
                (app, vec![input(topics.events.name(), false)], None, false)
            }
            TopologyName::Sessions => {
                let topics = topologies::SessionTopics::new();
                let app = topologies::sessions(&topics);
                (app, vec![input(topics.clicks.name(), false)], None, false)
            }
            TopologyName::Timers => {
                let topics = TimerTopics::new();
                let app = topologies::timers(&topics);
                (
                    app,
                    vec![input(topics.orders.name(), true)],
                    Some(topics),
                    false,
                )
            }
        };
        let (app, inputs, timers, cross_claims) = built;
        ExampleTopology {
            name,
            app: app.expect("the example topologies compose"),
            inputs,
            timers,
            cross_claims,
        }
    }

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
