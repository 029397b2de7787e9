//! The smallest topologies that show a planted core bug the shipped
//! scenarios show only with many steps or many records: written here
//! through the public API, as a user would write an app, and run with a
//! shipped scenario's clock.

use std::time::Duration;

use parsley::mutation::Mutation;
use parsley::{Json, Parsley, Stage, Topic};
use parsley::{SessionWindows, Windowed};
use parsley_sim::sim::{Input, Simulation};

use crate::shipped;

/// How far out a request of [`timer_service`] is due: not a whole number
/// of the service's resolution, so that a tick lands strictly between the
/// request and its due time.
const DUE_IN_MS: i64 = 1_500;

/// A timer service alone, fed its requests straight from an input (as a
/// scheduler outside the app would write them), each due
/// [`DUE_IN_MS`] after it is produced; its fires go to a sink. Five
/// steps show a fire made a millisecond early (produce, fetch, deliver,
/// a clock landing on the millisecond before the due time, a tick
/// there), where the shipped `timers` topology needs a stage in front
/// and its commit first.
pub fn timer_service(planted: Option<Mutation>) -> Simulation {
    let requests: Topic<String, i64> = Topic::new("requests");
    let fires: Topic<String, i64> = Topic::new("fires");
    let timers = Stage::named("timers")
        .timer_service(&requests, &fires)
        .resolution(Duration::from_secs(1))
        .build();
    let app = Parsley::named("timer-service")
        .stage(timers)
        .build()
        .expect("a timer service alone assembles");
    Simulation::builder(app)
        .settings(shipped::scenario("timers").settings)
        .input(Input::new(&requests, |draw| {
            (Some(draw.key()), draw.now() + DUE_IN_MS)
        }))
        .planted(planted)
        .build()
        .expect("the timer service's simulation builds")
}

/// A session aggregation alone: each key's clicks counted per session
/// of at most 300 ms gaps with 100 ms of grace, closed by stream time,
/// over clicks whose timestamps lie up to 400 ms behind the wall clock.
/// Two clicks 400 ms apart in event time produced at once, and a third
/// between them produced after, bridge two sessions (the grace keeps
/// the earlier one open after the later one moved stream time); a fourth
/// moves stream time past them so they close. Six steps and four inputs
/// show it here, where the shipped `windows` topology runs three more
/// windowed stages beside it.
pub fn sessions(planted: Option<Mutation>) -> Simulation {
    let clicks: Topic<String, i64> = Topic::new("clicks");
    let sessions: Topic<Windowed<String>, i64> = Topic::new("sessions");
    let count = Stage::named("sessions")
        .windowed(
            SessionWindows::with_inactivity_gap(Duration::from_millis(300))
                .grace(Duration::from_millis(100)),
        )
        .aggregate(
            &clicks,
            Json,
            || 0i64,
            |count: i64, _| count + 1,
            |one: i64, two: i64| one + two,
        )
        .into(&sessions)
        .build();
    let app = Parsley::named("sessions-alone")
        .stage(count)
        .build()
        .expect("a session aggregation alone assembles");
    Simulation::builder(app)
        .settings(shipped::scenario("windows").settings)
        .input(
            Input::new(&clicks, |draw| (Some(draw.key()), 1))
                .event_time_lag(Duration::from_millis(400)),
        )
        .planted(planted)
        .build()
        .expect("the sessions' simulation builds")
}

/// A chain of `hops` stages, each passing every record of the topic
/// before it on to a topic of its own. A record's stamp claims everything
/// before it (G5), so the last stage's history claims `hops` tps from
/// one input record: the smallest app whose checkpoint must hold more
/// than 16 tps (I5), where the shipped `regroup` scenario needs 24
/// partitions and hundreds of records.
pub fn chain(hops: usize, planted: Option<Mutation>) -> Simulation {
    let topics: Vec<Topic<String, i64>> = (0..=hops)
        .map(|hop| Topic::new(format!("hop-{hop}")))
        .collect();
    let mut app = Parsley::named("long-chain");
    for hop in 1..=hops {
        let next = topics[hop].clone();
        let stage = Stage::named(format!("hop{hop}"))
            .on(&topics[hop - 1], move |record| {
                vec![next.send(record.key().cloned(), *record.value())]
            })
            .into(&topics[hop])
            .build();
        app = app.stage(stage);
    }
    let app = app.build().expect("a chain of stages assembles");
    Simulation::builder(app)
        .settings(shipped::scenario("chain").settings)
        .input(Input::new(&topics[0], |draw| (Some(draw.key()), 1)))
        .planted(planted)
        .build()
        .expect("the chain's simulation builds")
}

/// [`chain`]'s shape under topic names of 120 characters: the history of
/// hop 17 claims 17 tps of 124 bytes each, past Kafka's offset metadata
/// limit, so hop 17 and every hop after it stop with `CheckpointTooLarge`
/// at their first commit (X1), which the simulation expects. One input
/// record reaches the limit, where the shipped `branches` scenario needs
/// about 38 of its 40 ledgers heard from.
pub fn chain_past_the_metadata_limit(planted: Option<Mutation>) -> Simulation {
    const HOPS: usize = 18;
    let topics: Vec<Topic<String, i64>> = (0..=HOPS)
        .map(|hop| Topic::new(format!("hop-{hop:02}-{}", "x".repeat(113))))
        .collect();
    let mut app = Parsley::named("long-names");
    for hop in 1..=HOPS {
        let next = topics[hop].clone();
        let stage = Stage::named(format!("hop{hop}"))
            .on(&topics[hop - 1], move |record| {
                vec![next.send(record.key().cloned(), *record.value())]
            })
            .into(&topics[hop])
            .build();
        app = app.stage(stage);
    }
    let app = app.build().expect("a chain of stages assembles");
    let limit = format!(
        "{}-byte offset metadata limit",
        parsley::OFFSET_METADATA_BYTES_MAX
    );
    Simulation::builder(app)
        .settings(shipped::scenario("chain").settings)
        .input(Input::new(&topics[0], |draw| (Some(draw.key()), 1)))
        .expect_stop(
            "a history past the offset metadata limit (X1)",
            move |stop| stop.error.contains(&limit),
        )
        .planted(planted)
        .build()
        .expect("the chain's simulation builds")
}

/// A left foreign-key join alone (J10–J14), over orders that name a
/// customer or none (and tiers, which it need not draw): an order that names its customer,
/// then none, subscribes and unsubscribes, and the respond stage answers
/// the subscription after the resolve stage delivered the newer order; that
/// response is stale. Two inputs show it here, where the shipped
/// `order-labels` topology runs two joins (six stages) and a tier table
/// beside them.
pub fn foreign_key_join(planted: Option<Mutation>) -> Simulation {
    let orders = Topic::<String, String>::with_codecs("orders", parsley::Utf8, parsley::Utf8);
    let tiers = Topic::<String, i64>::with_codecs("tiers", parsley::Utf8, parsley::I64);
    let listing = Topic::<String, String>::with_codecs("listing", parsley::Utf8, parsley::Utf8);
    let join = Stage::named("listing")
        .join(parsley::Join::foreign_key(
            &orders,
            &tiers,
            |customer: &String| (customer != "-").then(|| customer.clone()),
        ))
        .left(|_, customer: &String, tier: Option<&i64>| format!("{customer}@{tier:?}"))
        .into(&listing)
        .build();
    let app = Parsley::named("listing-alone")
        .stages(join)
        .build()
        .expect("a foreign-key join alone assembles");
    Simulation::builder(app)
        .settings(shipped::scenario("order-labels").settings)
        .input(Input::new(&orders, |draw| {
            let customer = match draw.range(0, 1) {
                0 => "-".to_string(),
                _ => draw.key(),
            };
            (Some(draw.key()), customer)
        }))
        .input(Input::new(&tiers, |draw| (Some(draw.key()), 1)))
        .planted(planted)
        .build()
        .expect("the foreign-key join's simulation builds")
}
