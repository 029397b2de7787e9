//! The application under the simulator: 1,000 seeds with faults on (aborts,
//! crashes, fencing, hanging transactions, redelivery), every rule checked,
//! transfers out of order in event time by up to ten seconds, plus the
//! application's own property: every total it emits is 0.

use std::time::Duration;

use parsley_sim::sim::{Committed, Draw, Input, Simulation, SimulationBuilder};
use parsley_transfers::{app, Topics, TransferValue, ACCOUNTS, MAX_LAG_MS};

fn simulation(epoch: Option<Duration>) -> SimulationBuilder {
    let topics = Topics::new("");
    let app = app("", &topics, epoch).unwrap();
    let transfer = |draw: &mut Draw<'_>| {
        let accounts = ACCOUNTS as u32;
        let from = draw.below(accounts);
        let to = (from + 1 + draw.below(accounts - 1)) % accounts;
        let value = TransferValue {
            from: from.to_string(),
            to: to.to_string(),
            amount: 1,
        };
        (Some(draw.key()), value)
    };
    let out_of_order = {
        let transfers = topics.transfers.clone();
        move |run: &Committed<'_>| {
            let records = run.records(&transfers)?;
            Ok(records.windows(2).any(|pair| {
                pair[0].partition == pair[1].partition && pair[1].timestamp < pair[0].timestamp
            }))
        }
    };
    Simulation::builder(app)
        .input(
            Input::new(&topics.transfers, transfer)
                .event_time_lag(Duration::from_millis(MAX_LAG_MS as u64)),
        )
        .partitions(2)
        .instances(2)
        .inputs(40)
        .budget(800, 4_000)
        .sometimes(
            "a transfer earlier in event time than the one before it",
            out_of_order,
        )
        .sometimes("an instance crashed", |run| Ok(run.stats().crashes > 0))
}

/// Whether a run committed a total that is not 0.
fn impossible_total(
    topics: &Topics,
) -> impl Fn(&Committed<'_>) -> Result<bool, parsley_sim::sim::BoxError> {
    let totals = topics.totals.clone();
    move |run| Ok(run.records(&totals)?.iter().any(|total| total.value != 0))
}

#[test]
fn without_a_consistent_view_some_runs_commit_impossible_totals() {
    let topics = Topics::new("");
    let seeds = 0..1_000;
    let summary = simulation(None)
        .sometimes("an impossible total", impossible_total(&topics))
        .build()
        .unwrap()
        .check_seeds(seeds.clone());
    assert!(
        summary.failure.is_none(),
        "{}",
        summary.failure.unwrap_or_default()
    );
    let reached = |name: &str| {
        summary
            .reached
            .iter()
            .find(|(mark, _)| mark == name)
            .map_or(0, |(_, runs)| *runs)
    };
    let impossible = reached("an impossible total");
    println!(
        "without a consistent view: {impossible} of {} runs committed an impossible total ({} crashed an instance)",
        seeds.end,
        reached("an instance crashed"),
    );
    assert!(
        impossible > 0,
        "without a consistent view some runs commit impossible totals"
    );
}
