//! I18 on releases that a view never wrote, appended to the logs of a
//! run that passed: each kind of wrong release is found and told.

use std::time::Duration;

use bytes::Bytes;
use parsley::header::CUT_HEADER;
use parsley::{assemble, Codec, Header, RecordData, Tp, I64};

use super::region_tests::{diamond_viewed, Transfer};
use super::{check, CheckInput, Invariant};
use crate::model::Cluster;
use crate::sim::running::simulation::{Input, Simulation};
use crate::sim::world::trace::Entry;

/// A run of the diamond with its total a consistent view, that passed
/// I18, with the first cut a release carries and the highest epoch every
/// source partition reached.
fn passed() -> (parsley::App, Cluster, Vec<Entry>, i64) {
    let epoch = Duration::from_millis(200);
    let (app, transfers) = diamond_viewed(true, Some(epoch));
    let simulation = Simulation::builder(app.clone())
        .input(
            Input::new(&transfers, |draw| {
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
        .inputs(60)
        .budget(2_000, 6_000)
        .build()
        .expect("the simulation builds");
    let outcome = simulation.run_seed(3);
    assert!(
        !outcome
            .violations
            .iter()
            .any(|violation| violation.invariant == Invariant::I18),
        "{:?}",
        outcome.violations
    );
    let cut = (0..2)
        .flat_map(|partition| {
            let tp = Tp::new("totals", partition);
            let log = outcome.cluster.log(&tp).unwrap();
            log.read_committed()
                .filter_map(|(_, data)| parsley::header::cut_of(data))
                .collect::<Vec<_>>()
        })
        .min()
        .expect("the view released a total");
    (app, outcome.cluster, outcome.trace, cut)
}

/// The I18 messages of checking `cluster` after appending `forged` to
/// `totals`' partition 0.
fn i18_of(
    app: &parsley::App,
    cluster: &Cluster,
    trace: &[Entry],
    forged: &[(i64, Option<i64>)],
) -> Vec<String> {
    let mut cluster = cluster.clone();
    for (cut, total) in forged {
        let value = total.map(|total| Codec::<i64>::encode(&I64, &total).unwrap());
        cluster
            .append(
                &Tp::new("totals", 0),
                RecordData {
                    key: Some(Bytes::from_static(b"total")),
                    value,
                    headers: vec![Header {
                        name: CUT_HEADER.into(),
                        value: Bytes::from(cut.to_string()),
                    }],
                    timestamp: 0,
                },
            )
            .unwrap();
    }
    let assembly = assemble(app, &cluster).unwrap();
    check(&CheckInput {
        app,
        run_app: app,
        fresh_app: None,
        assembly: &assembly,
        cluster: &cluster,
        trace,
        quiesced: true,
        liveness_steps: 0,
        restores: &[],
    })
    .violations
    .into_iter()
    .filter(|violation| violation.invariant == Invariant::I18)
    .map(|violation| violation.message)
    .collect()
}

#[test]
fn i18_tells_each_kind_of_wrong_release() {
    let (app, cluster, trace, cut) = passed();
    // The run's own releases pass.
    assert_eq!(i18_of(&app, &cluster, &trace, &[]), Vec::<String>::new());
    // The right total at a cut the view did reach passes too.
    assert_eq!(
        i18_of(&app, &cluster, &trace, &[(cut, Some(0))]),
        Vec::<String>::new()
    );
    // A total no cut gives.
    let wrong = i18_of(&app, &cluster, &trace, &[(cut, Some(5))]);
    assert!(
        wrong.len() == 1
            && wrong[0].contains("value 0x0000000000000005) with cut")
            && wrong[0].contains("the region computes 0x0000000000000000 for the key"),
        "{wrong:?}"
    );
    // A cut past every source partition's log.
    let far = i18_of(&app, &cluster, &trace, &[(i64::MAX / 2, Some(0))]);
    assert!(
        far.iter()
            .any(|message| message.contains("could not know that the epochs below")),
        "{far:?}"
    );
    // A key's cut going down.
    let down = i18_of(
        &app,
        &cluster,
        &trace,
        &[(cut + 1, Some(0)), (cut, Some(0))],
    );
    assert!(
        down.iter()
            .any(|message| message.contains("went back to an earlier cut")),
        "{down:?}"
    );
    // A cut that is not one.
    let mut cluster_text = cluster.clone();
    cluster_text
        .append(
            &Tp::new("totals", 0),
            RecordData {
                key: Some(Bytes::from_static(b"total")),
                value: None,
                headers: vec![Header {
                    name: CUT_HEADER.into(),
                    value: Bytes::from_static(b"soon"),
                }],
                timestamp: 0,
            },
        )
        .unwrap();
    let text = i18_of(&app, &cluster_text, &trace, &[]);
    assert!(
        text.len() == 1 && text[0].contains("\"soon\", which is not a cut"),
        "{text:?}"
    );
    // Before the first epoch any source reached, the view has no total.
    let early = i18_of(&app, &cluster, &trace, &[(i64::MIN / 2, Some(0))]);
    assert!(
        early
            .iter()
            .any(|message| message.contains("the view emitted none from those epochs")),
        "{early:?}"
    );
}
