//! The branches example: a ledger per branch.

use parsley::{App, CompositionError, Parsley, Stage, Step, Topic, I64};

use crate::*;

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
