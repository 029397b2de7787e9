//! The example topologies on a real Kafka cluster (feature `live`): the
//! runtime of `parsley-live` runs them; this module plans and produces
//! their inputs. Reading them back and their status are `parsley-live`'s.

pub mod examples;

pub use examples::{
    expected_balances, namespaced, plan_inputs, produce_inputs, ExampleError, PlannedInput,
    LIVE_RESERVATION_MS,
};
