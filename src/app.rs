//! Applications: a named set of stages, checked against the composition rules
//! (C1, C2) when built.
//!
//! ```
//! use parsley::{Parsley, Stage, Topic};
//!
//! let orders: Topic<String, i64> = Topic::new("orders");
//! let audits: Topic<String, String> = Topic::new("audits");
//! let out = audits.clone();
//! let relay = Stage::named("relay")
//!     .on(&orders, move |order| vec![out.send(order.key().cloned(), order.value().to_string())])
//!     .into(&audits)
//!     .build();
//! let app = Parsley::named("payments").stage(relay).build().unwrap();
//! assert_eq!(app.id(), "payments");
//! ```

use std::collections::BTreeMap;

pub use crate::dead_letter::dead_letter_topic_name;
use crate::join::ForeignKeyJoinDecl;
use crate::stage::{Stage, StageProblem};
use crate::topic::TopicRef;
use crate::tp::TopicName;

/// The application builder.
pub struct Parsley;

impl Parsley {
    /// Starts an application whose application id is `id`. The id prefixes
    /// every topic, consumer group and transactional id Parsley derives, so
    /// it must be a legal Kafka name. `build` checks the composition rules
    /// (C1, C2) and names the rule it refuses.
    ///
    /// ```
    /// use parsley::{Parsley, Stage, Topic};
    ///
    /// let orders: Topic<String, i64> = Topic::new("orders");
    /// let ignore = |name: &str| Stage::named(name).on(&orders, |_order| Vec::<parsley::Emission>::new()).build();
    ///
    /// let app = Parsley::named("payments").stage(ignore("a")).stage(ignore("b")).build()?;
    /// assert_eq!(app.id(), "payments");
    /// assert_eq!(app.stages().len(), 2);
    ///
    /// // Two stages with one name break C1.
    /// let refused = Parsley::named("payments").stage(ignore("a")).stage(ignore("a")).build();
    /// assert!(refused.unwrap_err().to_string().starts_with("C1 (docs/RULES.md#c1)"));
    /// # Ok::<(), parsley::CompositionError>(())
    /// ```
    pub fn named(id: impl Into<String>) -> AppBuilder {
        AppBuilder {
            id: id.into(),
            stages: Vec::new(),
        }
    }
}

/// Collects the stages of an application; see [`Parsley::named`].
pub struct AppBuilder {
    id: String,
    stages: Vec<Stage>,
}

/// Why an application or stage declaration was refused, naming the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompositionError {
    /// C1: two stages share a name.
    #[error("C1 (docs/RULES.md#c1): stage name {stage:?} is used twice in application {app:?}")]
    DuplicateStage {
        /// The application id.
        app: String,
        /// The stage at fault.
        stage: String,
    },
    /// C1: one topic name with two different codecs.
    #[error("C1 (docs/RULES.md#c1): topic {topic:?} is declared with two codecs: {first} (by stage {first_stage:?}) and {second} (by stage {second_stage:?})")]
    ConflictingCodecs {
        /// The topic at fault.
        topic: String,
        /// The codecs of the first declaration.
        first: String,
        /// The stage of the first declaration.
        first_stage: String,
        /// The codecs of the conflicting declaration.
        second: String,
        /// The stage of the conflicting declaration.
        second_stage: String,
    },
    /// C1: a declared topic takes the name of a tick topic, changelog or dead-letter topic Parsley derives.
    #[error("C1 (docs/RULES.md#c1): topic {topic:?} used by stage {stage:?} collides with the {role} topic Parsley derives for stage {owner:?}")]
    ReservedTopicName {
        /// The topic at fault.
        topic: String,
        /// The stage at fault.
        stage: String,
        /// "tick", "changelog" or "dead-letter".
        role: &'static str,
        /// The stage that owns the derived topic.
        owner: String,
    },
    /// C2: a stage consumes another stage's tick topic.
    #[error("C2 (docs/RULES.md#c2): stage {stage:?} consumes tick topic {topic:?}, which belongs to stage {owner:?}; a tick topic is consumed only by its own stage")]
    ForeignTickTopic {
        /// The stage at fault.
        stage: String,
        /// The topic at fault.
        topic: String,
        /// The stage that owns the derived topic.
        owner: String,
    },
    /// T2: a tick topic declared as a sink.
    #[error("T2 (docs/RULES.md#t2): stage {stage:?} declares tick topic {topic:?} as a sink; no logic may emit to a tick topic")]
    TickTopicAsSink {
        /// The stage at fault.
        stage: String,
        /// The topic at fault.
        topic: String,
    },
    /// A stage without sources would have no tasks.
    #[error("stage {stage:?} has no source topic; a stage's tasks follow its sources' partitions")]
    NoSources {
        /// The stage at fault.
        stage: String,
    },
    /// A stage names one source twice.
    #[error("stage {stage:?} consumes topic {topic:?} twice")]
    DuplicateSource {
        /// The stage at fault.
        stage: String,
        /// The topic at fault.
        topic: String,
    },
    /// T1: `ticks` or `tick_fold` called twice.
    #[error("T1 (docs/RULES.md#t1): stage {stage:?} declares ticks twice")]
    TicksDeclaredTwice {
        /// The stage at fault.
        stage: String,
    },
    /// T1: a zero tick interval.
    #[error("T1 (docs/RULES.md#t1): stage {stage:?} declares a tick interval of zero")]
    ZeroTickInterval {
        /// The stage at fault.
        stage: String,
    },
    /// S1: `state` called after `on` or `ticks`.
    #[error("S1 (docs/RULES.md#s1): stage {stage:?} declares its state after its logic; call `state` before `on` and `ticks`")]
    StateAfterLogic {
        /// The stage at fault.
        stage: String,
    },
    /// An operator whose declaration cannot be: a window of size zero
    /// (W1), a join without an output topic (J4, J5, J9, J10), a time to
    /// live of zero (E1), a re-key of a topic its stage does not write
    /// (R3), …
    #[error("{rules} (docs/RULES.md#{anchor}): {operator} {stage:?} declares {reason}")]
    ImpossibleOperator {
        /// The stage at fault.
        stage: String,
        /// The rules it breaks.
        rules: &'static str,
        /// The anchor of the first in docs/RULES.md.
        anchor: &'static str,
        /// What the operator is called.
        operator: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// J19: a versioned join whose grace period is longer than its table's
    /// history retention (Kafka Streams refuses it too): a table update
    /// the grace waits for could be older than the history keeps.
    #[error("J19 (docs/RULES.md#j19): versioned join {stage:?} declares a grace period of {grace:?}, longer than its table's history retention of {retention:?}; shorten the grace or lengthen the retention")]
    VersionedGraceBeyondRetention {
        /// The stage at fault.
        stage: String,
        /// Its grace period.
        grace: std::time::Duration,
        /// Its history retention.
        retention: std::time::Duration,
    },
    /// R1: a re-key whose stage was built into another application
    /// first, which named its repartition topic.
    #[error("R1 (docs/RULES.md#r1): stage {stage:?} re-keys into {topic:?}, named by application {other:?}, which it was built into first; a stage's derived topics belong to one application: declare the stage again for {app:?}")]
    ForeignRekey {
        /// The application being built.
        app: String,
        /// The stage.
        stage: String,
        /// Its repartition topic, as the other application named it.
        topic: String,
        /// The application that named it.
        other: String,
    },
    /// R1: two re-keys with one repartition topic (one name), on one stage
    /// or two.
    #[error("R1 (docs/RULES.md#r1): {topic:?} is the repartition topic of two re-keys, of stage {first:?} and of stage {second:?}; give each re-key a name of its own")]
    RepartitionTopicTwice {
        /// The repartition topic.
        topic: String,
        /// The stage of the first re-key.
        first: String,
        /// The stage of the second.
        second: String,
    },
    /// R1: a stage other than the one whose re-key writes it writes a
    /// repartition topic.
    #[error("R1 (docs/RULES.md#r1): stage {stage:?} writes {topic:?}, the repartition topic of a re-key of stage {owner:?}; only that stage writes it")]
    RepartitionTopicAsSink {
        /// The stage at fault.
        stage: String,
        /// The repartition topic.
        topic: String,
        /// Its re-key stage.
        owner: String,
    },
    /// J10: a foreign-key join whose stages were built into another
    /// application first, which named its derived topics.
    #[error("J10 (docs/RULES.md#j10): foreign-key join stage {stage:?} writes {topic:?}, named by application {other:?}, which it was built into first; a stage's derived topics belong to one application: declare the join again for {app:?}")]
    ForeignKeyJoinOfAnotherApp {
        /// The application being built.
        app: String,
        /// The stage.
        stage: String,
        /// The derived topic it writes, as the other application named it.
        topic: String,
        /// The application that named it.
        other: String,
    },
    /// R1, J10: a stage reads or writes a topic derived for an operator
    /// whose stage is not in the application: a re-key's repartition
    /// topic, or a foreign-key join's subscription or response topic, is
    /// internal to the application that has the operator.
    #[error("{rule} (docs/RULES.md#{anchor}): stage {stage:?} names {topic:?}, the {role} topic of {owner:?}, whose stage is not in application {app:?}; add that stage to the application", rule = derived_rule(role).0, anchor = derived_rule(role).1)]
    DerivedTopicOutsideApp {
        /// The application being built.
        app: String,
        /// The stage at fault.
        stage: String,
        /// The derived topic, as named so far (its template before any
        /// build).
        topic: String,
        /// "repartition" (R1), "subscription" or "response" (J10).
        role: &'static str,
        /// The re-key or join it is derived for.
        owner: String,
    },
    /// V2: a consistent view's epoch is not a whole, positive number of
    /// milliseconds.
    #[error("V2 (docs/RULES.md#v2): consistent view {view:?} declares an epoch of {epoch:?}; an epoch is a whole, positive number of milliseconds")]
    ConsistentEpoch {
        /// The consistent stage.
        view: String,
        /// The epoch it declared.
        epoch: std::time::Duration,
    },
    /// V2: a stage on a path to a consistent view does something no cut
    /// of the sources decides (it ticks on the wall clock, or waits on it
    /// to order its sources), or is itself a consistent view.
    #[error("V2 (docs/RULES.md#v2): stage {stage:?} is on a path to consistent view {view:?} but {reason}; what a view shows must be a function of a prefix of its sources")]
    ConsistentRegion {
        /// The consistent stage.
        view: String,
        /// The stage on its path.
        stage: String,
        /// What the stage does that a cut cannot decide.
        reason: String,
    },
    /// V2: a stage leads to two consistent views of different epochs: its
    /// tasks can deliver in only one epoch order.
    #[error("V2 (docs/RULES.md#v2): stage {stage:?} leads to consistent views {first:?} (epoch {first_epoch:?}) and {second:?} (epoch {second_epoch:?}); views that share a stage must share an epoch")]
    ConsistentEpochsDiffer {
        /// The shared stage.
        stage: String,
        /// One view.
        first: String,
        /// Its epoch.
        first_epoch: std::time::Duration,
        /// The other.
        second: String,
        /// Its epoch.
        second_epoch: std::time::Duration,
    },
    /// V2: a consistent view whose inputs come from disjoint sources: no
    /// record of one input has a cause in common with the other, so no cut
    /// relates them.
    #[error("V2 (docs/RULES.md#v2): consistent view {view:?} reads inputs that share no source: {inputs}; a view over unrelated sources needs no consistency (drop the declaration) or a common source")]
    ConsistentInputsUnrelated {
        /// The consistent stage.
        view: String,
        /// Each input with the application's sources it derives from.
        inputs: String,
    },
    /// J10: a foreign-key join with one or two of its three stages.
    #[error("J10 (docs/RULES.md#j10): foreign-key join {join:?} lacks its stage {missing:?}; add all three stages the join's build returns")]
    IncompleteForeignKeyJoin {
        /// The join.
        join: String,
        /// The stage missing.
        missing: String,
    },
    /// J10: a stage other than the one that derives it writes a
    /// foreign-key join's subscription or response topic.
    #[error("J10 (docs/RULES.md#j10): stage {stage:?} writes {topic:?}, a topic of foreign-key join stage {owner:?}; only that stage writes it")]
    ForeignKeyJoinTopicAsSink {
        /// The stage at fault.
        stage: String,
        /// The derived topic.
        topic: String,
        /// The stage that writes it.
        owner: String,
    },
    /// A name that cannot be part of a Kafka topic name.
    #[error("{what} {name:?} is not a valid Kafka name: {reason}")]
    InvalidName {
        /// What the name names: application id, stage name or topic name.
        what: &'static str,
        /// The name refused.
        name: String,
        /// Why Kafka would refuse it.
        reason: &'static str,
    },
    /// An application with no stages.
    #[error("application {app:?} has no stages")]
    NoStages {
        /// The application id.
        app: String,
    },
}

/// The rule, and its anchor, that a derived topic of `role` follows: R1
/// for a repartition topic, J10 for a foreign-key join's.
fn derived_rule(role: &str) -> (&'static str, &'static str) {
    match role {
        "repartition" => ("R1", "r1"),
        _ => ("J10", "j10"),
    }
}

/// Checks a name that becomes (part of) a Kafka topic name.
fn check_name(what: &'static str, name: &str) -> Result<(), CompositionError> {
    let invalid = |reason| CompositionError::InvalidName {
        what,
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("it is empty"));
    }
    if name.len() > 249 {
        return Err(invalid("it is longer than 249 bytes"));
    }
    if name == "." || name == ".." {
        return Err(invalid("'.' and '..' are reserved"));
    }
    if !name
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
    {
        return Err(invalid(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

impl AppBuilder {
    /// Adds a stage. Stages keep the order they are added in.
    pub fn stage(mut self, stage: Stage) -> Self {
        self.stages.push(stage);
        self
    }

    /// Adds several stages, in order: an operator's, such as a foreign-key
    /// join's three.
    pub fn stages(mut self, stages: impl IntoIterator<Item = Stage>) -> Self {
        self.stages.extend(stages);
        self
    }

    /// Checks the composition rules and returns the application, or the first
    /// rule it breaks.
    pub fn build(self) -> Result<App, CompositionError> {
        check_name("application id", &self.id)?;
        if self.stages.is_empty() {
            return Err(CompositionError::NoStages { app: self.id });
        }
        let mut plans: Vec<StagePlan> = Vec::new();
        let mut repartitions: BTreeMap<TopicName, String> = BTreeMap::new();
        for stage in self.stages {
            let def = &stage.def;
            check_name("stage name", &def.name)?;
            if plans.iter().any(|plan| plan.stage.name() == def.name) {
                return Err(CompositionError::DuplicateStage {
                    app: self.id.clone(),
                    stage: def.name.clone(),
                });
            }
            if let Some(problem) = def.problems.first() {
                let stage = def.name.clone();
                return Err(match problem {
                    StageProblem::TicksDeclaredTwice => {
                        CompositionError::TicksDeclaredTwice { stage }
                    }
                    StageProblem::ZeroTickInterval => CompositionError::ZeroTickInterval { stage },
                    StageProblem::StateAfterLogic => CompositionError::StateAfterLogic { stage },
                    StageProblem::Operator(problem) => CompositionError::ImpossibleOperator {
                        stage,
                        rules: problem.rules,
                        anchor: problem.anchor,
                        operator: problem.operator,
                        reason: problem.reason,
                    },
                    StageProblem::VersionedGraceBeyondRetention { grace, retention } => {
                        CompositionError::VersionedGraceBeyondRetention {
                            stage,
                            grace: *grace,
                            retention: *retention,
                        }
                    }
                });
            }
            if def.sources.is_empty() {
                return Err(CompositionError::NoSources {
                    stage: def.name.clone(),
                });
            }
            for (index, source) in def.sources.iter().enumerate() {
                if def.sources[..index]
                    .iter()
                    .any(|earlier| earlier.name == source.name)
                {
                    return Err(CompositionError::DuplicateSource {
                        stage: def.name.clone(),
                        topic: source.name.to_string(),
                    });
                }
            }
            // The topics this stage's operators derive are named after this
            // application, once: a stage built into another application
            // first keeps that one's (R1, J10).
            for (name, topic) in owned_derived_topics(&stage) {
                let role = topic
                    .derivation()
                    .map_or("repartition", |derived| derived.role);
                check_name(
                    if role == "repartition" {
                        "re-key name"
                    } else {
                        "join name"
                    },
                    name,
                )?;
                if let Err(other) = topic.bind(&self.id) {
                    let (app, stage, topic) =
                        (self.id.clone(), def.name.clone(), topic.to_string());
                    return Err(match role {
                        "repartition" => CompositionError::ForeignRekey {
                            app,
                            stage,
                            topic,
                            other,
                        },
                        _ => CompositionError::ForeignKeyJoinOfAnotherApp {
                            app,
                            stage,
                            topic,
                            other,
                        },
                    });
                }
                if role != "repartition" {
                    continue;
                }
                if let Some(first) = repartitions.insert(topic.clone(), def.name.clone()) {
                    return Err(CompositionError::RepartitionTopicTwice {
                        topic: topic.to_string(),
                        first,
                        second: def.name.clone(),
                    });
                }
            }
            let tick_topic = def
                .ticks
                .map(|_| TopicName::from(tick_topic_name(&self.id, &def.name)));
            let changelog = def
                .stateful
                .then(|| TopicName::from(changelog_topic_name(&self.id, &def.name)));
            let dead_letter = def
                .dead_letter
                .then(|| TopicName::from(dead_letter_topic_name(&self.id, &def.name)));
            plans.push(StagePlan {
                stage: stage.clone(),
                group: group_name(&self.id, &def.name),
                tick_topic,
                changelog,
                dead_letter,
                region: None,
            });
        }
        crate::region::plan(&mut plans)?;
        let app = App {
            id: self.id,
            stages: plans,
        };
        app.check_foreign_key_joins()?;
        app.check_derived_topics()?;
        app.check_topics()?;
        Ok(app)
    }
}

/// The topics `stage`'s operators derive and write, with the name of the
/// operator each is named after: a re-key's repartition topic (R1), a
/// foreign-key join's subscription or response topic (J10).
fn owned_derived_topics(stage: &Stage) -> Vec<(&str, &TopicName)> {
    let hooks = stage.hooks();
    let mut owned: Vec<(&str, &TopicName)> = hooks
        .operators::<crate::rekey::RekeyDecl>()
        .map(|rekey| (stage.name(), &rekey.repartition))
        .chain(
            hooks
                .operators::<crate::rekey::RekeyOutputDecl>()
                .map(|rekey| (rekey.name.as_str(), &rekey.repartition)),
        )
        .collect();
    if let Some(join) = hooks.operator::<ForeignKeyJoinDecl>() {
        match join.part {
            crate::join::ForeignKeyJoinPart::Subscribe => {
                owned.push((join.join.as_str(), &join.subscription))
            }
            crate::join::ForeignKeyJoinPart::Respond => {
                owned.push((join.join.as_str(), &join.response))
            }
            crate::join::ForeignKeyJoinPart::Resolve => {}
        }
    }
    owned
}

/// `<application.id>-<stage>-ticks` (T2).
pub fn tick_topic_name(app: &str, stage: &str) -> String {
    format!("{app}-{stage}-ticks")
}

/// `<application.id>-<stage>`: the consumer group under which the stage's
/// tasks commit their positions and checkpoints (X6). One group per stage,
/// so that stages consuming the same topic never share a committed position.
pub fn group_name(app: &str, stage: &str) -> String {
    format!("{app}-{stage}")
}

/// `<application.id>-<stage>-state-changelog` (S5).
pub fn changelog_topic_name(app: &str, stage: &str) -> String {
    format!("{app}-{stage}-state-changelog")
}

/// A built, checked application.
#[derive(Clone, Debug)]
pub struct App {
    id: String,
    stages: Vec<StagePlan>,
}

/// A stage within its application: the topics Parsley derives for it.
#[derive(Clone, Debug)]
pub struct StagePlan {
    /// The stage itself.
    pub stage: Stage,
    /// The stage's consumer group, `<application.id>-<stage>` (X6).
    pub group: String,
    /// The stage's own tick topic, when it declares ticks.
    pub tick_topic: Option<TopicName>,
    /// The stage's changelog, when it is stateful.
    pub changelog: Option<TopicName>,
    /// The stage's dead-letter topic, `<application.id>-<stage>-dlq`, when it
    /// opts in (X5).
    pub dead_letter: Option<TopicName>,
    /// V2: how the stage takes part in a consistent view, when it is on
    /// a path to one.
    pub region: Option<crate::region::Region>,
}

impl StagePlan {
    /// The stage's name.
    pub fn name(&self) -> &str {
        self.stage.name()
    }

    /// Every topic a task of this stage consumes: the declared sources, then
    /// the tick topic.
    pub fn consumed_topics(&self) -> Vec<TopicName> {
        self.stage
            .sources()
            .iter()
            .map(|source| source.name.clone())
            .chain(self.tick_topic.clone())
            .collect()
    }
}

/// The 64-bit FNV-1a hash of `text`: how shapes are fingerprinted
/// ([`App::shape_fingerprint`]), the same on every platform and build.
pub fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl App {
    /// The application id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The application's shape, one line per stage in order: its name,
    /// group, consumed topics (sorted), tick, changelog and dead-letter
    /// topics. Two builds with one shape derive the same topics and groups;
    /// the logic inside the stages is not part of it.
    pub fn shape(&self) -> String {
        let mut shape = String::new();
        for plan in self.stages() {
            let topics = plan.consumed_topics();
            let mut consumed: Vec<&str> = topics.iter().map(|topic| topic.as_str()).collect();
            consumed.sort_unstable();
            shape.push_str(&format!(
                "stage {} group {} consumes {:?} ticks {:?} changelog {:?} dlq {:?}\n",
                plan.name(),
                plan.group,
                consumed,
                plan.tick_topic.as_ref().map(|topic| topic.as_str()),
                plan.changelog.as_ref().map(|topic| topic.as_str()),
                plan.dead_letter.as_ref().map(|topic| topic.as_str()),
            ));
        }
        shape
    }

    /// The [`fingerprint`] of [`App::shape`].
    pub fn shape_fingerprint(&self) -> u64 {
        fingerprint(&self.shape())
    }

    /// The stages, in the order they were added.
    pub fn stages(&self) -> &[StagePlan] {
        &self.stages
    }

    /// The stage named `name`, if any.
    pub fn stage(&self, name: &str) -> Option<&StagePlan> {
        self.stages.iter().find(|plan| plan.name() == name)
    }

    /// The consumer group of `stage` (X6): `<application.id>-<stage>`.
    pub fn group_of(&self, stage: &str) -> Option<&str> {
        self.stage(stage).map(|plan| plan.group.as_str())
    }

    /// How the application declares `topic`, as a source or a sink of one of
    /// its stages (C1 makes every declaration of a topic agree); `None` for a
    /// topic no stage names, such as a tick topic or a changelog.
    pub fn declaration(&self, topic: &str) -> Option<&TopicRef> {
        self.stages
            .iter()
            .flat_map(|plan| plan.stage.sources().iter().chain(plan.stage.sinks()))
            .find(|declared| declared.name.as_str() == topic)
    }

    /// The topics the stages emit to (S3), each once, in declaration order.
    pub fn sinks(&self) -> Vec<&TopicName> {
        let mut sinks: Vec<&TopicName> = Vec::new();
        for sink in self.stages.iter().flat_map(|plan| plan.stage.sinks()) {
            if !sinks.contains(&&sink.name) {
                sinks.push(&sink.name);
            }
        }
        sinks
    }

    /// The stage that owns `topic` as its tick topic, if any.
    pub fn tick_topic_owner(&self, topic: &str) -> Option<&StagePlan> {
        self.stages.iter().find(|plan| {
            plan.tick_topic
                .as_ref()
                .is_some_and(|tick| tick.as_str() == topic)
        })
    }

    /// The stage whose state changelog (S5) `topic` is, if any: drivers ask
    /// the application for a topic's role instead of reading its name.
    pub fn changelog_owner(&self, topic: &str) -> Option<&StagePlan> {
        self.stages.iter().find(|plan| {
            plan.changelog
                .as_ref()
                .is_some_and(|changelog| changelog.as_str() == topic)
        })
    }

    /// R1, J10: every derived topic a stage reads or writes was named by
    /// this build, so its operator's stage is in this application.
    fn check_derived_topics(&self) -> Result<(), CompositionError> {
        for plan in &self.stages {
            for topic in plan.stage.sources().iter().chain(plan.stage.sinks()) {
                let Some(derived) = topic.name.derivation() else {
                    continue;
                };
                if derived.app.as_deref() != Some(self.id.as_str()) {
                    return Err(CompositionError::DerivedTopicOutsideApp {
                        app: self.id.clone(),
                        stage: plan.name().to_string(),
                        topic: topic.name.to_string(),
                        role: derived.role,
                        owner: derived.owner,
                    });
                }
            }
        }
        Ok(())
    }

    /// J10: each foreign-key join has its three stages.
    fn check_foreign_key_joins(&self) -> Result<(), CompositionError> {
        for plan in &self.stages {
            let Some(join) = plan.stage.hooks().operator::<ForeignKeyJoinDecl>() else {
                continue;
            };
            for part in crate::join::ForeignKeyJoinPart::ALL {
                let present = self.stages.iter().any(|other| {
                    other
                        .stage
                        .hooks()
                        .operator::<ForeignKeyJoinDecl>()
                        .is_some_and(|other| other.join == join.join && other.part == part)
                });
                if !present {
                    return Err(CompositionError::IncompleteForeignKeyJoin {
                        join: join.join.clone(),
                        missing: part.stage_name(&join.join),
                    });
                }
            }
        }
        Ok(())
    }

    /// C1 and C2 over every topic any stage names.
    fn check_topics(&self) -> Result<(), CompositionError> {
        let mut derived: BTreeMap<&str, (&'static str, &str)> = BTreeMap::new();
        for plan in &self.stages {
            if let Some(tick) = &plan.tick_topic {
                derived.insert(tick.as_str(), ("tick", plan.name()));
            }
            if let Some(changelog) = &plan.changelog {
                derived.insert(changelog.as_str(), ("changelog", plan.name()));
            }
            if let Some(dead_letter) = &plan.dead_letter {
                derived.insert(dead_letter.as_str(), ("dead-letter", plan.name()));
            }
        }
        // The derived topics a stage writes and no other may (R1, J10).
        let mut written: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
        for plan in &self.stages {
            for repartition in plan.stage.hooks().repartitions() {
                written.insert(repartition.as_str(), (plan.name(), false));
            }
            if let Some(join) = plan.stage.hooks().operator::<ForeignKeyJoinDecl>() {
                let topic = match join.part {
                    crate::join::ForeignKeyJoinPart::Subscribe => &join.subscription,
                    crate::join::ForeignKeyJoinPart::Respond => &join.response,
                    crate::join::ForeignKeyJoinPart::Resolve => continue,
                };
                written.insert(topic.as_str(), (plan.name(), true));
            }
        }
        let mut declared: BTreeMap<&str, (&TopicRef, &str)> = BTreeMap::new();
        for plan in &self.stages {
            let stage = plan.name();
            for sink in plan.stage.sinks() {
                match written.get(sink.name.as_str()) {
                    Some((owner, false)) if *owner != stage => {
                        return Err(CompositionError::RepartitionTopicAsSink {
                            stage: stage.to_string(),
                            topic: sink.name.to_string(),
                            owner: owner.to_string(),
                        })
                    }
                    Some((owner, true)) if *owner != stage => {
                        return Err(CompositionError::ForeignKeyJoinTopicAsSink {
                            stage: stage.to_string(),
                            topic: sink.name.to_string(),
                            owner: owner.to_string(),
                        })
                    }
                    _ => {}
                }
            }
            for sink in plan.stage.sinks() {
                if let Some(("tick", _)) = derived.get(sink.name.as_str()) {
                    return Err(CompositionError::TickTopicAsSink {
                        stage: stage.to_string(),
                        topic: sink.name.to_string(),
                    });
                }
            }
            for source in plan.stage.sources() {
                if let Some(("tick", owner)) = derived.get(source.name.as_str()) {
                    return Err(CompositionError::ForeignTickTopic {
                        stage: stage.to_string(),
                        topic: source.name.to_string(),
                        owner: owner.to_string(),
                    });
                }
            }
            for topic in plan.stage.sources().iter().chain(plan.stage.sinks()) {
                check_name("topic name", topic.name.as_str())?;
                if let Some((role, owner)) = derived.get(topic.name.as_str()) {
                    return Err(CompositionError::ReservedTopicName {
                        topic: topic.name.to_string(),
                        stage: stage.to_string(),
                        role,
                        owner: owner.to_string(),
                    });
                }
                match declared.get(topic.name.as_str()) {
                    Some((first, first_stage)) if first.identity != topic.identity => {
                        let describe = |topic: &TopicRef| {
                            topic.identity.map_or_else(
                                || "no codec".to_string(),
                                |identity| identity.to_string(),
                            )
                        };
                        return Err(CompositionError::ConflictingCodecs {
                            topic: topic.name.to_string(),
                            first: describe(first),
                            first_stage: first_stage.to_string(),
                            second: describe(topic),
                            second_stage: stage.to_string(),
                        });
                    }
                    Some(_) => {}
                    None => {
                        declared.insert(topic.name.as_str(), (topic, stage));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::codec::Utf8;
    use crate::{Json, Step, Topic};

    fn orders() -> Topic<String, i64> {
        Topic::new("orders")
    }

    fn relay(name: &str, source: &Topic<String, i64>) -> Stage {
        Stage::named(name).on(source, |_| Vec::new()).build()
    }

    /// The shape fingerprint tells topologies apart, not logic: the same
    /// stages with other logic have one fingerprint; another stage name,
    /// another source, a tick or state added each give another.
    #[test]
    fn the_shape_fingerprint_changes_with_the_topology_not_the_logic() {
        let one = |stage: Stage| Parsley::named("shop").stage(stage).build().unwrap();
        let base = one(relay("relay", &orders())).shape_fingerprint();
        let other_logic = Stage::named("relay")
            .on(&orders(), |order| {
                vec![orders().send(order.key().cloned(), 1)]
            })
            .build();
        assert_eq!(one(other_logic).shape_fingerprint(), base);
        let payments: Topic<String, i64> = Topic::new("payments");
        let ticking = Stage::named("relay")
            .on(&orders(), |_| Vec::new())
            .ticks(Duration::from_secs(60), |_tick| Vec::new())
            .build();
        let stateful = Stage::named("relay")
            .state(Json, || 0i64)
            .on(&orders(), |count: i64, _order| Step::of(count + 1))
            .build();
        for changed in [
            one(relay("forward", &orders())),
            one(relay("relay", &payments)),
            one(ticking),
            one(stateful),
        ] {
            assert_ne!(changed.shape_fingerprint(), base, "{}", changed.shape());
        }
        assert_eq!(
            fingerprint(""),
            0xcbf2_9ce4_8422_2325,
            "FNV-1a's offset basis"
        );
    }

    /// S5, T2: a topic's role comes from the application, not from its
    /// name: a stateful stage owns its changelog and a ticking one its tick
    /// topic; a source named like a changelog is no changelog.
    #[test]
    fn s5_t2_the_app_names_each_derived_topics_owner() {
        let lookalike: Topic<String, i64> = Topic::new("other-state-changelog");
        let counts = Stage::named("counts")
            .state(Json, || 0i64)
            .on(&orders(), |count: i64, _order| Step::of(count + 1))
            .ticks(Duration::from_secs(60), |_tick| Vec::new())
            .build();
        let app = Parsley::named("shop")
            .stage(counts)
            .stage(relay("relay", &lookalike))
            .build()
            .unwrap();
        let owner = |plan: Option<&StagePlan>| plan.map(|plan| plan.name().to_string());
        assert_eq!(
            owner(app.changelog_owner("shop-counts-state-changelog")),
            Some("counts".into())
        );
        assert_eq!(
            owner(app.tick_topic_owner("shop-counts-ticks")),
            Some("counts".into())
        );
        assert_eq!(owner(app.changelog_owner("shop-counts-ticks")), None);
        assert_eq!(owner(app.changelog_owner("other-state-changelog")), None);
        assert_eq!(
            owner(app.changelog_owner("shop-relay-state-changelog")),
            None
        );
    }

    /// C1: stage names are unique in an application.
    #[test]
    fn c1_duplicate_stage_names_fail() {
        let error = Parsley::named("payments")
            .stage(relay("balances", &orders()))
            .stage(relay("balances", &orders()))
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            CompositionError::DuplicateStage {
                app: "payments".into(),
                stage: "balances".into()
            }
        );
        assert!(error.to_string().starts_with("C1 (docs/RULES.md#c1): "));
    }

    /// C1: one topic name, one key codec and one value codec.
    #[test]
    fn c1_one_topic_two_codecs_fails() {
        let text: Topic<String, String> = Topic::with_codecs("orders", Utf8, Utf8);
        let error = Parsley::named("payments")
            .stage(relay("a", &orders()))
            .stage(Stage::named("b").on(&text, |_| Vec::new()).build())
            .build()
            .unwrap_err();
        assert!(
            matches!(&error, CompositionError::ConflictingCodecs { topic, first_stage, second_stage, .. }
                if topic == "orders" && first_stage == "a" && second_stage == "b"),
            "{error}"
        );
    }

    /// C1: a declared topic may not take the name of a derived one.
    #[test]
    fn c1_declared_topic_may_not_shadow_a_changelog() {
        let shadow: Topic<String, i64> = Topic::new("payments-balances-state-changelog");
        let stateful = Stage::named("balances")
            .state(Json, || 0i64)
            .on(&orders(), |b, _| Step::of(b))
            .build();
        let error = Parsley::named("payments")
            .stage(stateful)
            .stage(relay("other", &shadow))
            .build()
            .unwrap_err();
        assert!(
            matches!(
                error,
                CompositionError::ReservedTopicName {
                    role: "changelog",
                    ..
                }
            ),
            "{error}"
        );
    }

    /// C1, X5: a declared topic may not take the name of a dead-letter topic.
    #[test]
    fn c1_x5_declared_topic_may_not_shadow_a_dead_letter_topic() {
        let shadow: Topic<String, i64> = Topic::new("payments-balances-dlq");
        let opted_in = Stage::named("balances")
            .on(&orders(), |_| Vec::new())
            .dead_letter_queue()
            .build();
        let relay_into = Stage::named("other")
            .on(&orders(), |_| Vec::new())
            .into(&shadow)
            .build();
        let error = Parsley::named("payments")
            .stage(opted_in.clone())
            .stage(relay_into)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                &error,
                CompositionError::ReservedTopicName { role: "dead-letter", owner, .. } if owner == "balances"
            ),
            "{error}"
        );
        // Without the opt-in the name is free.
        let app = Parsley::named("payments")
            .stage(relay("balances", &orders()))
            .stage(relay("other", &shadow))
            .build()
            .unwrap();
        assert_eq!(app.stage("balances").unwrap().dead_letter, None);
        let app = Parsley::named("payments").stage(opted_in).build().unwrap();
        assert_eq!(
            app.stage("balances")
                .unwrap()
                .dead_letter
                .as_ref()
                .map(TopicName::as_str),
            Some("payments-balances-dlq")
        );
    }

    /// C2: a tick topic is consumed only by its own stage.
    #[test]
    fn c2_tick_topic_consumed_elsewhere_fails() {
        let ticking = Stage::named("balances")
            .on(&orders(), |_| Vec::new())
            .ticks(Duration::from_secs(60), |_| Vec::new())
            .build();
        let stolen: Topic<String, i64> = Topic::new("payments-balances-ticks");
        let error = Parsley::named("payments")
            .stage(ticking)
            .stage(relay("thief", &stolen))
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            CompositionError::ForeignTickTopic {
                stage: "thief".into(),
                topic: "payments-balances-ticks".into(),
                owner: "balances".into()
            }
        );
        assert!(error.to_string().starts_with("C2 (docs/RULES.md#c2): "));
    }

    /// T2: no stage may declare a tick topic as a sink.
    #[test]
    fn t2_tick_topic_as_sink_fails() {
        let ticks: Topic<String, i64> = Topic::new("payments-balances-ticks");
        let ticking = Stage::named("balances")
            .on(&orders(), |_| Vec::new())
            .ticks(Duration::from_secs(60), |_| Vec::new())
            .into(&ticks)
            .build();
        let error = Parsley::named("payments")
            .stage(ticking)
            .build()
            .unwrap_err();
        assert!(
            matches!(error, CompositionError::TickTopicAsSink { .. }),
            "{error}"
        );
    }

    /// R1: a re-key's repartition topic is named by the build of the
    /// application its stage goes into, for every clone of the topic the
    /// user holds; before the build it reads as its template.
    #[test]
    fn r1_the_build_names_the_repartition_topic_for_every_clone() {
        let (rekey, by_value) =
            Stage::named("by-value").rekey(&orders(), Utf8, |order| order.value().to_string());
        let captured = by_value.clone();
        assert_eq!(
            by_value.name().as_str(),
            "<application.id>-by-value-repartition"
        );
        let counting = relay("count", &by_value);
        let app = Parsley::named("shop")
            .stage(rekey.clone())
            .stage(counting.clone())
            .build()
            .unwrap();
        assert_eq!(captured.name().as_str(), "shop-by-value-repartition");
        assert_eq!(
            app.stage("count").unwrap().stage.sources()[0].name.as_str(),
            "shop-by-value-repartition"
        );
        assert_eq!(
            by_value.name().derivation().unwrap().app.as_deref(),
            Some("shop")
        );
        // Built again into the same application: the same name.
        let again = Parsley::named("shop").stage(rekey).stage(counting).build();
        assert!(again.is_ok(), "{again:?}");
    }

    /// R1: a stage whose re-key was named by one application's build is
    /// refused by another's, naming both.
    #[test]
    fn r1_a_rekey_built_into_a_second_application_is_refused() {
        let (rekey, _) =
            Stage::named("by-value").rekey(&orders(), Utf8, |order| order.value().to_string());
        Parsley::named("shop").stage(rekey.clone()).build().unwrap();
        let error = Parsley::named("depot").stage(rekey).build().unwrap_err();
        assert_eq!(
            error,
            CompositionError::ForeignRekey {
                app: "depot".into(),
                stage: "by-value".into(),
                topic: "shop-by-value-repartition".into(),
                other: "shop".into(),
            }
        );
        assert!(error.to_string().starts_with("R1 (docs/RULES.md#r1): "));
        // Within a stage (R3), likewise.
        let totals: Topic<String, i64> = Topic::new("totals");
        let by_total = totals.repartition::<String, _>("by-total", Utf8);
        let summing = Stage::named("sum")
            .on(&orders(), |_| Vec::new())
            .into(&totals)
            .rekey_output(&totals, &by_total, |_, total| total.to_string())
            .build();
        Parsley::named("shop")
            .stage(summing.clone())
            .build()
            .unwrap();
        let error = Parsley::named("depot").stage(summing).build().unwrap_err();
        assert!(
            matches!(&error, CompositionError::ForeignRekey { topic, .. } if topic == "shop-by-total-repartition"),
            "{error}"
        );
    }

    /// R1: a stage that reads a repartition topic whose re-key is not in
    /// the application is refused: the topic would never be named or
    /// written.
    #[test]
    fn r1_a_repartition_topic_read_without_its_rekey_is_refused() {
        let (_, by_value) =
            Stage::named("by-value").rekey(&orders(), Utf8, |order| order.value().to_string());
        let error = Parsley::named("shop")
            .stage(relay("count", &by_value))
            .build()
            .unwrap_err();
        assert!(
            matches!(
                &error,
                CompositionError::DerivedTopicOutsideApp { stage, role: "repartition", owner,  .. }
                    if stage == "count" && owner == "by-value"
            ),
            "{error}"
        );
        assert!(error.to_string().starts_with("R1 (docs/RULES.md#r1): "));
    }

    /// R3: a re-key within a stage writes only to a repartition topic made
    /// with `Topic::repartition`, whose values are the output's.
    #[test]
    fn r3_a_rekey_output_into_a_topic_of_the_users_is_refused() {
        let totals: Topic<String, i64> = Topic::new("totals");
        let plain: Topic<String, i64> = Topic::new("not-derived");
        let summing = Stage::named("sum")
            .on(&orders(), |_| Vec::new())
            .into(&totals)
            .rekey_output(&totals, &plain, |_, total| total.to_string())
            .build();
        let error = Parsley::named("shop").stage(summing).build().unwrap_err();
        assert!(
            matches!(&error, CompositionError::ImpossibleOperator { rules: "R3", reason, .. }
                if reason.contains("not a repartition topic")),
            "{error}"
        );
    }

    /// J10: a foreign-key join declared name first derives its topics
    /// from the application it is built into, and is refused by a second.
    #[test]
    fn j10_a_foreign_key_join_is_named_by_its_application_and_no_other() {
        let tiers: Topic<String, String> = Topic::with_codecs("tiers", Utf8, Utf8);
        let labelled: Topic<String, String> = Topic::new("labelled");
        let join = Stage::named("labels")
            .join(crate::Join::foreign_key(
                &orders(),
                &tiers,
                |total: &i64| Some(total.to_string()),
            ))
            .left(|_, total: &i64, tier: Option<&String>| format!("{total} {tier:?}"))
            .into(&labelled)
            .build();
        let subscription = join.subscription.clone();
        assert_eq!(
            subscription.as_str(),
            "<application.id>-labels-subscription"
        );
        let stages = [
            join.subscribe.clone(),
            join.respond.clone(),
            join.resolve.clone(),
        ];
        let app = Parsley::named("shop")
            .stages(stages.clone())
            .build()
            .unwrap();
        assert_eq!(subscription.as_str(), "shop-labels-subscription");
        assert_eq!(
            app.stage("labels-resolve").unwrap().stage.sources()[1]
                .name
                .as_str(),
            "shop-labels-response"
        );
        let error = Parsley::named("depot").stages(stages).build().unwrap_err();
        assert!(
            matches!(&error, CompositionError::ForeignKeyJoinOfAnotherApp { other, stage, .. }
                if other == "shop" && stage == "labels-subscribe"),
            "{error}"
        );
        assert!(error.to_string().starts_with("J10 (docs/RULES.md#j10): "));
    }

    #[test]
    fn declaration_mistakes_are_named() {
        let twice = Stage::named("s")
            .on(&orders(), |_| Vec::new())
            .ticks(Duration::from_secs(1), |_| Vec::new())
            .ticks(Duration::from_secs(2), |_| Vec::new())
            .build();
        assert!(matches!(
            Parsley::named("a").stage(twice).build(),
            Err(CompositionError::TicksDeclaredTwice { .. })
        ));
        let zero = Stage::named("s")
            .on(&orders(), |_| Vec::new())
            .ticks(Duration::ZERO, |_| Vec::new())
            .build();
        assert!(matches!(
            Parsley::named("a").stage(zero).build(),
            Err(CompositionError::ZeroTickInterval { .. })
        ));
        let late_state = Stage::named("s")
            .on(&orders(), |_| Vec::new())
            .state(Json, || 0i64)
            .build();
        assert!(matches!(
            Parsley::named("a").stage(late_state).build(),
            Err(CompositionError::StateAfterLogic { .. })
        ));
        let no_sources = Stage::named("s").build();
        assert!(matches!(
            Parsley::named("a").stage(no_sources).build(),
            Err(CompositionError::NoSources { .. })
        ));
        let error = Parsley::named("pay ments")
            .stage(relay("s", &orders()))
            .build()
            .unwrap_err();
        assert!(
            error.to_string().contains("not a valid Kafka name"),
            "{error}"
        );
    }
}
