//! The fan-out.

use parsley::{App, CompositionError, Parsley, Stage, Step, Topic, I64};

use crate::*;

/// The topics of the fan-out.
#[derive(Clone, Debug)]
pub struct FanOutTopics {
    /// The source both stages consume.
    pub clicks: Topic<String, i64>,
    /// `count`'s output: the running count of clicks per key.
    pub counts: Topic<String, i64>,
    /// `mirror`'s output: each click as it came.
    pub mirrored: Topic<String, i64>,
}

impl FanOutTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        FanOutTopics {
            clicks: long_topic("clicks".to_string()),
            counts: long_topic("counts".to_string()),
            mirrored: long_topic("mirrored".to_string()),
        }
    }
}

impl Default for FanOutTopics {
    fn default() -> Self {
        FanOutTopics::new()
    }
}

/// A fan-out: `count` (stateful) and `mirror` (stateless) both consume
/// `clicks`, each under its own consumer group (X6), so a restart of one
/// stage's task resumes from that stage's own position.
pub fn fan_out(topics: &FanOutTopics) -> Result<App, CompositionError> {
    let counts = topics.counts.clone();
    let count = Stage::named("count")
        .state(I64, || 0i64)
        .on(&topics.clicks, move |seen: i64, click| {
            checked(*click.value())
                .map(|_| Step::of(seen + 1).emit(counts.send(click.key().cloned(), seen + 1)))
        })
        .into(&topics.counts)
        .build();
    let mirrored = topics.mirrored.clone();
    let mirror = Stage::named("mirror")
        .on(&topics.clicks, move |click| {
            checked(*click.value()).map(|value| vec![mirrored.send(click.key().cloned(), value)])
        })
        .into(&topics.mirrored)
        .build();
    Parsley::named("shop").stage(count).stage(mirror).build()
}
