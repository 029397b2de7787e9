//! The harness's own small apps for its driver tests, and helpers that
//! read a driver's trace. They belong to no example: the examples crate
//! tests the examples, these files test the harness.
#![allow(dead_code)]

use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::mutation::Mutation;
use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Tick, Topic, Utf8, I64};
use parsley_sim::sim::{
    Budget, ClockConfig, Draw, FaultRates, Input, OrderStrategy, Settings, Simulation,
    SimulationBuilder, StepRange, TimeStrategy, Workload,
};
use parsley_sim::{TestDriver, TraceEvent};

/// 2023-11-14T22:13:20Z: a fixed initial wall clock.
pub const START: i64 = 1_700_000_000_000;
pub const MINUTE: Duration = Duration::from_secs(60);

/// The text a panic carried (empty when it was not a string).
pub fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The value of `PARSLEY_SIM_REPLAY=` on the report's first `kind` replay
/// line.
pub fn replay_value<'a>(report: &'a str, kind: &str) -> &'a str {
    let start = report
        .find(&format!("PARSLEY_SIM_REPLAY={kind}="))
        .unwrap_or_else(|| panic!("no {kind} replay line in:\n{report}"));
    let value = &report[start + "PARSLEY_SIM_REPLAY=".len()..];
    value.split(' ').next().unwrap()
}

/// Runs this test binary again with `PARSLEY_SIM_REPLAY`, only `test`:
/// whether it passed, and its output.
pub fn rerun(test: &str, replay: &str) -> (bool, String) {
    run_again(
        &[test, "--exact", "--include-ignored", "--nocapture"],
        Some(replay),
    )
}

/// Runs this test binary again with `args`, and `PARSLEY_SIM_REPLAY` set
/// to `replay` (unset for `None`): whether it passed, and its output.
pub fn run_again(args: &[&str], replay: Option<&str>) -> (bool, String) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.args(args);
    match replay {
        Some(replay) => command.env("PARSLEY_SIM_REPLAY", replay),
        None => command.env_remove("PARSLEY_SIM_REPLAY"),
    };
    let output = command.output().expect("the test binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// A stateless stage, `mirror`, that forwards every record of `from` to
/// `to` as it came, key and value.
pub fn mirror(from: &Topic<String, i64>, to: &Topic<String, i64>) -> Stage {
    let forward = to.clone();
    Stage::named("mirror")
        .on(from, move |record| {
            vec![forward.send(record.key().cloned(), *record.value())]
        })
        .into(to)
        .build()
}

/// A driver of `app` with one partition per topic, its wall clock at
/// `start`.
pub fn one_partition_driver(app: &App, start: i64) -> TestDriver {
    TestDriver::builder(app)
        .initial_wall_clock(start)
        .default_partitions(1)
        .build()
        .unwrap()
}

/// A ledger that consumes orders and payments, where an order may claim the
/// payment that caused it; it ticks every minute and folds per key.
pub struct Ledger {
    pub orders: Topic<String, i64>,
    pub payments: Topic<String, i64>,
    pub audits: Topic<String, String>,
    pub app: App,
}

pub fn ledger() -> Ledger {
    let orders: Topic<String, i64> = Topic::new("orders");
    let payments: Topic<String, i64> = Topic::new("payments");
    let audits: Topic<String, String> = Topic::new("audits");
    let cut = audits.clone();
    let stage = Stage::named("ledger")
        .state(Json, || 0i64)
        .on(&orders, |balance: i64, order| {
            Step::of(balance - order.value())
        })
        .on(&payments, |balance: i64, payment| {
            Step::of(balance + payment.value())
        })
        .ticks(MINUTE, move |tick| {
            vec![cut.send(None, format!("cut@{}", tick.timestamp))]
        })
        .into(&audits)
        .build();
    let app = Parsley::named("books").stage(stage).build().unwrap();
    Ledger {
        orders,
        payments,
        audits,
        app,
    }
}

/// A sale at a till; the key is the till.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sale {
    /// The amount taken.
    pub amount: i64,
}

/// The topics of the shop: sales in (JSON values, text keys), receipts out.
#[derive(Clone, Debug)]
pub struct ShopTopics {
    pub sales: Topic<String, Sale>,
    pub receipts: Topic<String, String>,
}

impl ShopTopics {
    pub fn new() -> Self {
        ShopTopics {
            sales: Topic::with_codecs("sales", Utf8, Json),
            receipts: Topic::with_codecs("receipts", Utf8, Utf8),
        }
    }
}

/// The till's logic refuses a negative sale (X5: a logic error).
pub fn taken(sale: &Sale) -> Result<i64, String> {
    if sale.amount < 0 {
        Err(format!("sale of {} is negative", sale.amount))
    } else {
        Ok(sale.amount)
    }
}

/// The `shop` application with its one stage `till`: the takings per till
/// folded from sales into an integer slot, and a `close@<time>` receipt
/// emitted on every tick (every minute). A tick's stamp claims every sale
/// the task had delivered when it fired.
pub fn shop(topics: &ShopTopics) -> Result<App, CompositionError> {
    Parsley::named("shop").stage(till(topics)).build()
}

/// The shop's `till` stage.
pub fn till(topics: &ShopTopics) -> Stage {
    let receipts = topics.receipts.clone();
    Stage::named("till")
        .state(I64, || 0i64)
        .on(&topics.sales, |takings: i64, sale| {
            taken(sale.value()).map(|amount| Step::of(takings + amount))
        })
        .ticks(MINUTE, move |tick| {
            vec![receipts.send(None, format!("close@{}", tick.timestamp))]
        })
        .into(&topics.receipts)
        .build()
}

/// Every fifth quiet tick the tick slot (an integer) resets and a receipt
/// goes out.
fn every_fifth(receipts: &Topic<String, String>, quiet: i64, tick: &Tick) -> Step<i64> {
    if quiet + 1 >= 5 {
        Step::of(0).emit(receipts.send(None, format!("close@{}", tick.timestamp)))
    } else {
        Step::of(quiet + 1)
    }
}

/// The `shop` with the stage `tally` instead: the same takings per till,
/// with a tick fold over the integer tick slot that closes on every fifth
/// quiet tick.
pub fn tally(topics: &ShopTopics) -> Result<App, CompositionError> {
    let receipts = topics.receipts.clone();
    let tally = Stage::named("tally")
        .state(I64, || 0i64)
        .on(&topics.sales, |takings: i64, sale| {
            taken(sale.value()).map(|amount| Step::of(takings + amount))
        })
        .tick_fold(MINUTE, move |quiet, tick| {
            every_fifth(&receipts, quiet, tick)
        })
        .into(&topics.receipts)
        .build();
    Parsley::named("shop").stage(tally).build()
}

/// The topics of the bank: deposits and withdrawals in (integers keyed by
/// account), statements out.
#[derive(Clone, Debug)]
pub struct BankTopics {
    pub deposits: Topic<String, i64>,
    pub withdrawals: Topic<String, i64>,
    pub statements: Topic<String, String>,
}

impl BankTopics {
    pub fn new() -> Self {
        BankTopics {
            deposits: Topic::with_codecs("deposits", Utf8, I64),
            withdrawals: Topic::with_codecs("withdrawals", Utf8, I64),
            statements: Topic::with_codecs("statements", Utf8, Utf8),
        }
    }
}

/// The vault's logic refuses a negative amount (X5: a logic error).
pub fn counted(amount: i64) -> Result<i64, String> {
    if amount < 0 {
        Err(format!("amount {amount} is negative"))
    } else {
        Ok(amount)
    }
}

/// The `bank` application, a fan-in of two sources: its one stage `vault`
/// folds deposits and withdrawals per account into an integer slot and
/// writes a `statement@<time>` on every tick (every `tick_interval`). A
/// withdrawal may claim the deposit that funded it (its producer stamps
/// the claim), so the gate holds it until that deposit is delivered.
pub fn bank(topics: &BankTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    let statements = topics.statements.clone();
    let vault = Stage::named("vault")
        .state(I64, || 0i64)
        .on(&topics.deposits, |balance: i64, deposit| {
            counted(*deposit.value()).map(|amount| Step::of(balance + amount))
        })
        .on(&topics.withdrawals, |balance: i64, withdrawal| {
            counted(*withdrawal.value()).map(|amount| Step::of(balance - amount))
        })
        .ticks(tick_interval, move |tick| {
            vec![statements.send(None, format!("statement@{}", tick.timestamp))]
        })
        .into(&topics.statements)
        .build();
    Parsley::named("bank").stage(vault).build()
}

/// The settings of a fan-in run: two partitions and two instances, 200
/// inputs over 8 keys, a tick a second, every fault (swarmed), 4,000 safety
/// and 5,000 liveness steps.
pub fn fan_in_settings() -> Settings {
    Settings {
        partitions: 2,
        instances: 2,
        workload: Workload {
            inputs: 200,
            keys: 8,
            transactional: 0.25,
        },
        clock: ClockConfig {
            time: TimeStrategy::default(),
            step_ms: StepRange { min: 1, max: 500 },
            tick_interval_ms: 1000,
            commit_interval_ms: 100,
            transaction_timeout_ms: 5000,
            ..ClockConfig::default()
        },
        faults: FaultRates {
            swarm: true,
            abort: 0.02,
            commit_failure: 0.02,
            crash: 0.004,
            move_task: 0.004,
            hanging_transaction: 0.01,
            logic_error: 0.002,
            partial_fetch: 0.3,
            empty_fetch: 0.1,
            marker_lag: 0.5,
            marker_lag_ms: StepRange { min: 5, max: 65 },
        },
        budget: Budget {
            safety_steps: 4000,
            liveness_steps: 5000,
        },
        order: OrderStrategy::Random,
        local_disk: None,
        queries: None,
    }
}

/// The same settings with a shorter budget, for test speed.
pub fn short_fan_in_settings() -> Settings {
    Settings {
        budget: Budget {
            safety_steps: 600,
            liveness_steps: 2000,
        },
        ..fan_in_settings()
    }
}

/// An amount of money, or (when the logic-error fault asks for one) a
/// negative amount the vault refuses.
fn amounts(topic: &Topic<String, i64>) -> Input<String, i64> {
    Input::new(topic, |draw: &mut Draw<'_>| {
        (Some(draw.key()), draw.range(1, 100))
    })
    .rejected(|draw| (Some(draw.key()), -1))
}

/// The bank simulated under `settings` over seeds `0..2000`, with
/// `mutation` planted: deposits and withdrawals drawn per account, and
/// each withdrawal claiming, with probability one half, the latest
/// committed deposit of its partition.
pub fn bank_simulation(settings: Settings, mutation: Option<Mutation>) -> Simulation {
    bank_builder(settings, mutation).build().unwrap()
}

/// [`bank_simulation`]'s builder, for tests that set more knobs.
pub fn bank_builder(settings: Settings, mutation: Option<Mutation>) -> SimulationBuilder {
    let topics = BankTopics::new();
    let tick_interval = Duration::from_millis(settings.clock.tick_interval_ms);
    let app = bank(&topics, tick_interval).unwrap();
    Simulation::builder(app)
        .input(amounts(&topics.deposits))
        .input(amounts(&topics.withdrawals).claims_latest(&topics.deposits, 0.5))
        .settings(settings)
        .seeds(0..2000)
        .planted(mutation)
}

/// The offsets of the ticks a task emitted, in order.
pub fn ticks_emitted(trace: &[TraceEvent]) -> Vec<(i64, u64)> {
    trace
        .iter()
        .filter_map(|event| match event {
            TraceEvent::TickEmitted { at, offset, .. } => Some((*at, *offset)),
            _ => None,
        })
        .collect()
}

/// The (tp, offset) of every tick delivery, in order.
pub fn ticks_delivered(trace: &[TraceEvent]) -> Vec<(String, u64)> {
    trace
        .iter()
        .filter_map(|event| match event {
            TraceEvent::Delivered {
                tp,
                offset,
                tick: Some(_),
                ..
            } => Some((tp.to_string(), *offset)),
            _ => None,
        })
        .collect()
}

/// Every delivery as `tp@offset`, in order.
pub fn deliveries(trace: &[TraceEvent]) -> Vec<String> {
    trace
        .iter()
        .filter_map(|event| match event {
            TraceEvent::Delivered { tp, offset, .. } => Some(format!("{tp}@{offset}")),
            _ => None,
        })
        .collect()
}
