//! The diamond: one source fanned out to two stages that meet again.

use std::time::Duration;

use parsley::{App, CompositionError, Parsley, Stage, Step, Topic, I64};

use crate::*;

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
