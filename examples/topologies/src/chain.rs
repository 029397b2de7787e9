//! The three-stage chain.

use std::time::Duration;

use parsley::{App, CompositionError, Parsley, Stage, Step, Topic, I64};

use crate::*;

/// The topics of the three-stage chain.
#[derive(Clone, Debug)]
pub struct ChainTopics {
    /// The chain's input.
    pub input: Topic<String, i64>,
    /// The first stage's output.
    pub enriched: Topic<String, i64>,
    /// The second stage's output.
    pub metered: Topic<String, i64>,
    /// The chain's output.
    pub output: Topic<String, i64>,
}

impl ChainTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        ChainTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        ChainTopics {
            input: long_topic(format!("{prefix}input")),
            enriched: long_topic(format!("{prefix}enriched")),
            metered: long_topic(format!("{prefix}metered")),
            output: long_topic(format!("{prefix}output")),
        }
    }
}

impl Default for ChainTopics {
    fn default() -> Self {
        ChainTopics::new()
    }
}

/// A three-stage chain with ticks in the middle stage: `enrich` doubles each
/// value, `meter` keeps a running total per key and emits it, and on every
/// tick emits the tick's time without a key; `settle` forwards everything.
/// Keys are preserved and keyless ticks stay on their task's partition, so
/// the chain is co-partitioned (a tick under one key would send every task's
/// ticks to one partition of `metered`, a fan-in).
pub fn chain(topics: &ChainTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    chain_named("chain", topics, tick_interval)
}

/// [`chain`] under another application id.
pub fn chain_named(
    app_id: &str,
    topics: &ChainTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let enriched = topics.enriched.clone();
    let enrich = Stage::named("enrich")
        .on(&topics.input, move |record| {
            checked(*record.value())
                .map(|value| vec![enriched.send(record.key().cloned(), value * 2)])
        })
        .into(&topics.enriched)
        .build();
    let metered = topics.metered.clone();
    let metered_ticks = topics.metered.clone();
    let meter = Stage::named("meter")
        .state(I64, || 0i64)
        .on(&topics.enriched, move |total: i64, record| {
            let total = total + record.value();
            Step::of(total).emit(metered.send(record.key().cloned(), total))
        })
        .ticks(tick_interval, move |tick| {
            vec![metered_ticks.send(None, tick.timestamp)]
        })
        .into(&topics.metered)
        .build();
    let output = topics.output.clone();
    let settle = Stage::named("settle")
        .on(&topics.metered, move |record| {
            vec![output.send(record.key().cloned(), *record.value())]
        })
        .into(&topics.output)
        .build();
    Parsley::named(app_id)
        .stage(enrich)
        .stage(meter)
        .stage(settle)
        .build()
}
