//! The application under the simulator: 1,000 seeds with faults on (aborts,
//! crashes, fencing, hanging transactions, redelivery), transfers out of
//! order in event time by up to ten seconds, and the application's own
//! property: every total it emits is 0.
//!
//! Every rule is checked, with and without the declaration. Without it
//! every run commits impossible totals; with it none does, and each
//! account's last balance is its credit and debit over the transfers below
//! the view's last cut.

use std::collections::BTreeMap;
use std::time::Duration;

use parsley::header::{cut_of, is_progress};
use parsley::{Codec, ConsumedRecord, Json, Topic, Tp, I64};
use parsley_sim::sim::{
    BoxError, Committed, Draw, Input, PropertyFailure, Simulation, SimulationBuilder,
};
use parsley_transfers::{app, Balance, Topics, TransferValue, ACCOUNTS, EPOCH, MAX_LAG_MS};

fn simulation(epoch: Option<Duration>) -> SimulationBuilder {
    let topics = Topics::new("");
    let app = app("", &topics, epoch).unwrap();
    let transfer = |draw: &mut Draw<'_>| {
        let accounts = ACCOUNTS as u32;
        let from = draw.below(accounts);
        let to = draw.below(accounts - 1);
        let to = if to >= from { to + 1 } else { to };
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
                pair[0].partition() == pair[1].partition()
                    && pair[1].timestamp() < pair[0].timestamp()
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
fn impossible_total(topics: &Topics) -> impl Fn(&Committed<'_>) -> Result<bool, BoxError> {
    let totals = topics.totals.clone();
    move |run| {
        Ok(run
            .records(&totals)?
            .iter()
            .any(|total| *total.value() != 0))
    }
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

/// The data records `topic` committed in a run, per partition in offset
/// order (progress records, V4, left out), with their headers.
fn committed<K: 'static, V: 'static>(
    run: &Committed<'_>,
    topic: &Topic<K, V>,
) -> Result<Vec<Vec<ConsumedRecord>>, BoxError> {
    let mut partitions = Vec::new();
    for partition in 0..run.partitions(topic)? {
        let records = run.committed_raw(&topic.tp(partition))?;
        partitions.push(
            records
                .into_iter()
                .filter(|record| !is_progress(&record.data))
                .collect(),
        );
    }
    Ok(partitions)
}

/// A total a run committed: where, its value and its cut (`None` without
/// one).
struct Total {
    tp: Tp,
    offset: u64,
    total: i64,
    cut: Option<i64>,
}

/// The totals a run committed, in the order written (one key: one
/// partition).
fn totals(run: &Committed<'_>, topics: &Topics) -> Result<Vec<Total>, BoxError> {
    let mut totals = Vec::new();
    for (partition, records) in committed(run, &topics.totals)?.into_iter().enumerate() {
        for record in records {
            totals.push(Total {
                tp: topics.totals.tp(partition as u32),
                offset: record.offset,
                total: I64.decode(record.data.value.as_deref().unwrap_or_default())?,
                cut: cut_of(&record.data),
            });
        }
    }
    Ok(totals)
}

/// Each account's credit and debit.
type Sums = BTreeMap<String, (i64, i64)>;

/// Each account's credit and debit over the transfers of the epochs below
/// `cut` (V3: a record's epoch is the highest timestamp of its partition
/// up to it, in epochs), and the lowest epoch the sources' last records
/// reached (`None` with a partition that has none).
fn below_cut(transfers: &[Vec<ConsumedRecord>], cut: i64) -> Result<(Sums, Option<i64>), BoxError> {
    let epoch = EPOCH.as_millis() as i64;
    let mut sums = Sums::new();
    let mut reached: Option<i64> = None;
    for partition in transfers {
        let mut highest = i64::MIN;
        for record in partition {
            highest = highest.max(record.data.timestamp);
            if highest.div_euclid(epoch) < cut {
                let transfer: TransferValue =
                    Json.decode(record.data.value.as_deref().unwrap_or_default())?;
                sums.entry(transfer.to).or_default().0 += transfer.amount;
                sums.entry(transfer.from).or_default().1 += transfer.amount;
            }
        }
        let last = (!partition.is_empty()).then(|| highest.div_euclid(epoch));
        reached = match (reached, last) {
            (_, None) => return Ok((sums, None)),
            (None, last) => last,
            (Some(reached), Some(last)) => Some(reached.min(last)),
        };
    }
    Ok((sums, reached))
}

#[test]
fn a_thousand_seeds_of_a_consistent_total() {
    let topics = Topics::new("");
    simulation(Some(EPOCH))
        .property("every total emitted is 0", {
            let topics = topics.clone();
            move |run| match totals(run, &topics)?
                .into_iter()
                .find(|total| total.total != 0)
            {
                None => Ok(()),
                Some(Total {
                    tp, offset, total, ..
                }) => {
                    let failure = PropertyFailure::new(format!("an impossible total: {total}"));
                    Err(failure.about_offset(tp, offset).into())
                }
            }
        })
        .property("every total carries its cut, the cuts rising", {
            let topics = topics.clone();
            move |run| {
                let mut last = None;
                for Total {
                    tp, offset, cut, ..
                } in totals(run, &topics)?
                {
                    if cut.is_none() || last >= cut {
                        let failure =
                            PropertyFailure::new(format!("a total at cut {cut:?} after {last:?}"));
                        return Err(failure.about_offset(tp, offset).into());
                    }
                    last = cut;
                }
                Ok(())
            }
        })
        .property("each account's last balance is that below the last cut", {
            let topics = topics.clone();
            move |run| {
                let Some(cut) = totals(run, &topics)?.pop().and_then(|last| last.cut) else {
                    return Ok(());
                };
                let mut balances = Sums::new();
                for record in committed(run, &topics.balances)?.concat() {
                    let balance: Balance =
                        Json.decode(record.data.value.as_deref().unwrap_or_default())?;
                    balances.insert(balance.account, (balance.credit, balance.debit));
                }
                let (expected, _) = below_cut(&committed(run, &topics.transfers)?, cut)?;
                match balances == expected {
                    true => Ok(()),
                    false => Err(format!(
                        "below cut {cut}: balances {balances:?}, transfers {expected:?}"
                    )
                    .into()),
                }
            }
        })
        .sometimes("a total released", {
            let topics = topics.clone();
            move |run| Ok(!totals(run, &topics)?.is_empty())
        })
        .sometimes("a total released at the epoch every source reached", {
            let topics = topics.clone();
            move |run| {
                let last = totals(run, &topics)?.pop().and_then(|last| last.cut);
                let (_, reached) = below_cut(&committed(run, &topics.transfers)?, i64::MIN)?;
                Ok(last.is_some() && last == reached)
            }
        })
        .seeds(0..1_000)
        .build()
        .unwrap()
        .check();
}
