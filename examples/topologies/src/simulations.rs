//! The example topologies as simulations, built with the public simulation
//! API like any user's application: an input generator per source, the
//! records their logic rejects and the fan-in's declared causality.

use std::time::Duration;

use crate::{
    ByProductTopics, ChainTopics, CreditTopics, DedupeTopics, DiamondTopics, EnrichmentTopics,
    FanInTopics, FanOutTopics, Order, PaymentsTopics, RegroupTopics, SessionTopics,
    SettlementTopics, StorefrontTopics, TimerTopics, TopologyName, WindowTopics,
};
use parsley_sim::sim::{BoxError, Draw, Input, Registry, Settings, Simulation, SimulationBuilder};

/// An amount the examples accept.
fn amount(draw: &mut Draw<'_>) -> i64 {
    draw.range(1, 100)
}

/// The examples refuse negative amounts ([`crate::checked`]).
const REJECTED: i64 = -1;

fn tick_interval(settings: &Settings) -> Duration {
    Duration::from_millis(settings.clock.tick_interval_ms)
}

fn orders_input(orders: &parsley::Topic<String, Order>) -> Input<String, Order> {
    Input::new(orders, |draw| {
        (
            Some(draw.key()),
            Order {
                total: amount(draw),
            },
        )
    })
    .rejected(|draw| (Some(draw.key()), Order { total: REJECTED }))
}

/// A source of integer amounts under `k<N>` keys, with rejected ones.
fn amounts(topic: &parsley::Topic<String, i64>) -> Input<String, i64> {
    Input::new(topic, |draw| (Some(draw.key()), amount(draw)))
        .rejected(|draw| (Some(draw.key()), REJECTED))
}

/// `balances`: orders folded per account, a cut on every tick.
pub fn balances(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = PaymentsTopics::new();
    let stage = crate::balances_stage_every(&topics, tick_interval(settings));
    let app = parsley::Parsley::named("payments").stage(stage).build()?;
    Ok(Simulation::builder(app).input(orders_input(&topics.orders)))
}

/// `audit-cut`: the fifth-tick cut over a tick slot.
pub fn audit_cut(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = PaymentsTopics::new();
    let stage = crate::audit_cut_stage_every(&topics, tick_interval(settings));
    let app = parsley::Parsley::named("payments").stage(stage).build()?;
    Ok(Simulation::builder(app).input(orders_input(&topics.orders)))
}

/// `chain`: three stages in a row, ticks in the middle one.
pub fn chain(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = ChainTopics::new();
    let app = crate::chain(&topics, tick_interval(settings))?;
    Ok(Simulation::builder(app).input(amounts(&topics.input)))
}

/// `fan-in`: payments and orders into one ledger; an order may claim the
/// latest committed payment of its partition.
pub fn fan_in(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = FanInTopics::new();
    let app = crate::fan_in(&topics, tick_interval(settings))?;
    Ok(Simulation::builder(app)
        .input(amounts(&topics.payments))
        .input(amounts(&topics.orders).claims_latest(&topics.payments, 0.5)))
}

/// `diamond`: two stages on one source, a third joining their outputs.
pub fn diamond(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = DiamondTopics::new();
    let app = crate::diamond(&topics, tick_interval(settings))?;
    Ok(Simulation::builder(app).input(amounts(&topics.events)))
}

/// `fan-out`: two stages, one stateful and one not, on the same source.
pub fn fan_out(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = FanOutTopics::new();
    let app = crate::fan_out(&topics)?;
    Ok(Simulation::builder(app).input(amounts(&topics.clicks)))
}

/// `timers`: reservations released by the application's timer service (K2).
pub fn timers(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = TimerTopics::new();
    let app = crate::timers(&topics)?;
    Ok(Simulation::builder(app).input(orders_input(&topics.orders)))
}

/// `regroup`: a wide topic regrouped, with holds behind another topic.
pub fn regroup(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = RegroupTopics::new();
    let app = crate::regroup(&topics)?;
    Ok(Simulation::builder(app).input(amounts(&topics.clicks)))
}

/// `branches`: forty branch ledgers consolidated, histories that reach
/// Kafka's offset metadata limit.
pub fn branches(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = crate::BranchTopics::new();
    let app = crate::branches(&topics)?;
    let limit = format!(
        "{}-byte offset metadata limit",
        parsley::OFFSET_METADATA_BYTES_MAX
    );
    let mut builder = Simulation::builder(app).expect_stop(
        "a history past the offset metadata limit stops its task (X1)",
        move |stop| stop.stage == "consolidate" && stop.error.contains(&limit),
    );
    for ledger in &topics.ledgers {
        builder = builder.input(amounts(ledger));
    }
    Ok(builder)
}

/// `sessions`: sessions closed by the timer service (K2); every click ends
/// up in exactly one closed session once every timer has fired.
pub fn sessions(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = SessionTopics::new();
    let app = crate::sessions(&topics)?;
    let (clicks, summaries) = (topics.clicks.clone(), topics.summaries.clone());
    Ok(Simulation::builder(app)
        .input(Input::new(&topics.clicks, |draw| {
            (Some(draw.key()), draw.range(1, 9))
        }))
        .property("every click is in exactly one closed session", move |run| {
            let mut counted: std::collections::BTreeMap<Option<String>, i64> =
                std::collections::BTreeMap::new();
            for click in run.records(&clicks)? {
                *counted.entry(click.key().cloned().clone()).or_default() += 1;
            }
            for summary in run.records(&summaries)? {
                *counted.entry(summary.key().cloned().clone()).or_default() -= summary.value();
            }
            match counted.iter().find(|(_, left)| **left != 0) {
                None => Ok(()),
                Some((user, left)) => Err(format!(
                    "user {user:?}: {left} clicks more than its closed sessions hold"
                )
                .into()),
            }
        }))
}

/// `windows`: windowed aggregation fanned out (W1–W5), fed sales whose
/// timestamps run up to 400 ms behind the wall clock, so that some land in
/// a window's grace and some after it (late, W3).
pub fn windows(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = WindowTopics::new();
    let app = crate::windows(&topics, tick_interval(settings))?;
    Ok(Simulation::builder(app)
        .input(amounts(&topics.sales).event_time_lag(Duration::from_millis(400))))
}

/// `enrichment`: orders joined with their customer's discount (J1–J4);
/// one discount update in five is a tombstone, and an order claims, half
/// the time, the latest committed discount update of its partition (J3).
pub fn enrichment(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = EnrichmentTopics::new();
    let app = crate::enrichment(&topics)?;
    Ok(Simulation::builder(app)
        .input(
            Input::new(&topics.discounts, |draw| {
                (Some(draw.key()), draw.range(0, 50))
            })
            .tombstones(0.2),
        )
        .input(amounts(&topics.orders).claims_latest(&topics.discounts, 0.5)))
}

/// `as-of`: orders joined with the discount in force at their time by
/// three versioned joins (J16, J17; one with a 10 ms grace period, J19)
/// and with the latest discount by a plain one, over few customers; discount updates (one in five a tombstone) and
/// orders both stamped up to 20 and 40 ms behind the wall clock, beyond the
/// joins' 15 ms retention, so that updates arrive out of order, some too
/// old to keep, and some orders land on a discount's own millisecond.
pub fn as_of(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = crate::AsOfTopics::new();
    let app = crate::as_of(&topics)?;
    let (discounts, priced) = (topics.discounts.clone(), topics.priced.clone());
    let (table, latest) = (topics.discounts.clone(), topics.latest.clone());
    let (graced_table, graced) = (topics.discounts.clone(), topics.priced_graced.clone());
    Ok(Simulation::builder(app)
        .property(
            "a versioned join with a grace period never prices an order at a discount newer than it",
            move |run| match crate::as_of::met_newer_discounts(run, &graced_table, &graced)?.first() {
                None => Ok(()),
                Some(order) => Err(format!(
                    "{}@{} (customer {:?}, timestamp {}) was priced at discount {:?}, which no update of its customer at or before its timestamp set",
                    order.topic(), order.offset(), order.key(), order.timestamp(), order.value().discount
                )
                .into()),
            },
        )
        .property(
            "a versioned join never prices an order at a discount newer than it",
            move |run| match crate::as_of::met_newer_discounts(run, &discounts, &priced)?.first() {
                None => Ok(()),
                Some(order) => Err(format!(
                    "{}@{} (customer {:?}, timestamp {}) was priced at discount {:?}, which no update of its customer at or before its timestamp set",
                    order.topic(), order.offset(), order.key(), order.timestamp(), order.value().discount
                )
                .into()),
            },
        )
        .sometimes(
            "a plain join prices an order at a discount newer than it",
            move |run| Ok(!crate::as_of::met_newer_discounts(run, &table, &latest)?.is_empty()),
        )
        .input(
            Input::new(&topics.discounts, |draw| {
                (Some(draw.key()), draw.range(0, 50))
            })
            .tombstones(0.2)
            .event_time_lag(Duration::from_millis(20)),
        )
        .input(amounts(&topics.orders).event_time_lag(Duration::from_millis(40))))
}

/// `dedupe`: order ids over few keys, so that they repeat, with
/// timestamps up to 1.5 s behind the wall clock (some too far behind stream
/// time to keep state, E3), and
/// rejected amounts the dedupe refuses (X5).
pub fn dedupe(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = DedupeTopics::new();
    let app = crate::dedupe(&topics, tick_interval(settings))?;
    Ok(Simulation::builder(app)
        .input(amounts(&topics.orders).event_time_lag(Duration::from_millis(1_500))))
}

/// `by-product`: sales of three products by customers under `k<N>`
/// keys, up to 400 ms behind the wall clock, priced, re-keyed by product
/// and windowed, each window's result re-keyed by size and counted;
/// refused amounts stop the pricing task (X5).
pub fn by_product(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = ByProductTopics::new();
    let app = crate::by_product(&topics)?;
    let sale = |draw: &mut Draw<'_>, amount: i64| crate::Sale {
        product: format!("p{}", draw.range(0, 2)),
        amount,
    };
    Ok(Simulation::builder(app).input(
        Input::new(&topics.sales, move |draw| {
            let amount = amount(draw);
            (Some(draw.key()), sale(draw, amount))
        })
        .rejected(move |draw| (Some(draw.key()), sale(draw, REJECTED)))
        .event_time_lag(Duration::from_millis(400)),
    ))
}

/// `dead-letter`: the balances stage with X5's opt-in: the orders its logic
/// refuses go to `payments-balances-dlq` and the task keeps running.
pub fn dead_letter(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = PaymentsTopics::new();
    let stage = crate::balances_stage_dead_letters(&topics, tick_interval(settings));
    let app = parsley::Parsley::named("payments").stage(stage).build()?;
    Ok(Simulation::builder(app).input(orders_input(&topics.orders)))
}

/// `bad-bytes`: the dead-letter stage fed orders some of which are not
/// JSON ([`Input::malformed`]): its source's codec refuses them, so they
/// take the codec path to `payments-balances-dlq` (X5, bad input) where
/// `dead-letter`'s refusals take the logic's.
pub fn bad_bytes(settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = PaymentsTopics::new();
    let stage = crate::balances_stage_dead_letters(&topics, tick_interval(settings));
    let app = parsley::Parsley::named("payments").stage(stage).build()?;
    Ok(Simulation::builder(app).input(
        Input::new(&topics.orders, |draw| {
            (
                Some(draw.key()),
                Order {
                    total: amount(draw),
                },
            )
        })
        .malformed(|draw| {
            (
                Some(bytes::Bytes::from(draw.key())),
                bytes::Bytes::from_static(b"{\"total\": ten}"),
            )
        }),
    ))
}

/// `settlement`: orders and payments over few order ids, joined within a
/// window (J5–J7); both sides' timestamps run up to 400 ms behind the wall
/// clock, so that matches arrive out of order, within the grace and after
/// it, and unmatched records close on either side.
pub fn settlement(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = SettlementTopics::new();
    let app = crate::settlement(&topics)?;
    let lag = Duration::from_millis(400);
    let amounts = |topic: &parsley::Topic<String, i64>| {
        Input::new(topic, |draw| (Some(draw.key()), amount(draw))).event_time_lag(lag)
    };
    Ok(Simulation::builder(app)
        .input(amounts(&topics.orders))
        .input(amounts(&topics.payments)))
}

/// `credit`: balances and credit limits over few accounts, one update in
/// four of each a tombstone, so that accounts gain and lose either side and
/// both, and the joins write and delete their results (J8).
pub fn credit(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = CreditTopics::new();
    let app = crate::credit(&topics)?;
    let table = |topic: &parsley::Topic<String, i64>| {
        Input::new(topic, |draw| (Some(draw.key()), draw.range(0, 1_000))).tombstones(0.25)
    };
    Ok(Simulation::builder(app)
        .input(table(&topics.balances))
        .input(table(&topics.limits)))
}

/// `order-labels`: orders that name one of few customers (one in six none),
/// moving between them, and the customers' tiers, one update in five of
/// each a tombstone, so that orders subscribe, unsubscribe and resubscribe
/// while tiers change under them (J10–J15).
pub fn order_labels(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = crate::OrderLabelsTopics::new();
    let app = crate::order_labels(&topics)?;
    let orders = Input::new(&topics.orders, |draw| {
        let customer = match draw.range(0, 5) {
            0 => "-".to_string(),
            _ => draw.key(),
        };
        (Some(draw.key()), customer)
    })
    .tombstones(0.2);
    let tiers =
        Input::new(&topics.tiers, |draw| (Some(draw.key()), draw.range(1, 3))).tombstones(0.2);
    Ok(Simulation::builder(app).input(orders).input(tiers))
}

/// `storefront`: every operator over shared sources
/// ([`crate::storefront()`]). Discounts and limits over few customers, one
/// update in five a tombstone; orders up to 400 ms behind the wall clock,
/// half of them claiming their partition's latest discount update (J3);
/// payments as far behind, one in ten bytes that do not decode, which the
/// `paid` join dead-letters (X5). No amount is refused: a refusal would
/// stop the task of every operator but `paid`, and with it their checks.
pub fn storefront(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = StorefrontTopics::new();
    let app = crate::storefront(&topics)?;
    let lag = Duration::from_millis(400);
    let table = |topic: &parsley::Topic<String, i64>| {
        Input::new(topic, |draw| (Some(draw.key()), draw.range(0, 50))).tombstones(0.2)
    };
    let amounts = |topic: &parsley::Topic<String, i64>| {
        Input::new(topic, |draw| (Some(draw.key()), amount(draw))).event_time_lag(lag)
    };
    Ok(Simulation::builder(app)
        .input(table(&topics.discounts))
        .input(table(&topics.limits))
        .input(amounts(&topics.orders).claims_latest(&topics.discounts, 0.5))
        .input(amounts(&topics.payments).malformed(|draw| {
            (
                Some(bytes::Bytes::from(draw.key())),
                bytes::Bytes::from_static(b"ten"),
            )
        })))
}

/// `ledger`: transfers between few accounts, each stamped up to 600 ms
/// behind the wall clock (out of order across the view's 250 ms epochs),
/// through the ledger's consistent total ([`crate::ledger()`]); its
/// property: every total the view released is 0, as on every prefix of
/// the transfers.
pub fn ledger(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = crate::LedgerTopics::new();
    let epoch = Duration::from_millis(crate::consistent::VIEW_EPOCH_MS);
    let app = crate::ledger(&topics, epoch)?;
    let totals = topics.totals.clone();
    Ok(Simulation::builder(app)
        .property("every total the view released is 0", move |run| {
            match crate::consistent::impossible_totals(run, &totals)?.first() {
                None => Ok(()),
                Some(total) => Err(format!(
                    "{}@{} is {}: no prefix of the transfers gives it",
                    total.topic(),
                    total.offset(),
                    total.value()
                )
                .into()),
            }
        })
        .time_boundaries(epoch)
        .input(
            Input::new(&topics.transfers, |draw| {
                (
                    Some(draw.key()),
                    crate::consistent::Transfer {
                        from: draw.key(),
                        to: draw.key(),
                        amount: amount(draw),
                    },
                )
            })
            .event_time_lag(Duration::from_millis(600)),
        ))
}

/// `invoices`: ledger entries over few customers, a charge, a payment or
/// both, stamped up to 600 ms behind the wall clock, through the
/// invoices' consistent join ([`crate::invoices()`]).
pub fn invoices(_settings: &Settings) -> Result<SimulationBuilder, BoxError> {
    let topics = crate::InvoiceTopics::new();
    let epoch = Duration::from_millis(crate::consistent::VIEW_EPOCH_MS);
    let app = crate::invoices(&topics, epoch)?;
    Ok(Simulation::builder(app).time_boundaries(epoch).input(
        Input::new(&topics.entries, |draw| {
            let (charge, payment) = match draw.range(0, 2) {
                0 => (amount(draw), 0),
                1 => (0, amount(draw)),
                _ => (amount(draw), amount(draw)),
            };
            (
                Some(draw.key()),
                crate::consistent::Entry { charge, payment },
            )
        })
        .event_time_lag(Duration::from_millis(600)),
    ))
}

/// Every example topology by the name scenario files use
/// ([`TopologyName::ALL`]).
pub fn registry() -> Registry {
    TopologyName::ALL
        .into_iter()
        .fold(Registry::new(), |registry, name| {
            registry.topology(name.as_str(), name.simulation())
        })
}
