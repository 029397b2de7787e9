//! I18's reference evaluator against the library, on a diamond of the
//! operators it evaluates: two re-keys of one source of transfers (by
//! recipient and by sender), a sum per account on each, an outer
//! table–table join of the two sums into balances, a re-key of every
//! balance to one key and a fold of the balances into a total. At
//! quiescence every input is delivered everywhere, so each stage's last
//! committed record per key must equal the reference's last emission for
//! the key over the whole source logs, whatever the faults and the
//! interleavings of the run.

use std::collections::BTreeMap;

use bytes::Bytes;
use parsley::{App, Codec, Join, Json, Parsley, Stage, Step, Topic, TopicName, Tp, Utf8, I64};
use serde::{Deserialize, Serialize};

use super::region::{region, AtCut, Schedule, SourceRecord};
use crate::model::Cluster;
use crate::sim::running::simulation::{Input, Simulation};
use crate::sim::world::settings::FaultRates;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Transfer {
    pub(super) from: String,
    pub(super) to: String,
    pub(super) amount: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Balance {
    account: String,
    balance: i64,
}

/// The diamond, and its source: every balance re-keyed to one key by a
/// re-key stage (R1), or `within` the join that writes it (R3).
fn diamond(within: bool) -> (App, Topic<String, Transfer>) {
    diamond_viewed(within, None)
}

/// The diamond, its total a consistent view of `epoch` when given.
pub(super) fn diamond_viewed(
    within: bool,
    epoch: Option<std::time::Duration>,
) -> (App, Topic<String, Transfer>) {
    let transfers = Topic::<String, Transfer>::with_codecs("transfers", Utf8, Json);
    let credits = Topic::<String, i64>::with_codecs("credits", Utf8, I64);
    let debits = Topic::<String, i64>::with_codecs("debits", Utf8, I64);
    let balances = Topic::<String, Balance>::with_codecs("balances", Utf8, Json);
    let totals = Topic::<String, i64>::with_codecs("totals", Utf8, I64);
    let (by_recipient, to_recipients) =
        Stage::named("by-recipient")
            .rekey(&transfers, Utf8, |transfer| transfer.value().to.clone());
    let (by_sender, from_senders) =
        Stage::named("by-sender").rekey(&transfers, Utf8, |transfer| transfer.value().from.clone());
    let sum = |name: &str, source: &Topic<String, Transfer>, out: &Topic<String, i64>| {
        let sink = out.clone();
        Stage::named(name)
            .state(Json, || 0i64)
            .on(source, move |sum: i64, transfer| {
                let sum = sum + transfer.value().amount;
                Step::of(sum).emit(sink.send(transfer.key().cloned(), sum))
            })
            .into(out)
            .build()
    };
    let credit = sum("credit", &to_recipients, &credits);
    let debit = sum("debit", &from_senders, &debits);
    let balance = Stage::named("balance")
        .join(Join::table_table(&credits, &debits))
        .outer(
            |account: &String, credit: Option<&i64>, debit: Option<&i64>| Balance {
                account: account.clone(),
                balance: credit.copied().unwrap_or(0) - debit.copied().unwrap_or(0),
            },
        )
        .into(&balances);
    let (balance, to_one, all_balances) = match within {
        false => {
            let (to_one, all) =
                Stage::named("to-one").rekey(&balances, Utf8, |_| "all".to_string());
            (balance.build(), Some(to_one), all)
        }
        true => {
            let all = balances.repartition("to-one", Utf8);
            let balance = balance.rekey_output(&balances, &all, |_, _| "all".to_string());
            (balance.build(), None, all)
        }
    };
    let out = totals.clone();
    let total = Stage::named("total")
        .state(Json, BTreeMap::<String, i64>::new)
        .on(
            &all_balances,
            move |mut all: BTreeMap<String, i64>, balance| {
                all.insert(balance.value().account.clone(), balance.value().balance);
                let total = all.values().sum::<i64>();
                Step::of(all).emit(out.send(Some("total".to_string()), total))
            },
        )
        .into(&totals)
        .build();
    let total = match epoch {
        Some(epoch) => total.consistent(epoch),
        None => total,
    };
    let app = Parsley::named("bank")
        .stages([by_recipient, by_sender, credit, debit, balance])
        .stages(to_one)
        .stage(total)
        .build()
        .expect("the diamond builds");
    (app, transfers)
}

/// The committed records of `topic`, every partition, each with epoch 0.
fn sources<'l>(cluster: &'l Cluster, topic: &TopicName) -> Vec<SourceRecord<'l>> {
    let mut records = Vec::new();
    for partition in 0..cluster.partitions(topic.as_str()).unwrap_or(0) {
        let tp = Tp::new(topic.clone(), partition);
        for (offset, data) in cluster.log(&tp).unwrap().read_committed() {
            records.push(SourceRecord {
                tp: tp.clone(),
                offset,
                data,
                epoch: 0,
            });
        }
    }
    records
}

/// The last committed record of each key of `topic`.
fn last_per_key(cluster: &Cluster, topic: &str) -> BTreeMap<Option<Bytes>, Option<Bytes>> {
    let mut last = BTreeMap::new();
    for partition in 0..cluster.partitions(topic).unwrap_or(0) {
        let tp = Tp::new(topic, partition);
        for (_, data) in cluster.log(&tp).unwrap().read_committed() {
            last.insert(data.key.clone(), data.value.clone());
        }
    }
    last
}

#[test]
fn i18_the_reference_equals_the_library_at_quiescence_on_a_diamond() {
    reference_equals_the_library(false);
}

/// The same with the balances re-keyed within the join (R3).
#[test]
fn i18_the_reference_equals_the_library_with_a_rekey_within_the_join() {
    reference_equals_the_library(true);
}

fn reference_equals_the_library(within: bool) {
    let (app, transfers) = diamond(within);
    let simulation = Simulation::builder(app.clone())
        .input(Input::new(&transfers, |draw| {
            (
                Some(draw.key()),
                Transfer {
                    from: draw.key(),
                    to: draw.key(),
                    amount: draw.range(1, 100),
                },
            )
        }))
        .partitions(2)
        .keys(5)
        .inputs(60)
        .faults(FaultRates::default())
        .budget(1_500, 6_000)
        .build()
        .expect("the simulation builds");
    let views = [
        ("credit", "credits"),
        ("debit", "debits"),
        ("balance", "balances"),
        ("total", "totals"),
    ];
    let mut totals_seen = 0;
    for seed in 0..6 {
        let outcome = simulation.run_seed(seed);
        assert!(outcome.quiesced, "seed {seed} did not quiesce");
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {:?}",
            outcome.violations
        );
        let cluster = &outcome.cluster;
        let records = sources(cluster, transfers.name());
        assert!(!records.is_empty(), "seed {seed} produced no transfer");
        let partitions = |topic: &TopicName| cluster.partitions(topic.as_str());
        for (view, topic) in views {
            let region = region(&app, view);
            assert!(
                region.unevaluated.is_empty(),
                "{view}: {:?}",
                region.unevaluated
            );
            assert_eq!(region.sources, [transfers.name().clone()]);
            let committed = last_per_key(cluster, topic);
            assert!(!committed.is_empty(), "seed {seed}: nothing on {topic}");
            for schedule in [Schedule::OldestFirst, Schedule::NewestFirst] {
                let outputs = region.evaluate(&records, 1, &partitions, schedule);
                for (key, value) in &committed {
                    assert_eq!(
                        outputs.at(None, &TopicName::new(topic), key, 1),
                        [AtCut::Value(value.clone())],
                        "seed {seed}, {schedule:?}: {topic}'s last record for key {key:?}"
                    );
                }
                // And nothing the library did not write.
                let other = Some(Bytes::from_static(b"nobody"));
                assert_eq!(
                    outputs.at(None, &TopicName::new(topic), &other, 1),
                    [AtCut::Nothing]
                );
            }
        }
        // Credits and debits cancel out: the last total is 0.
        let totals = last_per_key(cluster, "totals");
        assert_eq!(
            totals.get(&Some(Bytes::from_static(b"total"))),
            Some(&Some(Codec::<i64>::encode(&I64, &0).unwrap()))
        );
        totals_seen += 1;
    }
    assert_eq!(totals_seen, 6);
}

/// Before the first epoch, a view has emitted nothing; a cut at an epoch
/// holds only the records below it.
#[test]
fn i18_a_cut_holds_only_the_epochs_below_it() {
    let (app, transfers) = diamond(false);
    let region = region(&app, "credit");
    let transfer = |to: &str, amount: i64| parsley::RecordData {
        key: Some(Bytes::from_static(b"t")),
        value: Some(
            Codec::<Transfer>::encode(
                &Json,
                &Transfer {
                    from: "x".to_string(),
                    to: to.to_string(),
                    amount,
                },
            )
            .unwrap(),
        ),
        headers: Vec::new(),
        timestamp: 0,
    };
    let data = [transfer("ana", 5), transfer("ana", 7), transfer("ben", 1)];
    let tp = Tp::new(transfers.name().clone(), 0);
    let records: Vec<SourceRecord<'_>> = data
        .iter()
        .enumerate()
        .map(|(offset, data)| SourceRecord {
            tp: tp.clone(),
            offset: offset as u64,
            data,
            epoch: offset as i64 + 10,
        })
        .collect();
    let partitions = |_: &TopicName| Some(2);
    let outputs = region.evaluate(&records, i64::MAX, &partitions, Schedule::OldestFirst);
    let credits = TopicName::new("credits");
    let ana = Some(Bytes::from_static(b"ana"));
    let value = |sum: i64| {
        vec![AtCut::Value(Some(
            Codec::<i64>::encode(&I64, &sum).unwrap(),
        ))]
    };
    assert_eq!(outputs.at(None, &credits, &ana, 10), [AtCut::Nothing]);
    assert_eq!(outputs.at(None, &credits, &ana, 11), value(5));
    assert_eq!(outputs.at(None, &credits, &ana, 12), value(12));
    assert_eq!(outputs.at(None, &credits, &ana, 99), value(12));
    // Evaluated only up to epoch 11: the second transfer is not in it.
    let short = region.evaluate(&records, 11, &partitions, Schedule::OldestFirst);
    assert_eq!(short.at(None, &credits, &ana, 99), value(5));
}
