//! Foreign-key table–table joins as an operator (J10–J15): Kafka Streams'
//! `KTable.join(KTable other, foreignKeyExtractor, joiner)` and `leftJoin`
//! (KIP-213), made of three stages and two derived topics, causal where
//! Kafka Streams compares value hashes.
//!
//! Each row of the left table (key `K`, value `V`) refers, through the
//! foreign-key extractor, to at most one row of the right table (key `KO`,
//! value `VO`); the output, keyed by `K`, holds each left row joined with
//! the right row it refers to. `Stage::named(name)` then
//! `.join(`[`Join::foreign_key`]`(&left, &right, extractor))`, the joiner
//! (`inner` or `left`) and the output make the three stages; the derived
//! topics are named after the application when it is built:
//!
//! - **subscribe** (`<name>-subscribe`, J12) reads the left table and
//!   writes, to `<application.id>-<name>-subscription` under the foreign
//!   key, a subscription of the left key *as of the left record's offset*
//!   (its version), and an unsubscription from the foreign key it referred
//!   to before.
//! - **respond** (`<name>-respond`, J13) reads the right table and the
//!   subscriptions, co-partitioned by the foreign key, keeps each foreign
//!   key's right value and subscribers, and answers every subscription and
//!   every right update with a response to
//!   `<application.id>-<name>-response`, under the left key.
//! - **resolve** (`<name>-resolve`, J14) reads the left table and the
//!   responses, co-partitioned by the left key, and writes the join's
//!   result for a response whose version is the key's latest left record,
//!   dropping any other as stale. Its gate holds each response until the
//!   task has delivered the left record the response claims (G2, G5), so
//!   "the version is the latest" is exact: no stale result is written.
//!
//! The subscription topic has the right table's partition count and the
//! response topic the left table's (J11): setup creates them, the probe
//! lists them (C4), assembly checks them (C3).
//!
//! ```
//! use parsley::{Join, Json, Parsley, Stage, Topic, Utf8};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Clone, Serialize, Deserialize)]
//! struct Order { customer: String, total: i64 }
//!
//! let orders = Topic::<String, Order>::with_codecs("orders", Utf8, Json);
//! let customers = Topic::<String, String>::with_codecs("customer-names", Utf8, Utf8);
//! let labelled = Topic::<String, String>::with_codecs("labelled-orders", Utf8, Utf8);
//! // Each order with its customer's name, kept up to date as either
//! // changes; an order whose customer is unknown has no label.
//! let labelling = Stage::named("labels")
//!     .join(Join::foreign_key(&orders, &customers, |order: &Order| Some(order.customer.clone())))
//!     .inner(|_id, order: &Order, name: &String| format!("{} for {name}", order.total))
//!     .into(&labelled)
//!     .build();
//! let (subscription, response) = (labelling.subscription.clone(), labelling.response.clone());
//! let app = Parsley::named("shop").stages(labelling).build()?;
//! assert_eq!(subscription.as_str(), "shop-labels-subscription");
//! assert_eq!(response.as_str(), "shop-labels-response");
//! let stages: Vec<&str> = app.stages().iter().map(|plan| plan.name()).collect();
//! assert_eq!(stages, ["labels-subscribe", "labels-respond", "labels-resolve"]);
//! # Ok::<(), parsley::CompositionError>(())
//! ```
//!
//! [`Join::foreign_key`]: super::Join::foreign_key

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::RawBytes;
use crate::operator::{Operator, OperatorProblem, UserLogic};
use crate::stage::logic::{Fallible, StageLogic};
use crate::stage::{
    Declaration, Declaring, OperatorBuilder, ReplayError, Stage, StageDef, StageHead, StageProblem,
};
use crate::topic::{Topic, TopicRef};
use crate::tp::TopicName;

use super::foreign_key_codec::{Response, ResponseCodec, Subscription, SubscriptionCodec};
use super::foreign_key_logic::{
    self, ForeignJoinerFn, ForeignKeyFn, ForeignKeyUserLogic, Topics, UserFns,
};
use super::JoinKind;

/// `<application.id>-<join>-subscription` (J10).
pub fn subscription_topic_name(app: &str, join: &str) -> String {
    format!("{app}-{join}-subscription")
}

/// `<application.id>-<join>-response` (J10).
pub fn response_topic_name(app: &str, join: &str) -> String {
    format!("{app}-{join}-response")
}

/// Which of a foreign-key join's three stages a stage is (J10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ForeignKeyJoinPart {
    /// `<join>-subscribe`: left table to subscriptions (J12).
    Subscribe,
    /// `<join>-respond`: right table and subscriptions to responses (J13).
    Respond,
    /// `<join>-resolve`: left table and responses to results (J14).
    Resolve,
}

impl ForeignKeyJoinPart {
    /// The three, in the order their stages are added.
    pub const ALL: [ForeignKeyJoinPart; 3] = [
        ForeignKeyJoinPart::Subscribe,
        ForeignKeyJoinPart::Respond,
        ForeignKeyJoinPart::Resolve,
    ];

    /// The stage's name for the join named `join`: `<join>-subscribe`,
    /// `<join>-respond` or `<join>-resolve`.
    pub fn stage_name(self, join: &str) -> String {
        let part = match self {
            ForeignKeyJoinPart::Subscribe => "subscribe",
            ForeignKeyJoinPart::Respond => "respond",
            ForeignKeyJoinPart::Resolve => "resolve",
        };
        format!("{join}-{part}")
    }
}

/// A foreign-key join's declaration, as each of its stages holds it
/// ([`StageHooks::operator`](crate::StageHooks::operator)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignKeyJoinDecl {
    /// The join's name.
    pub join: String,
    /// Which of its stages this is.
    pub part: ForeignKeyJoinPart,
    /// The left table.
    pub left: TopicName,
    /// The right table.
    pub right: TopicName,
    /// The derived subscription topic (J10, J11).
    pub subscription: TopicName,
    /// The derived response topic (J10, J11).
    pub response: TopicName,
    /// The output topic, once declared.
    pub output: Option<TopicName>,
    /// Inner or left.
    pub kind: JoinKind,
    /// The user's extractor and joiner with the join's codecs, for
    /// [`ForeignKeyJoinDecl::extracted`] and [`ForeignKeyJoinDecl::joined`].
    pub(crate) user: UserLogic<dyn ForeignKeyUserLogic>,
}

impl ForeignKeyJoinDecl {
    /// The foreign key (the right table's key bytes) the left value
    /// `left` (its bytes) refers to, `None` when it refers to none: the
    /// user's extractor with the tables' codecs. What a checker that keeps
    /// the left table by itself decides a left update's result with (I13).
    pub fn extracted(&self, left: &[u8]) -> Result<Option<Bytes>, ReplayError> {
        self.user.extracted(left).map_err(ReplayError::delivery)
    }

    /// The result value bytes for left key `key` with left value `left`
    /// and right value `right` (`None`: no right row), `None` when the
    /// user's joiner gives none for those sides: the user's joiner with the
    /// tables' and the output's codecs. What a checker that keeps both
    /// sides by itself compares a delivery's output with (I13).
    pub fn joined(
        &self,
        key: &[u8],
        left: &[u8],
        right: Option<&[u8]>,
    ) -> Result<Option<Bytes>, ReplayError> {
        self.user
            .joined(key, left, right)
            .map_err(ReplayError::delivery)
    }
}

impl Operator for ForeignKeyJoinDecl {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// J10's declaration mistakes.
fn problem(reason: &'static str) -> StageProblem {
    StageProblem::Operator(OperatorProblem {
        rules: "J10",
        anchor: "j10",
        operator: "foreign-key join stage",
        reason,
    })
}

/// A foreign-key join's two tables and extractor
/// ([`Join::foreign_key`](super::Join::foreign_key)), before its joiner.
pub struct ForeignKeyJoin<K, V, KO, VO> {
    left: Topic<K, V>,
    right: Topic<KO, VO>,
    extract: ForeignKeyFn<V, KO>,
}

impl<K, V, KO, VO> super::sealed::Joining for ForeignKeyJoin<K, V, KO, VO> {}

impl<K, V, KO, VO> ForeignKeyJoin<K, V, KO, VO>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    KO: Send + Sync + 'static,
    VO: Send + Sync + 'static,
{
    pub(crate) fn new<R>(
        left: &Topic<K, V>,
        right: &Topic<KO, VO>,
        extract: impl Fn(&V) -> R + Send + Sync + 'static,
    ) -> Self
    where
        R: Fallible<Option<KO>>,
    {
        ForeignKeyJoin {
            left: left.clone(),
            right: right.clone(),
            extract: Arc::new(move |value| extract(value).into_result()),
        }
    }
}

impl<K, V, KO, VO> Declaring<ForeignKeyJoin<K, V, KO, VO>>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    KO: Send + Sync + 'static,
    VO: Send + Sync + 'static,
{
    /// An inner join (`KTable.join`): a left row whose foreign key has a
    /// right row is joined by `joiner` (which may return `O` or
    /// `Result<O, E>`; an error or a panic refuses the record, X5); a key
    /// that loses its result gets a tombstone.
    pub fn inner<O, F>(
        self,
        joiner: impl Fn(&K, &V, &VO) -> F + Send + Sync + 'static,
    ) -> OperatorBuilder<ForeignKeyJoined<K, V, KO, VO, O>>
    where
        O: 'static,
        F: Fallible<O>,
    {
        self.with_joiner(JoinKind::Inner, super::inner_joiner(joiner))
    }

    /// A left join (`KTable.leftJoin`): every left row is joined by
    /// `joiner`, with its foreign key's right row or `None` (no foreign
    /// key, or no right row for it); a deleted left row gets a tombstone.
    pub fn left<O, F>(
        self,
        joiner: impl Fn(&K, &V, Option<&VO>) -> F + Send + Sync + 'static,
    ) -> OperatorBuilder<ForeignKeyJoined<K, V, KO, VO, O>>
    where
        O: 'static,
        F: Fallible<O>,
    {
        self.with_joiner(JoinKind::Left, super::left_joiner(joiner))
    }

    fn with_joiner<O: 'static>(
        self,
        kind: JoinKind,
        joiner: ForeignJoinerFn<K, V, VO, O>,
    ) -> OperatorBuilder<ForeignKeyJoined<K, V, KO, VO, O>> {
        let Declaring { head, spec } = self;
        Declaring { head, spec: () }.with(ForeignKeyJoined {
            join: spec,
            kind,
            joiner,
        })
    }
}

/// A foreign-key join's logic, as [`OperatorBuilder`] declares it; see
/// [`ForeignKeyJoin`] and docs/RULES.md#j10. Its output is keyed by the
/// left table's key; its dead-letter queue is each of its three stages'
/// own (`<application.id>-<stage>-dlq`).
pub struct ForeignKeyJoined<K, V, KO, VO, O> {
    join: ForeignKeyJoin<K, V, KO, VO>,
    kind: JoinKind,
    joiner: ForeignJoinerFn<K, V, VO, O>,
}

/// A foreign-key join's three stages, to add to one application
/// (`AppBuilder::stages` takes them as they are), and its derived topics
/// (J10), named when that application is built.
pub struct ForeignKeyJoinStages {
    /// `<join>-subscribe` (J12).
    pub subscribe: Stage,
    /// `<join>-respond` (J13).
    pub respond: Stage,
    /// `<join>-resolve` (J14).
    pub resolve: Stage,
    /// `<application.id>-<join>-subscription`, once the application is
    /// built.
    pub subscription: TopicName,
    /// `<application.id>-<join>-response`, once the application is built.
    pub response: TopicName,
}

impl IntoIterator for ForeignKeyJoinStages {
    type Item = Stage;
    type IntoIter = std::array::IntoIter<Stage, 3>;

    fn into_iter(self) -> Self::IntoIter {
        [self.subscribe, self.respond, self.resolve].into_iter()
    }
}

impl<K, V, KO, VO, O> Declaration for ForeignKeyJoined<K, V, KO, VO, O>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    KO: Send + Sync + 'static,
    VO: Send + Sync + 'static,
    O: 'static,
{
    type Output = Topic<K, O>;
    type Built = ForeignKeyJoinStages;

    /// The three stages and the derived topics. A missing output, or an
    /// output that is one of the join's tables, is reported by the
    /// application's `build`, with J10.
    fn declare(self, head: StageHead, output: Option<Topic<K, O>>) -> ForeignKeyJoinStages {
        let join = self.join;
        let name = head.name.clone();
        // Named after the application when it is built (J10).
        let subscription: Topic<Bytes, Subscription> = Topic::with_codecs(
            TopicName::derived(&name, "subscription"),
            RawBytes,
            SubscriptionCodec,
        );
        let response: Topic<Bytes, Response> = Topic::with_codecs(
            TopicName::derived(&name, "response"),
            RawBytes,
            ResponseCodec,
        );
        let mut problems = head.problems;
        match &output {
            None => problems.push(problem("no output topic (declare one with `into`)")),
            Some(output)
                if output.name() == join.left.name() || output.name() == join.right.name() =>
            {
                problems.push(problem(
                    "one of its tables as its output (its results would feed back into it)",
                ))
            }
            Some(_) => {}
        }
        let topics = Topics {
            left: join.left.clone(),
            right: join.right.clone(),
            subscription: subscription.clone(),
            response: response.clone(),
            output: output.clone(),
        };
        let user: UserLogic<dyn ForeignKeyUserLogic> = UserLogic(Arc::new(UserFns {
            topics: topics.clone(),
            extract: Arc::clone(&join.extract),
            joiner: Arc::clone(&self.joiner),
        }));
        let decl = |part| ForeignKeyJoinDecl {
            join: name.clone(),
            part,
            left: join.left.name().clone(),
            right: join.right.name().clone(),
            subscription: subscription.name().clone(),
            response: response.name().clone(),
            output: output.as_ref().map(|output| output.name().clone()),
            kind: self.kind,
            user: user.clone(),
        };
        let stage = |part: ForeignKeyJoinPart,
                     sources: Vec<TopicRef>,
                     sinks: Vec<TopicRef>,
                     logic: Arc<dyn StageLogic>| Stage {
            def: Arc::new(StageDef {
                dead_letter: head.dead_letter,
                operators: vec![Arc::new(decl(part))],
                problems: problems.clone(),
                ..StageDef::built_in(part.stage_name(&name), sources, sinks, true, logic)
            }),
        };
        let subscribe = stage(
            ForeignKeyJoinPart::Subscribe,
            vec![TopicRef::from(&join.left)],
            vec![TopicRef::from(&subscription)],
            Arc::new(foreign_key_logic::subscribe(
                topics.clone(),
                Arc::clone(&join.extract),
            )),
        );
        let respond = stage(
            ForeignKeyJoinPart::Respond,
            vec![TopicRef::from(&join.right), TopicRef::from(&subscription)],
            vec![TopicRef::from(&response)],
            Arc::new(foreign_key_logic::respond(topics.clone())),
        );
        let resolve = stage(
            ForeignKeyJoinPart::Resolve,
            vec![TopicRef::from(&join.left), TopicRef::from(&response)],
            output.iter().map(TopicRef::from).collect(),
            Arc::new(foreign_key_logic::resolve(
                topics,
                Arc::clone(&join.extract),
                self.joiner,
            )),
        );
        // A re-key of the join's output is the resolve stage's, which
        // writes it (R3).
        let resolve = crate::rekey::apply(head.rekeys, resolve);
        ForeignKeyJoinStages {
            subscribe,
            respond,
            resolve,
            subscription: subscription.name().clone(),
            response: response.name().clone(),
        }
    }
}
