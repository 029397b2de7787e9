//! I18 (consistent views) under the simulator, on a bank of the operators
//! I18's reference evaluates: transfers re-keyed by recipient and by
//! sender, summed per account, the sums joined by an outer table–table
//! join into balances, each balance re-keyed within the join to one key
//! and folded into a total, the consistent view. Every prefix of the
//! transfers has total 0, so the reference's total is 0 at every cut; a
//! release that is not is reported.

use std::collections::BTreeMap;
use std::time::Duration;

use parsley::mutation::Mutation;
use parsley::{App, Join, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::sim::{Input, Invariant, Simulation};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Transfer {
    from: String,
    to: String,
    amount: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Balance {
    account: String,
    balance: i64,
}

fn transfers() -> Topic<String, Transfer> {
    Topic::with_codecs("transfers", Utf8, Json)
}

/// The bank; its total a consistent view of `epoch`, and, when `nested`,
/// its balances one too (a view within the total's region, its re-keyed
/// copies held and released with it) and a count of the balances the
/// total's stage reads, a third view, which counts the balances' releases
/// (one per account and epoch), not the join's every output.
fn bank(epoch: Duration, nested: bool) -> App {
    let transfers = transfers();
    let credits = Topic::<String, i64>::with_codecs("credits", Utf8, I64);
    let debits = Topic::<String, i64>::with_codecs("debits", Utf8, I64);
    let balances = Topic::<String, Balance>::with_codecs("balances", Utf8, Json);
    let totals = Topic::<String, i64>::with_codecs("totals", Utf8, I64);
    let (by_to, to) = Stage::named("by-to").rekey(&transfers, Utf8, |t| t.value().to.clone());
    let (by_from, from) =
        Stage::named("by-from").rekey(&transfers, Utf8, |t| t.value().from.clone());
    let all = balances.repartition("all", Utf8);
    let sum = |name: &str, source: &Topic<String, Transfer>, out: &Topic<String, i64>| {
        let sink = out.clone();
        Stage::named(name)
            .state(I64, || 0)
            .on(source, move |sum: i64, t| {
                let sum = sum + t.value().amount;
                Step::of(sum).emit(sink.send(t.key().cloned(), sum))
            })
            .into(out)
            .build()
    };
    let balance = Stage::named("balance")
        .join(Join::table_table(&credits, &debits))
        .outer(
            |account: &String, credit: Option<&i64>, debit: Option<&i64>| Balance {
                account: account.clone(),
                balance: credit.copied().unwrap_or(0) - debit.copied().unwrap_or(0),
            },
        )
        .into(&balances)
        .rekey_output(&balances, &all, |_, _| "all".to_string())
        .build();
    let balance = match nested {
        true => balance.consistent(epoch),
        false => balance,
    };
    let out = totals.clone();
    let total = Stage::named("total")
        .state(Json, BTreeMap::<String, i64>::new)
        .on(&all, move |mut each: BTreeMap<String, i64>, balance| {
            each.insert(balance.value().account.clone(), balance.value().balance);
            let total = each.values().sum::<i64>();
            Step::of(each).emit(out.send(Some("all".to_string()), total))
        })
        .into(&totals)
        .build()
        .consistent(epoch);
    let counted = Topic::<String, i64>::with_codecs("counted", Utf8, I64);
    let out = counted.clone();
    let count = Stage::named("count")
        .state(I64, || 0)
        .on(&all, move |count: i64, _balance| {
            Step::of(count + 1).emit(out.send(Some("balances".to_string()), count + 1))
        })
        .into(&counted)
        .build()
        .consistent(epoch);
    let bank = Parsley::named("bank")
        .stages([by_to, by_from])
        .stage(sum("credit", &to, &credits))
        .stage(sum("debit", &from, &debits))
        .stages([balance, total]);
    match nested {
        true => bank.stage(count),
        false => bank,
    }
    .build()
    .expect("the bank builds")
}

fn simulation(planted: Option<Mutation>) -> Simulation {
    simulation_of(planted, false)
}

fn simulation_of(planted: Option<Mutation>, nested: bool) -> Simulation {
    Simulation::builder_fn(move || bank(Duration::from_millis(200), nested))
        .input(
            Input::new(&transfers(), |draw| {
                (
                    Some(draw.key()),
                    Transfer {
                        from: draw.key(),
                        to: draw.key(),
                        amount: draw.range(1, 9),
                    },
                )
            })
            .event_time_lag(Duration::from_millis(300)),
        )
        .partitions(2)
        .keys(4)
        .inputs(120)
        .budget(3_000, 8_000)
        .planted(planted)
        .build()
        .expect("the simulation builds")
}

/// The I18 violations of a run.
fn i18(outcome: &parsley_sim::sim::RunOutcome) -> Vec<&parsley_sim::sim::Violation> {
    outcome
        .violations
        .iter()
        .filter(|violation| violation.invariant == Invariant::I18)
        .collect()
}

/// The records the view released in a run.
fn releases(outcome: &parsley_sim::sim::RunOutcome) -> usize {
    (0..2)
        .map(|partition| {
            let tp = parsley::Tp::new("totals", partition);
            outcome.cluster.log(&tp).map_or(0, |log| {
                log.read_committed()
                    .filter(|(_, data)| parsley::header::cut_of(data).is_some())
                    .count()
            })
        })
        .sum()
}

/// Without a planted bug, every total the view releases is 0, the
/// reference's total at every cut, and the reference judges them all.
#[test]
fn i18_holds_on_the_bank() {
    let simulation = simulation(None);
    let mut released = 0;
    for seed in 0..20 {
        let outcome = simulation.run_seed(seed);
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {}",
            outcome.violations[0]
        );
        assert_eq!(
            i18(&outcome),
            Vec::<&parsley_sim::sim::Violation>::new(),
            "seed {seed}"
        );
        assert!(outcome.not_judged.is_empty(), "{:?}", outcome.not_judged);
        released += releases(&outcome);
    }
    assert!(
        released >= 20,
        "the view released {released} records in 20 seeds"
    );
}

/// The bank with its balances a view too, within the total's region: the
/// reference holds the balances it computes and writes them at each
/// epoch's end, as the view does, and both views' releases are judged.
#[test]
fn i18_holds_on_a_view_within_a_view() {
    let simulation = simulation_of(None, true);
    let mut balances = 0;
    for seed in 0..20 {
        let outcome = simulation.run_seed(seed);
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {}",
            outcome.violations[0]
        );
        assert!(outcome.not_judged.is_empty(), "{:?}", outcome.not_judged);
        balances += (0..2)
            .map(|partition| {
                let tp = parsley::Tp::new("balances", partition);
                outcome.cluster.log(&tp).map_or(0, |log| {
                    log.read_committed()
                        .filter(|(_, data)| parsley::header::cut_of(data).is_some())
                        .count()
                })
            })
            .sum::<usize>();
    }
    assert!(
        balances >= 40,
        "the balances view released {balances} records"
    );
    for planted in [Mutation::ViewReleasesEarly, Mutation::CutSkipsLane] {
        let simulation = simulation_of(Some(planted), true);
        let caught = (0..20).any(|seed| !i18(&simulation.run_seed(seed)).is_empty());
        assert!(caught, "{} went unnoticed by I18", planted.name());
    }
}

/// A view that releases outputs from partway through an epoch (V5) is
/// caught: they hold totals no cut gives.
#[test]
fn i18_catches_a_view_releasing_before_its_epoch_ends() {
    assert_caught(Mutation::ViewReleasesEarly, "the region computes");
}

/// A region task whose frontier leaves out a lane (V4) delivers an epoch
/// before that lane has brought all of the epochs below it: the view
/// releases totals that leave out some of a cut's transfers.
#[test]
fn i18_catches_a_cut_that_skips_a_lane() {
    assert_caught(Mutation::CutSkipsLane, "the region computes");
}

fn assert_caught(planted: Mutation, saying: &str) {
    let simulation = simulation(Some(planted));
    let caught = (0..20).find_map(|seed| {
        let outcome = simulation.run_seed(seed);
        let found = i18(&outcome).first().map(|violation| (*violation).clone());
        found.map(|violation| (outcome, violation))
    });
    let (outcome, violation) =
        caught.unwrap_or_else(|| panic!("{} went unnoticed by I18", planted.name()));
    assert!(violation.message.contains(saying), "{violation}");
    // On the task that released it, and on the record.
    assert!(violation.task.is_some(), "{violation}");
    let (tp, offset) = violation.record.clone().expect("a release is named");
    assert_eq!(tp.topic.as_str(), "totals");
    let entry = &outcome.trace[violation.entry_in(&outcome.trace).unwrap()];
    assert!(
        entry.event.concerns(&tp, offset),
        "{violation}: {}",
        entry.event
    );
}

/// A region holding an operator I18's reference does not evaluate (here a
/// stream–table join) is not judged, and the run says so; the cuts are
/// still checked.
#[test]
fn i18_says_what_it_does_not_judge() {
    let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
    let prices = Topic::<String, i64>::with_codecs("prices", Utf8, I64);
    let priced = Topic::<String, i64>::with_codecs("priced", Utf8, I64);
    let totals = Topic::<String, i64>::with_codecs("order-totals", Utf8, I64);
    let app = {
        let (orders, prices, priced, totals) = (
            orders.clone(),
            prices.clone(),
            priced.clone(),
            totals.clone(),
        );
        move || {
            let join = Stage::named("price")
                .join(Join::stream_table(&orders, &prices))
                .left(|order, price: Option<&i64>| order.value() * price.copied().unwrap_or(1))
                .into(&priced)
                .build();
            let out = totals.clone();
            let total = Stage::named("total")
                .state(I64, || 0)
                .on(&priced, move |total: i64, order| {
                    let total = total + order.value();
                    Step::of(total).emit(out.send(order.key().cloned(), total))
                })
                .into(&totals)
                .build()
                .consistent(Duration::from_millis(200));
            Parsley::named("shop")
                .stages([join, total])
                .build()
                .expect("the shop builds")
        }
    };
    let simulation = Simulation::builder_fn(app)
        .input(
            Input::new(&prices, |draw| (Some(draw.key()), draw.range(1, 5)))
                .event_time_lag(Duration::from_millis(300)),
        )
        .input(
            Input::new(&orders, |draw| (Some(draw.key()), draw.range(1, 9)))
                .event_time_lag(Duration::from_millis(300)),
        )
        .partitions(2)
        .keys(8)
        .inputs(80)
        .budget(2_000, 8_000)
        .build()
        .expect("the simulation builds");
    let noted = (0..10).find_map(|seed| {
        let outcome = simulation.run_seed(seed);
        assert!(
            i18(&outcome).is_empty(),
            "seed {seed}: {}",
            i18(&outcome)[0]
        );
        outcome.not_judged.into_iter().next()
    });
    let note = noted.expect("a region with a stream–table join is noted");
    assert_eq!(note.invariant, Invariant::I18);
    assert_eq!(note.stage, "total");
    assert!(note.records > 0);
    assert!(
        note.to_string()
            .contains("stage `price`, a stream–table join"),
        "{note}"
    );
}

/// A view whose one key both of its tasks write: each task releases its
/// own latest reading with its own cut, so one key's releases on one
/// partition interleave two tasks' cuts, and which reading is "the last"
/// at a cut depends on how the tasks are ordered. No order is wrong:
/// I18 reports none of it (a release matching neither of its two orders
/// would be noted as not judged).
#[test]
fn i18_reports_nothing_of_a_key_two_tasks_of_a_view_write() {
    let readings = Topic::<String, i64>::with_codecs("readings", Utf8, I64);
    let latest = Topic::<String, i64>::with_codecs("latest", Utf8, I64);
    let app = {
        let (readings, latest) = (readings.clone(), latest.clone());
        move || {
            let out = latest.clone();
            let view = Stage::named("latest")
                .on(&readings, move |reading| {
                    vec![out.send(Some("latest".to_string()), *reading.value())]
                })
                .into(&latest)
                .build()
                .consistent(Duration::from_millis(200));
            Parsley::named("sensors")
                .stage(view)
                .build()
                .expect("the sensors build")
        }
    };
    let simulation = Simulation::builder_fn(app)
        .input(
            Input::new(&readings, |draw| (Some(draw.key()), draw.range(1, 1_000)))
                .event_time_lag(Duration::from_millis(300)),
        )
        .partitions(2)
        .keys(6)
        .inputs(80)
        .budget(2_000, 6_000)
        .build()
        .expect("the simulation builds");
    let mut released = 0;
    for seed in 0..100 {
        let outcome = simulation.run_seed(seed);
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {}",
            outcome.violations[0]
        );
        released += (0..2)
            .map(|partition| {
                let tp = parsley::Tp::new("latest", partition);
                outcome.cluster.log(&tp).map_or(0, |log| {
                    log.read_committed()
                        .filter(|(_, data)| parsley::header::cut_of(data).is_some())
                        .count()
                })
            })
            .sum::<usize>();
    }
    assert!(released >= 100, "{released} releases");
}
