//! Parsley's example topologies, as Kafka Streams keeps its own in
//! `streams/examples`: worked applications built with the public API of
//! `parsley`, run by both drivers.
//!
//! * the topologies themselves (this module), for the docs, the test
//!   driver's tests and the benchmarks;
//! * [`TopologyName`]: the one list of them, from which both registries
//!   are built;
//! * [`simulations`]: each as a simulation, through the public simulation
//!   API like any user's application, and [`registry`], which the
//!   `parsley-sim` binary of this crate runs scenario files over;
//! * [`cpu`]: a process's CPU time from `/proc`, for the benches;
//! * [`planted`]: which shipped scenario exposes each planted bug;
//! * `live` (feature `live`): their inputs on a real Kafka cluster, for
//!   the `parsley-live` binary of this crate and the live tests.
//!
//! Nothing here is part of the harness (`parsley-sim`) or the runtime
//! (`parsley-live`): this crate sits above both, and neither depends on it.

#![warn(missing_docs)]

pub mod as_of;
pub mod consistent;
pub mod cpu;
pub mod example;
#[cfg(feature = "live")]
pub mod live;
pub mod order_labels;
pub mod planted;
pub mod simulations;
pub mod storefront;

pub use as_of::{as_of, AsOfTopics};
pub use consistent::{invoices, ledger, InvoiceTopics, LedgerTopics};
pub use example::{
    namespaced, ExampleError, ExampleTopology, InputTopic, TopologyName, LIVE_RESERVATION_MS,
};
pub use order_labels::{order_labels, order_labels_named, OrderLabelsTopics};
pub use simulations::registry;
pub use storefront::{storefront, Standing, StorefrontTopics};

/// The shipped scenario file `scenarios/<name>.toml` of the repository,
/// wherever the caller is built from (this crate's tests, the fuzz crate).
pub fn scenario_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(format!("{name}.toml"))
}

use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Tick, Topic, Utf8, I64};
use parsley::{Close, Emit, SessionWindows, Windowed, WindowedCodec, Windows};
use parsley::{Expire, Expiring};
use parsley::{Join, JoinWindows};

/// An order against an account; the key is the account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The amount.
    pub total: i64,
}

impl Order {
    /// The amount.
    pub fn total(&self) -> i64 {
        self.total
    }
}

/// The examples refuse negative amounts: their logic fails (X5), which is how
/// the simulator plants a logic error on a chosen record.
pub fn checked(amount: i64) -> Result<i64, String> {
    if amount < 0 {
        Err(format!("amount {amount} is negative"))
    } else {
        Ok(amount)
    }
}

// The examples' wire formats are the serdes a Kafka Streams user would pick:
// keys and text values as UTF-8 (`Serdes.String()`), longs as 8 big-endian
// bytes (`Serdes.Long()`), and JSON for the order struct.

/// A topic of text keyed by text.
fn text_topic(name: String) -> Topic<String, String> {
    Topic::with_codecs(name, Utf8, Utf8)
}

/// A topic of longs keyed by text.
fn long_topic(name: String) -> Topic<String, i64> {
    Topic::with_codecs(name, Utf8, I64)
}

/// A topic of JSON orders keyed by account.
fn order_topic(name: String) -> Topic<String, Order> {
    Topic::with_codecs(name, Utf8, Json)
}

/// The topics of the `payments` examples.
#[derive(Clone, Debug)]
pub struct PaymentsTopics {
    /// Orders, keyed by account.
    pub orders: Topic<String, Order>,
    /// Audit cuts and balances.
    pub audits: Topic<String, String>,
}

impl PaymentsTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        PaymentsTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        PaymentsTopics {
            orders: order_topic(format!("{prefix}orders")),
            audits: text_topic(format!("{prefix}audits")),
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
    balances_stage_every(topics, Duration::from_secs(60))
}

/// `balances` with another tick interval.
pub fn balances_stage_every(topics: &PaymentsTopics, interval: Duration) -> Stage {
    balances_stage_with(topics, interval, false)
}

/// [`balances_stage_every`] with X5's opt-in: the orders its logic refuses
/// (negative amounts) are dead-lettered to `<application.id>-balances-dlq`
/// instead of stopping the task.
pub fn balances_stage_dead_letters(topics: &PaymentsTopics, interval: Duration) -> Stage {
    balances_stage_with(topics, interval, true)
}

fn balances_stage_with(topics: &PaymentsTopics, interval: Duration, dead_letters: bool) -> Stage {
    let audits = topics.audits.clone();
    let mut stage = Stage::named("balances")
        .state(I64, || 0i64)
        .on(&topics.orders, |balance: i64, order| {
            checked(order.value().total()).map(|total| Step::of(balance - total))
        })
        .ticks(interval, move |tick| {
            vec![audits.send(None, format!("cut@{}", tick.timestamp))]
        })
        .into(&topics.audits);
    if dead_letters {
        stage = stage.dead_letter_queue();
    }
    stage.build()
}

/// The `payments` application with the `balances` stage: a balance per account folded from orders, and a cut emitted on every tick.
pub fn balances(topics: &PaymentsTopics) -> Result<App, CompositionError> {
    Parsley::named("payments")
        .stage(balances_stage(topics))
        .build()
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
    audit_cut_stage_every(topics, Duration::from_secs(60))
}

/// The audit cut with another tick interval.
pub fn audit_cut_stage_every(topics: &PaymentsTopics, interval: Duration) -> Stage {
    let audits = topics.audits.clone();
    Stage::named("audit-cut")
        .state(I64, || 0i64)
        .on(&topics.orders, |balance: i64, order| {
            checked(order.value().total()).map(|total| Step::of(balance - total))
        })
        .tick_fold(interval, move |quiet, tick| {
            audit_cut_policy(&audits, quiet, tick)
        })
        .into(&topics.audits)
        .build()
}

/// The `payments` application with the `audit-cut` stage (its tick fold emits a cut on every fifth quiet tick).
pub fn audit_cut(topics: &PaymentsTopics) -> Result<App, CompositionError> {
    Parsley::named("payments")
        .stage(audit_cut_stage(topics))
        .build()
}

/// The topics of the three-stage chain.
#[derive(Clone, Debug)]
pub struct ChainTopics {
    /// The chain's input.
    pub input: Topic<String, i64>,
    /// The first stage's output.
    pub enriched: Topic<String, i64>,
    /// The second stage's output.
    pub metered: Topic<String, i64>,
    /// The chain's output.
    pub output: Topic<String, i64>,
}

impl ChainTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        ChainTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        ChainTopics {
            input: long_topic(format!("{prefix}input")),
            enriched: long_topic(format!("{prefix}enriched")),
            metered: long_topic(format!("{prefix}metered")),
            output: long_topic(format!("{prefix}output")),
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
/// tick emits the tick's time without a key; `settle` forwards everything.
/// Keys are preserved and keyless ticks stay on their task's partition, so
/// the chain is co-partitioned (a tick under one key would send every task's
/// ticks to one partition of `metered`, a fan-in).
pub fn chain(topics: &ChainTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    chain_named("chain", topics, tick_interval)
}

/// [`chain`] under another application id.
pub fn chain_named(
    app_id: &str,
    topics: &ChainTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let enriched = topics.enriched.clone();
    let enrich = Stage::named("enrich")
        .on(&topics.input, move |record| {
            checked(*record.value())
                .map(|value| vec![enriched.send(record.key().cloned(), value * 2)])
        })
        .into(&topics.enriched)
        .build();
    let metered = topics.metered.clone();
    let metered_ticks = topics.metered.clone();
    let meter = Stage::named("meter")
        .state(I64, || 0i64)
        .on(&topics.enriched, move |total: i64, record| {
            let total = total + record.value();
            Step::of(total).emit(metered.send(record.key().cloned(), total))
        })
        .ticks(tick_interval, move |tick| {
            vec![metered_ticks.send(None, tick.timestamp)]
        })
        .into(&topics.metered)
        .build();
    let output = topics.output.clone();
    let settle = Stage::named("settle")
        .on(&topics.metered, move |record| {
            vec![output.send(record.key().cloned(), *record.value())]
        })
        .into(&topics.output)
        .build();
    Parsley::named(app_id)
        .stage(enrich)
        .stage(meter)
        .stage(settle)
        .build()
}

/// The topics of the diamond.
#[derive(Clone, Debug)]
pub struct DiamondTopics {
    /// The source both `enrich` and `score` consume.
    pub events: Topic<String, i64>,
    /// `enrich`'s output: each event doubled.
    pub enriched: Topic<String, i64>,
    /// `score`'s output: the count of events per key, and its keyless ticks.
    pub scored: Topic<String, i64>,
    /// `join`'s output: the running total per key over both branches.
    pub joined: Topic<String, i64>,
}

impl DiamondTopics {
    /// The diamond's topics under their plain names.
    pub fn new() -> Self {
        DiamondTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        DiamondTopics {
            events: long_topic(format!("{prefix}events")),
            enriched: long_topic(format!("{prefix}enriched")),
            scored: long_topic(format!("{prefix}scored")),
            joined: long_topic(format!("{prefix}joined")),
        }
    }
}

impl Default for DiamondTopics {
    fn default() -> Self {
        DiamondTopics::new()
    }
}

/// A diamond: two stages consume the same source (a fan-out, each under its
/// own consumer group, X6) and a third joins their outputs. `enrich` doubles
/// each event into `enriched`; `score` counts events per key, emits the count
/// into `scored`, and on every tick emits the tick's time without a key;
/// `join` consumes only the two branches, keeps a running total per key and
/// emits it, and counts its own ticks in its tick slot. `join` never consumes
/// `events`, so the claims its inputs carry on `events` are carried forward,
/// not waited on (G2, G5).
pub fn diamond(topics: &DiamondTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    diamond_named("diamond", topics, tick_interval)
}

/// [`diamond`] under another application id.
pub fn diamond_named(
    app_id: &str,
    topics: &DiamondTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let enriched = topics.enriched.clone();
    let enrich = Stage::named("enrich")
        .on(&topics.events, move |record| {
            checked(*record.value())
                .map(|value| vec![enriched.send(record.key().cloned(), value * 2)])
        })
        .into(&topics.enriched)
        .build();
    let scored = topics.scored.clone();
    let scored_ticks = topics.scored.clone();
    let score = Stage::named("score")
        .state(I64, || 0i64)
        .on(&topics.events, move |count: i64, record| {
            checked(*record.value()).map(|_| {
                let count = count + 1;
                Step::of(count).emit(scored.send(record.key().cloned(), count))
            })
        })
        .ticks(tick_interval, move |tick| {
            vec![scored_ticks.send(None, tick.timestamp)]
        })
        .into(&topics.scored)
        .build();
    let joined = topics.joined.clone();
    let joined_scores = topics.joined.clone();
    let joined_ticks = topics.joined.clone();
    let join = Stage::named("join")
        .state(I64, || 0i64)
        .on(&topics.enriched, move |total: i64, record| {
            let total = total.wrapping_add(*record.value());
            Step::of(total).emit(joined.send(record.key().cloned(), total))
        })
        .on(&topics.scored, move |total: i64, record| {
            let total = total.wrapping_sub(*record.value());
            Step::of(total).emit(joined_scores.send(record.key().cloned(), total))
        })
        .tick_fold(tick_interval, move |ticks: i64, _tick| {
            Step::of(ticks + 1).emit(joined_ticks.send(None, ticks + 1))
        })
        .into(&topics.joined)
        .build();
    Parsley::named(app_id)
        .stage(enrich)
        .stage(score)
        .stage(join)
        .build()
}

/// The topics of the timer request/reply shape (K2).
#[derive(Clone, Debug)]
pub struct TimerTopics {
    /// Orders, keyed by account.
    pub orders: Topic<String, Order>,
    /// Timer requests: key and fire time (K2).
    pub requests: Topic<String, i64>,
    /// The timer service's fire records (K2).
    pub fires: Topic<String, i64>,
    /// Expired reservations.
    pub expiries: Topic<String, i64>,
}

impl TimerTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        TimerTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        TimerTopics {
            orders: order_topic(format!("{prefix}orders")),
            requests: long_topic(format!("{prefix}timer-requests")),
            fires: long_topic(format!("{prefix}timer-fires")),
            expiries: long_topic(format!("{prefix}expiries")),
        }
    }
}

impl Default for TimerTopics {
    fn default() -> Self {
        TimerTopics::new()
    }
}

/// How long a reservation is held before its timer fires.
pub const RESERVATION_MS: i64 = 30_000;

/// How often the timers example's service looks for due timers.
pub const TIMER_RESOLUTION: Duration = Duration::from_secs(1);

/// Per-entity timers as a topology shape (K2): `reserve` holds each order's
/// total against its key and asks the application's timer service
/// (`parsley::timer`, the stage `timers`) for a timer; the service writes
/// the fire record when the time comes, and `reserve` releases the
/// reservation to `expiries`. The fire record claims the request and so its
/// causes, so the release is gated behind the orders it releases. Every
/// request fires once: a second order on a key before the first fire asks
/// for a second timer, whose fire releases what is left (nothing, if the
/// first fire released it all).
pub fn timers(topics: &TimerTopics) -> Result<App, CompositionError> {
    timers_with("timers", topics, RESERVATION_MS)
}

/// [`timers`] under another application id, holding reservations for
/// `reservation_ms`.
pub fn timers_with(
    app_id: &str,
    topics: &TimerTopics,
    reservation_ms: i64,
) -> Result<App, CompositionError> {
    let requests = topics.requests.clone();
    let expiries = topics.expiries.clone();
    let reserve = Stage::named("reserve")
        .state(I64, || 0i64)
        .on(&topics.orders, move |held: i64, order| {
            checked(order.value().total()).map(|total| {
                Step::of(held + total)
                    .emit(requests.send(order.key().cloned(), order.timestamp() + reservation_ms))
            })
        })
        .on(&topics.fires, move |held: i64, fire| {
            Step::delete().emit(expiries.send(fire.key().cloned(), held))
        })
        .into((&topics.requests, &topics.expiries))
        .build();
    let timers = Stage::named("timers")
        .timer_service(&topics.requests, &topics.fires)
        .resolution(TIMER_RESOLUTION)
        .build();
    Parsley::named(app_id).stage(reserve).stage(timers).build()
}

/// The topics of the regrouping example: wide histories and cross-topic
/// holds.
#[derive(Clone, Debug)]
pub struct RegroupTopics {
    /// Clicks, keyed by user; the value is a score.
    pub clicks: Topic<String, i64>,
    /// Every click again, once under its own key and once under its user
    /// and score (so spread over every partition).
    pub regrouped: Topic<String, i64>,
}

impl RegroupTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        RegroupTopics {
            clicks: long_topic("clicks".into()),
            regrouped: long_topic("regrouped".into()),
        }
    }
}

impl Default for RegroupTopics {
    fn default() -> Self {
        RegroupTopics::new()
    }
}

/// Regrouping on a wide topic: `regroup` writes each click twice to
/// `regrouped`, under its own key (the click's partition) and under its
/// user and score (any partition); `tally` folds both `clicks` and
/// `regrouped` per key. A regrouped record under the click's own key claims
/// the click on the partition `tally`'s task consumes too, so it is held
/// until that task has delivered the click (G2, a cause on another topic);
/// the ones under other keys carry claims on every partition of `clicks`
/// into `tally`'s histories, which grow to dozens of tps on a wide topic
/// (the checkpoints of C3's wide applications).
pub fn regroup(topics: &RegroupTopics) -> Result<App, CompositionError> {
    let out = topics.regrouped.clone();
    let regroup = Stage::named("regroup")
        .on(&topics.clicks, move |click| {
            let user = click.key().cloned().unwrap_or_default();
            vec![
                out.send(Some(user.clone()), *click.value()),
                out.send(Some(format!("{user}/{}", click.value())), *click.value()),
            ]
        })
        .into(&topics.regrouped)
        .build();
    let tally = Stage::named("tally")
        .state(I64, || 0i64)
        .on(&topics.clicks, |total: i64, _click| Step::of(total + 1))
        .on(&topics.regrouped, |total: i64, record| {
            Step::of(total + record.value())
        })
        .build();
    Parsley::named("regroup")
        .stage(regroup)
        .stage(tally)
        .build()
}

/// How many branch ledgers the `branches` example consolidates: enough
/// that a history claiming every one of them passes Kafka's 4,096-byte
/// offset metadata limit ([`parsley::OFFSET_METADATA_BYTES_MAX`]).
pub const BRANCHES: usize = 40;

/// The topics of the branches example: a ledger per branch, each under a
/// long name, and the consolidated totals.
#[derive(Clone, Debug)]
pub struct BranchTopics {
    /// Each branch's ledger entries, keyed by account; the value is an
    /// amount.
    pub ledgers: Vec<Topic<String, i64>>,
    /// Each account's running total over every branch.
    pub consolidated: Topic<String, i64>,
}

impl BranchTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        BranchTopics {
            ledgers: (0..BRANCHES)
                .map(|branch| {
                    long_topic(format!(
                        "ledger-entries-of-branch-{branch:02}-in-the-eu-west-region"
                    ))
                })
                .collect(),
            consolidated: long_topic("consolidated".into()),
        }
    }
}

impl Default for BranchTopics {
    fn default() -> Self {
        BranchTopics::new()
    }
}

/// Consolidating many branch ledgers: `consolidate` folds every branch's
/// entries into each account's running total. Its task's history claims
/// the task's partition of every ledger it delivered from, each under its
/// long topic name, so its checkpoint grows with each branch heard from
/// until, with most of them, it no longer fits Kafka's offset metadata
/// limit and the task stops with `CheckpointTooLarge` (X1): the shape of
/// an application whose histories reach the limit.
pub fn branches(topics: &BranchTopics) -> Result<App, CompositionError> {
    let mut consolidate = Stage::named("consolidate").state(I64, || 0i64);
    for ledger in &topics.ledgers {
        let out = topics.consolidated.clone();
        consolidate = consolidate.on(ledger, move |total: i64, entry| {
            let total = total.wrapping_add(*entry.value());
            Step::of(total).emit(out.send(entry.key().cloned(), total))
        });
    }
    let consolidate = consolidate.into(&topics.consolidated).build();
    Parsley::named("branches").stage(consolidate).build()
}

/// The topics of the sessions example (K2).
#[derive(Clone, Debug)]
pub struct SessionTopics {
    /// Clicks, keyed by user; the value is the page (unused by the logic).
    pub clicks: Topic<String, i64>,
    /// Timer requests: the time a user's session would close (K2).
    pub requests: Topic<String, i64>,
    /// The timer service's fires (K2).
    pub fires: Topic<String, i64>,
    /// Closed sessions: the user and the session's click count.
    pub summaries: Topic<String, i64>,
}

impl SessionTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        SessionTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        SessionTopics {
            clicks: long_topic(format!("{prefix}clicks")),
            requests: long_topic(format!("{prefix}session-timer-requests")),
            fires: long_topic(format!("{prefix}session-timer-fires")),
            summaries: long_topic(format!("{prefix}session-summaries")),
        }
    }
}

impl Default for SessionTopics {
    fn default() -> Self {
        SessionTopics::new()
    }
}

/// How long a user stays idle before their session closes.
pub const SESSION_GAP_MS: i64 = 30_000;

/// A user's open session: its clicks and the time of the last one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Clicks so far.
    pub clicks: i64,
    /// The last click's timestamp.
    pub last_click: i64,
}

/// Sessions with timers (K2): `sessions` keeps each user's open session and
/// asks the timer service (`session-timers`) for a timer at every click, a
/// gap after it; a fire closes the session when it is the last click's
/// timer (later clicks asked for later timers, so earlier fires find the
/// session still going) and writes its summary; `report` folds the
/// summaries into a count of clicks per user in closed sessions.
pub fn sessions(topics: &SessionTopics) -> Result<App, CompositionError> {
    sessions_named("sessions", topics, SESSION_GAP_MS)
}

/// [`sessions`] under another application id and gap.
pub fn sessions_named(
    app_id: &str,
    topics: &SessionTopics,
    gap_ms: i64,
) -> Result<App, CompositionError> {
    let requests = topics.requests.clone();
    let summaries = topics.summaries.clone();
    let sessions = Stage::named("sessions")
        .state(Json, Session::default)
        .on(&topics.clicks, move |session: Session, click| {
            let next = Session {
                clicks: session.clicks + 1,
                last_click: click.timestamp(),
            };
            Step::of(next).emit(requests.send(click.key().cloned(), click.timestamp() + gap_ms))
        })
        .on(&topics.fires, move |session: Session, fire| {
            if session.clicks > 0 && session.last_click + gap_ms == *fire.value() {
                Step::delete().emit(summaries.send(fire.key().cloned(), session.clicks))
            } else {
                Step::of(session)
            }
        })
        .into((&topics.requests, &topics.summaries))
        .build();
    let report = Stage::named("report")
        .state(I64, || 0i64)
        .on(&topics.summaries, |clicks: i64, summary| {
            Step::of(clicks + summary.value())
        })
        .build();
    let timers = Stage::named("session-timers")
        .timer_service(&topics.requests, &topics.fires)
        .resolution(TIMER_RESOLUTION)
        .build();
    Parsley::named(app_id)
        .stage(sessions)
        .stage(timers)
        .stage(report)
        .build()
}

/// The topics of the windows example (W1–W5).
#[derive(Clone, Debug)]
pub struct WindowTopics {
    /// Sales, keyed by product; the value is the amount.
    pub sales: Topic<String, i64>,
    /// Revenue per product per second, each second once it closes.
    pub per_second: Topic<Windowed<String>, i64>,
    /// Sales too late for their second (W3), as they came.
    pub late_sales: Topic<String, i64>,
    /// Sales per product over two seconds, every second, on each update.
    pub trend: Topic<Windowed<String>, i64>,
    /// Each closed second's revenue, keyed by product again.
    pub revenue: Topic<String, i64>,
    /// Each product's buying sprees: sales at most
    /// [`SPREE_GAP_MS`] apart, their count and total, once a spree closes.
    pub sprees: Topic<Windowed<String>, Spree>,
}

/// A spree's figures (the `sprees` session aggregation of the windows
/// example).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spree {
    /// How many sales it holds.
    pub sales: i64,
    /// Their amounts' sum.
    pub total: i64,
}

impl Spree {
    /// The spree with one more sale of `amount`, refused for an amount the
    /// examples refuse ([`checked`]).
    pub fn with_sale(self, amount: i64) -> Result<Spree, String> {
        checked(amount).map(|amount| Spree {
            sales: self.sales + 1,
            total: self.total + amount,
        })
    }

    /// Two sprees a bridging sale joined into one (W5).
    pub fn merged(self, other: Spree) -> Spree {
        Spree {
            sales: self.sales + other.sales,
            total: self.total + other.total,
        }
    }
}

impl WindowTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        WindowTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        let windowed = |name: String| Topic::with_codecs(name, WindowedCodec(Utf8), I64);
        WindowTopics {
            sales: long_topic(format!("{prefix}sales")),
            per_second: windowed(format!("{prefix}revenue-per-second")),
            late_sales: long_topic(format!("{prefix}late-sales")),
            trend: windowed(format!("{prefix}sales-trend")),
            revenue: long_topic(format!("{prefix}revenue")),
            sprees: Topic::with_codecs(format!("{prefix}sprees"), WindowedCodec(Utf8), Json),
        }
    }
}

impl Default for WindowTopics {
    fn default() -> Self {
        WindowTopics::new()
    }
}

/// The revenue windows' size and grace, in milliseconds.
pub const REVENUE_WINDOW_MS: u64 = 1_000;
/// How long a revenue window takes late sales (W2).
pub const REVENUE_GRACE_MS: u64 = 250;
/// The inactivity gap of a spree (W5): sales of a product at most this far
/// apart belong to one spree.
pub const SPREE_GAP_MS: u64 = 300;
/// How long after its end plus the gap a spree takes late sales (W2).
pub const SPREE_GRACE_MS: u64 = 100;

/// Windowed aggregation (W1–W4), fanned out: `revenue-per-second` sums each
/// product's sales per second (tumbling windows, 250 ms of grace, closed by
/// stream time, late sales to their own topic) and writes each second once
/// it closes; `sales-trend` counts each product's sales over two seconds,
/// every second (hopping windows closed by the wall clock at the tick
/// interval), on every update; `revenue` re-keys each closed second to its
/// product; `sprees` counts and sums each product's sales per session
/// (W5: sales at most 300 ms apart, 100 ms of grace, closed by stream time,
/// late sales only counted).
pub fn windows(topics: &WindowTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    windows_named("windows", topics, tick_interval)
}

/// [`windows`] under another application id.
pub fn windows_named(
    app_id: &str,
    topics: &WindowTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let per_second = Stage::named("revenue-per-second")
        .windowed(
            Windows::tumbling(Duration::from_millis(REVENUE_WINDOW_MS))
                .grace(Duration::from_millis(REVENUE_GRACE_MS)),
        )
        .aggregate(
            &topics.sales,
            I64,
            || 0i64,
            |total, sale| checked(*sale.value()).map(|amount| total + amount),
        )
        .late_records_to(&topics.late_sales)
        .into(&topics.per_second)
        .build();
    let trend = Stage::named("sales-trend")
        .windowed(Windows::hopping(
            Duration::from_secs(2),
            Duration::from_secs(1),
        ))
        .aggregate(&topics.sales, I64, || 0i64, |count, _sale| count + 1)
        .emit(Emit::OnUpdate)
        .close_by(Close::WallClock {
            resolution: tick_interval,
        })
        .into(&topics.trend)
        .build();
    let revenue = Stage::named("revenue")
        .on(&topics.per_second, {
            let revenue = topics.revenue.clone();
            move |window| {
                let product = window.key().map(|windowed| windowed.key.clone());
                vec![revenue.send(product, *window.value())]
            }
        })
        .into(&topics.revenue)
        .build();
    let sprees = Stage::named("sprees")
        .windowed(
            SessionWindows::with_inactivity_gap(Duration::from_millis(SPREE_GAP_MS))
                .grace(Duration::from_millis(SPREE_GRACE_MS)),
        )
        .aggregate(
            &topics.sales,
            Json,
            Spree::default,
            |spree: Spree, sale| spree.with_sale(*sale.value()),
            Spree::merged,
        )
        .into(&topics.sprees)
        .build();
    Parsley::named(app_id)
        .stage(per_second)
        .stage(trend)
        .stage(revenue)
        .stage(sprees)
        .build()
}

/// The topics of the enrichment example (J1–J4).
#[derive(Clone, Debug)]
pub struct EnrichmentTopics {
    /// Each customer's discount in percent, keyed by customer: the table
    /// (a tombstone deletes the customer).
    pub discounts: Topic<String, i64>,
    /// Orders, keyed by customer; the value is the amount.
    pub orders: Topic<String, i64>,
    /// Every order priced at its customer's discount (a left join).
    pub priced: Topic<String, PricedOrder>,
    /// The orders of customers with a discount, at the discount (an inner
    /// join).
    pub discounted: Topic<String, i64>,
}

impl EnrichmentTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        EnrichmentTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        EnrichmentTopics {
            discounts: long_topic(format!("{prefix}discounts")),
            orders: long_topic(format!("{prefix}orders")),
            priced: Topic::with_codecs(format!("{prefix}priced-orders"), Utf8, Json),
            discounted: long_topic(format!("{prefix}discounted-orders")),
        }
    }
}

impl Default for EnrichmentTopics {
    fn default() -> Self {
        EnrichmentTopics::new()
    }
}

/// An order priced at its customer's discount, if the customer has one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PricedOrder {
    /// The order's amount.
    pub amount: i64,
    /// The customer's discount in percent, when the table has a row.
    pub discount: Option<i64>,
    /// What the customer pays.
    pub due: i64,
}

/// An order of `amount` priced at `discount`, if the customer has one;
/// refused as [`discounted`] and [`checked`] refuse.
pub fn priced(amount: i64, discount: Option<&i64>) -> Result<PricedOrder, String> {
    let due = match discount {
        Some(discount) => discounted(amount, *discount)?,
        None => checked(amount)?,
    };
    Ok(PricedOrder {
        amount,
        discount: discount.copied(),
        due,
    })
}

/// [`priced`] for a join with a grace period (J19), which never refuses:
/// an amount `priced` refuses is due 0. A held order is joined at the
/// delivery that releases it, and a joiner's refusal there would refuse
/// that delivery, not the order's own.
pub fn priced_or_nothing_due(amount: i64, discount: Option<&i64>) -> PricedOrder {
    priced(amount, discount).unwrap_or(PricedOrder {
        amount,
        discount: discount.copied(),
        due: 0,
    })
}

/// How long the `discounted` join of the enrichment example waits for a
/// source it is caught up on to get more (G9).
pub const DISCOUNT_IDLE_MS: u64 = 200;

/// `amount` less `discount` percent, rounded down; refused for a negative
/// amount or a discount outside 0..=100.
pub fn discounted(amount: i64, discount: i64) -> Result<i64, String> {
    let amount = checked(amount)?;
    if !(0..=100).contains(&discount) {
        return Err(format!("discount {discount}% is not a percentage"));
    }
    Ok(amount - amount * discount / 100)
}

/// Stream–table joins (J1–J4), fanned out over one table: `pricing` prices
/// every order at its customer's discount (a left join: full price without
/// one) and `discounted` writes the orders of customers with a discount (an
/// inner join) in timestamp order, waiting for records known to be in
/// either topic and up to [`DISCOUNT_IDLE_MS`] for one it is caught up on
/// (G9). Orders may claim the discount update
/// they were placed after (J3): the gate then holds them until their task
/// has it.
pub fn enrichment(topics: &EnrichmentTopics) -> Result<App, CompositionError> {
    enrichment_named("enrichment", topics)
}

/// [`enrichment`] under another application id.
pub fn enrichment_named(app_id: &str, topics: &EnrichmentTopics) -> Result<App, CompositionError> {
    let pricing = Stage::named("pricing")
        .join(Join::stream_table(&topics.orders, &topics.discounts))
        .left(|order, discount: Option<&i64>| priced(*order.value(), discount))
        .into(&topics.priced)
        .build();
    let discounted_orders = Stage::named("discounted")
        .join(Join::stream_table(&topics.orders, &topics.discounts))
        .inner(|order, discount: &i64| discounted(*order.value(), *discount))
        .synchronise_by_timestamp(Duration::from_millis(DISCOUNT_IDLE_MS))
        .into(&topics.discounted)
        .build();
    Parsley::named(app_id)
        .stage(pricing)
        .stage(discounted_orders)
        .build()
}

/// A dedupe's fold over a key's "seen" flag: the first record of a key
/// (since its state last expired) goes to `unique`, the rest nowhere;
/// amounts the examples refuse ([`checked`]) are refused.
pub fn first_sightings_to(
    unique: &Topic<String, i64>,
) -> impl Fn(bool, &parsley::Record<String, i64>) -> Result<Step<bool>, String> + Send + Sync + 'static
{
    let unique = unique.clone();
    move |seen, order| {
        let amount = checked(*order.value())?;
        Ok(match seen {
            true => Step::of(true),
            false => Step::of(true).emit(unique.send(order.key().cloned(), amount)),
        })
    }
}

/// The topics of the dedupe example (E1–E3).
#[derive(Clone, Debug)]
pub struct DedupeTopics {
    /// Orders, keyed by order id; the value is the amount. Producers retry,
    /// so an id may come more than once.
    pub orders: Topic<String, i64>,
    /// Each order id once within [`DEDUPE_WINDOW_MS`] of its first sighting.
    pub unique: Topic<String, i64>,
    /// Per id, how many times it came since it was last quiet for
    /// [`QUIET_MS`] of wall clock.
    pub repeats: Topic<String, i64>,
}

impl DedupeTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        DedupeTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        DedupeTopics {
            orders: long_topic(format!("{prefix}orders")),
            unique: long_topic(format!("{prefix}unique-orders")),
            repeats: long_topic(format!("{prefix}order-repeats")),
        }
    }
}

impl Default for DedupeTopics {
    fn default() -> Self {
        DedupeTopics::new()
    }
}

/// How long after an id's first sighting its repeats are dropped, in
/// milliseconds (event time).
pub const DEDUPE_WINDOW_MS: u64 = 1_000;
/// How long an id must be quiet, by the wall clock, for its repeat count
/// to start over, in milliseconds.
pub const QUIET_MS: u64 = 2_000;

/// Expiring state (E1–E3), fanned out over one source: `dedupe` writes each
/// order id once within a second of its first sighting (state from the
/// first write, expired by stream time), and `repeats` counts each id's
/// arrivals until it has been quiet for two seconds of wall clock (state
/// from the last write, expired by ticks).
pub fn dedupe(topics: &DedupeTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    dedupe_named("dedupe", topics, tick_interval)
}

/// [`dedupe`] under another application id.
pub fn dedupe_named(
    app_id: &str,
    topics: &DedupeTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let unique = Stage::named("dedupe")
        .expiring(Expiring::after(Duration::from_millis(DEDUPE_WINDOW_MS)).from_first_write())
        .fold(
            &topics.orders,
            Json,
            || false,
            first_sightings_to(&topics.unique),
        )
        .into(&topics.unique)
        .build();
    let repeats = Stage::named("repeats")
        .expiring(
            Expiring::after(Duration::from_millis(QUIET_MS)).expire_by(Expire::WallClock {
                resolution: tick_interval,
            }),
        )
        .fold(&topics.orders, Json, || 0i64, {
            let repeats = topics.repeats.clone();
            move |count: i64, order| {
                let count = count + 1;
                Step::of(count).emit(repeats.send(order.key().cloned(), count))
            }
        })
        .into(&topics.repeats)
        .build();
    Parsley::named(app_id).stage(unique).stage(repeats).build()
}

/// A sale: which product, and for how much. Keyed by customer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sale {
    /// The product sold.
    pub product: String,
    /// The amount.
    pub amount: i64,
}

/// The topics of the by-product example (R1, R3 with W1–W4).
#[derive(Clone, Debug)]
pub struct ByProductTopics {
    /// Sales, keyed by customer.
    pub sales: Topic<String, Sale>,
    /// Sales at the price each customer pays, keyed by customer.
    pub priced: Topic<String, Sale>,
    /// Revenue per product per second, each second once it closes.
    pub revenue: Topic<Windowed<String>, i64>,
    /// How many closed product-seconds of each size (`small`, `large`) so
    /// far, keyed by size.
    pub sizes: Topic<String, i64>,
}

impl ByProductTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        ByProductTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        ByProductTopics {
            sales: Topic::with_codecs(format!("{prefix}customer-sales"), Utf8, Json),
            priced: Topic::with_codecs(format!("{prefix}priced-sales"), Utf8, Json),
            revenue: Topic::with_codecs(
                format!("{prefix}product-revenue"),
                WindowedCodec(Utf8),
                I64,
            ),
            sizes: Topic::with_codecs(format!("{prefix}revenue-sizes"), Utf8, I64),
        }
    }
}

impl Default for ByProductTopics {
    fn default() -> Self {
        ByProductTopics::new()
    }
}

/// From a customer's this-many-th sale on, they pay [`LOYAL_PERCENT`] of
/// the price.
pub const LOYAL_FROM: i64 = 3;

/// What a loyal customer pays, in percent of the price.
pub const LOYAL_PERCENT: i64 = 90;

/// A product-second's revenue from this much on is `large`.
pub const LARGE_REVENUE: i64 = 200;

/// Re-keying within a stage (R1, R3), on records and on ticks: a fold per
/// customer prices each sale (from a customer's [`LOYAL_FROM`]th sale on,
/// at [`LOYAL_PERCENT`] %) and writes it to `priced-sales`, keyed by
/// customer; the same stage writes each priced sale again, re-keyed by
/// product, to the derived topic `by-product-by-product-repartition`. The
/// revenue per product per second is summed from there (tumbling windows
/// with grace, closed by the wall clock, so each is written on a tick) and
/// written to `product-revenue`; the windows' stage writes each result
/// again, re-keyed by its size (`large` from [`LARGE_REVENUE`]), to
/// `by-product-by-size-repartition`, and a third stage counts the
/// product-seconds of each size. Only the sales, priced sales, revenue and
/// size counts are declared; the repartition topics, the changelogs, the
/// windows' tick topic and the topics' partition counts are derived.
pub fn by_product(topics: &ByProductTopics) -> Result<App, CompositionError> {
    by_product_named("by-product", topics)
}

/// [`by_product`] under another application id.
pub fn by_product_named(app_id: &str, topics: &ByProductTopics) -> Result<App, CompositionError> {
    let app = Parsley::named(app_id);
    let priced = topics.priced.clone();
    let pricing = Stage::named("pricing")
        .state(Json, || 0i64)
        .on(&topics.sales, move |sales: i64, sale| {
            let count = sales + 1;
            let percent = if count >= LOYAL_FROM {
                LOYAL_PERCENT
            } else {
                100
            };
            let amount = checked(sale.value().amount)? * percent / 100;
            let priced_sale = Sale {
                product: sale.value().product.clone(),
                amount,
            };
            Ok::<_, String>(
                Step::of(count).emit(priced.send(sale.key().cloned().clone(), priced_sale)),
            )
        })
        .into(&topics.priced)
        .build();
    let (pricing, sales_by_product) =
        app.rekey_output("by-product", pricing, &topics.priced, Utf8, |_, sale| {
            sale.product.clone()
        });
    let revenue = Stage::named("product-revenue")
        .windowed(
            Windows::tumbling(Duration::from_millis(REVENUE_WINDOW_MS))
                .grace(Duration::from_millis(REVENUE_GRACE_MS)),
        )
        .aggregate(
            &sales_by_product,
            I64,
            || 0i64,
            |total, sale| checked(sale.value().amount).map(|amount| total + amount),
        )
        .close_by(Close::WallClock {
            resolution: Duration::from_millis(REVENUE_GRACE_MS),
        })
        .into(&topics.revenue)
        .build();
    let (revenue, by_size) =
        app.rekey_output("by-size", revenue, &topics.revenue, Utf8, |_, total| {
            match *total >= LARGE_REVENUE {
                true => "large",
                false => "small",
            }
            .to_string()
        });
    let sizes = topics.sizes.clone();
    let counting = Stage::named("revenue-sizes")
        .state(Json, || 0i64)
        .on(&by_size, move |count: i64, window| {
            Step::of(count + 1).emit(sizes.send(window.key().cloned().clone(), count + 1))
        })
        .into(&topics.sizes)
        .build();
    app.stage(pricing).stage(revenue).stage(counting).build()
}

/// The topics of the fan-in.
#[derive(Clone, Debug)]
pub struct FanInTopics {
    /// Payments, keyed by account.
    pub payments: Topic<String, i64>,
    /// Orders, keyed by account.
    pub orders: Topic<String, i64>,
    /// Audit cuts and balances.
    pub audits: Topic<String, String>,
}

impl FanInTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        FanInTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        FanInTopics {
            payments: long_topic(format!("{prefix}payments")),
            orders: long_topic(format!("{prefix}orders")),
            audits: text_topic(format!("{prefix}audits")),
        }
    }
}

impl Default for FanInTopics {
    fn default() -> Self {
        FanInTopics::new()
    }
}

/// A fan-in of two sources where orders may claim the payments that funded
/// them: `ledger` folds both per key and cuts on every tick, and the gate
/// holds an order until its payment is delivered.
pub fn fan_in(topics: &FanInTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    fan_in_named("fan-in", topics, tick_interval)
}

/// [`fan_in`] under another application id.
pub fn fan_in_named(
    app_id: &str,
    topics: &FanInTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let audits = topics.audits.clone();
    let ledger = Stage::named("ledger")
        .state(I64, || 0i64)
        .on(&topics.payments, |balance: i64, payment| {
            checked(*payment.value()).map(|amount| Step::of(balance + amount))
        })
        .on(&topics.orders, |balance: i64, order| {
            checked(*order.value()).map(|amount| Step::of(balance - amount))
        })
        .ticks(tick_interval, move |tick| {
            vec![audits.send(None, format!("cut@{}", tick.timestamp))]
        })
        .into(&topics.audits)
        .build();
    Parsley::named(app_id).stage(ledger).build()
}

/// The topics of the fan-out.
#[derive(Clone, Debug)]
pub struct FanOutTopics {
    /// The source both stages consume.
    pub clicks: Topic<String, i64>,
    /// `count`'s output: the running count of clicks per key.
    pub counts: Topic<String, i64>,
    /// `mirror`'s output: each click as it came.
    pub mirrored: Topic<String, i64>,
}

impl FanOutTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        FanOutTopics {
            clicks: long_topic("clicks".to_string()),
            counts: long_topic("counts".to_string()),
            mirrored: long_topic("mirrored".to_string()),
        }
    }
}

impl Default for FanOutTopics {
    fn default() -> Self {
        FanOutTopics::new()
    }
}

/// A fan-out: `count` (stateful) and `mirror` (stateless) both consume
/// `clicks`, each under its own consumer group (X6), so a restart of one
/// stage's task resumes from that stage's own position.
pub fn fan_out(topics: &FanOutTopics) -> Result<App, CompositionError> {
    let counts = topics.counts.clone();
    let count = Stage::named("count")
        .state(I64, || 0i64)
        .on(&topics.clicks, move |seen: i64, click| {
            checked(*click.value())
                .map(|_| Step::of(seen + 1).emit(counts.send(click.key().cloned(), seen + 1)))
        })
        .into(&topics.counts)
        .build();
    let mirrored = topics.mirrored.clone();
    let mirror = Stage::named("mirror")
        .on(&topics.clicks, move |click| {
            checked(*click.value()).map(|value| vec![mirrored.send(click.key().cloned(), value)])
        })
        .into(&topics.mirrored)
        .build();
    Parsley::named("shop").stage(count).stage(mirror).build()
}

/// The snippets of `README.md`, run as doc tests here, where the runtime
/// (for "Run it on Kafka", feature `live`), the harness (for "Test your
/// topology") and the examples are all at hand, so that none of them can
/// drift from the API.
#[cfg(all(doctest, feature = "live"))]
#[doc = include_str!("../../../README.md")]
pub struct Readme;

/// The examples of `docs/CONCEPTS.md`, run as doc tests under the
/// `TestDriver` so the concepts page cannot drift from the behaviour.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/CONCEPTS.md")]
pub struct Concepts;

/// The topics of the settlement example (J5–J7).
#[derive(Clone, Debug)]
pub struct SettlementTopics {
    /// Orders, keyed by order id; the value is the amount due.
    pub orders: Topic<String, i64>,
    /// Payments, keyed by the order id they pay; the value is the amount.
    pub payments: Topic<String, i64>,
    /// Each order with each payment made within [`SETTLE_WITHIN_MS`] of it,
    /// and each order or payment that met none (an outer join).
    pub settlements: Topic<String, Settlement>,
    /// Each order with each payment within the window, in timestamp order
    /// (an inner join, G9).
    pub paid: Topic<String, i64>,
}

impl SettlementTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        SettlementTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        SettlementTopics {
            orders: long_topic(format!("{prefix}orders")),
            payments: long_topic(format!("{prefix}payments")),
            settlements: Topic::with_codecs(format!("{prefix}settlements"), Utf8, Json),
            paid: long_topic(format!("{prefix}paid-orders")),
        }
    }
}

impl Default for SettlementTopics {
    fn default() -> Self {
        SettlementTopics::new()
    }
}

/// An order and a payment that met within the join window, or either alone
/// once its window closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settlement {
    /// The order's amount, when there is an order.
    pub order: Option<i64>,
    /// The payment's amount, when there is a payment.
    pub payment: Option<i64>,
}

/// How far apart in time an order and its payment may be to meet, in
/// milliseconds (J5).
pub const SETTLE_WITHIN_MS: u64 = 300;

/// How long after its window an order or a payment is held for a match
/// that arrives out of order, in milliseconds (J6).
pub const SETTLE_GRACE_MS: u64 = 150;

/// How long the `paid` join waits for a side it is caught up on to get
/// more (G9).
pub const SETTLE_IDLE_MS: u64 = 200;

/// Stream–stream joins (J5–J7) over orders and payments: `settle` writes
/// each order with each payment within [`SETTLE_WITHIN_MS`] of it and,
/// once its window and [`SETTLE_GRACE_MS`] of grace have closed, each
/// order or payment that met none (an outer join); `paid` writes the paid
/// amount of each pair (an inner join) in timestamp order (G9).
pub fn settlement(topics: &SettlementTopics) -> Result<App, CompositionError> {
    settlement_named("settlement", topics)
}

/// [`settlement`] under another application id.
pub fn settlement_named(app_id: &str, topics: &SettlementTopics) -> Result<App, CompositionError> {
    let window = JoinWindows::time_difference(Duration::from_millis(SETTLE_WITHIN_MS))
        .grace(Duration::from_millis(SETTLE_GRACE_MS));
    let settle = Stage::named("settle")
        .join(Join::stream_stream(
            &topics.orders,
            &topics.payments,
            window,
        ))
        .outer(|_, order: Option<&i64>, payment: Option<&i64>| Settlement {
            order: order.copied(),
            payment: payment.copied(),
        })
        .into(&topics.settlements)
        .build();
    let paid = Stage::named("paid")
        .join(Join::stream_stream(
            &topics.orders,
            &topics.payments,
            window,
        ))
        .inner(|_, _order: &i64, payment: &i64| *payment)
        .synchronise_by_timestamp(Duration::from_millis(SETTLE_IDLE_MS))
        .into(&topics.paid)
        .build();
    Parsley::named(app_id).stage(settle).stage(paid).build()
}

/// The topics of the credit example (J8, J9).
#[derive(Clone, Debug)]
pub struct CreditTopics {
    /// Each account's balance, keyed by account; a tombstone closes it.
    pub balances: Topic<String, i64>,
    /// Each account's credit limit; a tombstone withdraws it.
    pub limits: Topic<String, i64>,
    /// Each account with both a balance and a limit: its headroom, the
    /// limit less the balance (an inner join), a tombstone once it loses
    /// either.
    pub headroom: Topic<String, i64>,
    /// Each account with a balance or a limit: both, as far as known (an
    /// outer join), a tombstone once it has neither.
    pub accounts: Topic<String, Account>,
}

impl CreditTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        CreditTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        CreditTopics {
            balances: long_topic(format!("{prefix}balances")),
            limits: long_topic(format!("{prefix}credit-limits")),
            headroom: long_topic(format!("{prefix}headroom")),
            accounts: Topic::with_codecs(format!("{prefix}accounts"), Utf8, Json),
        }
    }
}

impl Default for CreditTopics {
    fn default() -> Self {
        CreditTopics::new()
    }
}

/// An account's balance and credit limit, as far as known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// The latest balance, when the account has one.
    pub balance: Option<i64>,
    /// The latest credit limit, when the account has one.
    pub limit: Option<i64>,
}

/// Table–table joins (J8) of balances and credit limits: `headroom` keeps
/// each account's limit less its balance while it has both (an inner
/// join), `accounts` each account's balance and limit while it has either
/// (an outer join); each writes a tombstone when an account loses its
/// result.
pub fn credit(topics: &CreditTopics) -> Result<App, CompositionError> {
    credit_named("credit", topics)
}

/// [`credit`] under another application id.
pub fn credit_named(app_id: &str, topics: &CreditTopics) -> Result<App, CompositionError> {
    let headroom = Stage::named("headroom")
        .join(Join::table_table(&topics.balances, &topics.limits))
        .inner(|_, balance: &i64, limit: &i64| limit - balance)
        .into(&topics.headroom)
        .build();
    let accounts = Stage::named("accounts")
        .join(Join::table_table(&topics.balances, &topics.limits))
        .outer(|_, balance: Option<&i64>, limit: Option<&i64>| Account {
            balance: balance.copied(),
            limit: limit.copied(),
        })
        .into(&topics.accounts)
        .build();
    Parsley::named(app_id)
        .stage(headroom)
        .stage(accounts)
        .build()
}
