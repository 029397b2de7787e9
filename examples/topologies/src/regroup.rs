//! The regrouping example: wide histories and cross-topic holds.

use parsley::{App, CompositionError, Parsley, Stage, Step, Topic, I64};

use crate::*;

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
