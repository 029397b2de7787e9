//! The example topologies as the simulator runs them: the application, its
//! input topics, and how to encode an input record.

use std::time::Duration;

use bytes::Bytes;
use parsley::{App, Codec, Json, TopicName, Utf8, I64};

use crate::sim::scenario::TopologyName;
use crate::topologies::{
    self, ChainTopics, DiamondTopics, FanInTopics, Order, PaymentsTopics, TimerTopics,
};

/// An input topic and the shape of its values.
#[derive(Clone, Debug)]
pub struct InputTopic {
    /// The topic name.
    pub name: TopicName,
    /// Values are `Order { total }` (else a bare integer).
    pub orders: bool,
}

/// An example topology, ready for the simulator: the application, its inputs, and the timer shape if it has one.
pub struct SimTopology {
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

impl SimTopology {
    /// Builds the example topology `name` with the given tick interval.
    pub fn build(name: TopologyName, tick_interval: Duration) -> SimTopology {
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
        SimTopology {
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
