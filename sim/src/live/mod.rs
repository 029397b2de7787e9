//! The example topologies on a real Kafka cluster (feature `live`): the
//! runtime of `parsley::live` runs them; this module plans and produces
//! their inputs and reads their committed topics back for the checker.

pub mod examples;
pub mod progress;
pub mod readback;
pub mod scheduler;

pub use examples::{
    expected_balances, namespaced, plan_inputs, produce_inputs, ExampleError, PlannedInput,
    LIVE_RESERVATION_MS,
};
pub use progress::{
    caught_up, final_state, keyed_outputs, task_status, wait_caught_up, TaskStatus, TpStatus,
};
pub use readback::{read_committed, ReadBack};
pub use scheduler::{LiveScheduler, SchedulerError};
