//! The foreign-key join's three built-in folds (J12–J14), each a typed
//! fold over its stage's key slots, so every driver, the replay and the
//! checker run the same join.

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::{CodecError, RawBytes};
use crate::emission::Step;
use crate::mutation::{self, Mutation};
use crate::record::ConsumedRecord;
use crate::stage::logic::{guarded, DeliveryFailure, SourceFn, StateDecl, TypedLogic};
use crate::topic::{RecordPart, Topic};
use crate::tp::Tp;

use super::foreign_key_codec::{
    Current, CurrentCodec, Foreign, ForeignCodec, Kept, Response, Subscription,
};

/// The foreign-key extractor: the right table's key a left value refers
/// to, `None` when it refers to none; an error refuses the record (X5).
pub(crate) type ForeignKeyFn<V, KO> = Arc<dyn Fn(&V) -> Result<Option<KO>, String> + Send + Sync>;

/// The join's topics, as every stage of it sees them.
pub(crate) struct Topics<K, V, KO, VO, O> {
    pub left: Topic<K, V>,
    pub right: Topic<KO, VO>,
    pub subscription: Topic<Bytes, Subscription>,
    pub response: Topic<Bytes, Response>,
    pub output: Option<Topic<K, O>>,
}

impl<K, V, KO, VO, O> Clone for Topics<K, V, KO, VO, O> {
    fn clone(&self) -> Self {
        Topics {
            left: self.left.clone(),
            right: self.right.clone(),
            subscription: self.subscription.clone(),
            response: self.response.clone(),
            output: self.output.clone(),
        }
    }
}

fn value_failure(error: CodecError) -> DeliveryFailure {
    DeliveryFailure::Codec {
        part: RecordPart::Value,
        error,
    }
}

/// The value of a record of one of the join's derived topics, decoded by
/// the topic's codec; a null value is refused like bytes the codec refuses
/// (J15): every subscription and response has one.
fn derived_value<T: 'static>(
    topic: &Topic<Bytes, T>,
    consumed: &ConsumedRecord,
    record: &'static str,
) -> Result<T, DeliveryFailure> {
    match &consumed.data.value {
        Some(bytes) => topic.value_codec().decode(bytes),
        None => Err(CodecError {
            codec: record,
            direction: crate::codec::Direction::Decode,
            type_name: record,
            message: format!("the value is null; a {record} record always has one"),
        }),
    }
    .map_err(value_failure)
}

/// J15: every record the join reads is keyed.
fn key_of<'a>(
    consumed: &'a ConsumedRecord,
    tp: &Tp,
    what: &str,
) -> Result<&'a Bytes, DeliveryFailure> {
    consumed.data.key.as_ref().ok_or_else(|| {
        DeliveryFailure::Logic(format!(
            "J15 (docs/RULES.md#j15): {what} record {tp}@{} has no key, and a foreign-key join keeps its state by key",
            consumed.offset
        ))
    })
}

/// A left record's key, decoded by the left table's key codec. The
/// subscribe and resolve stages both decode it first, so a key the codec
/// refuses is refused as the left record's (J15) by both alike, and is
/// never subscribed: no response names it.
fn left_key<K: 'static, V: 'static>(left: &Topic<K, V>, key: &Bytes) -> Result<K, DeliveryFailure> {
    left.key_codec()
        .decode(key)
        .map_err(|error| DeliveryFailure::Codec {
            part: RecordPart::Key,
            error,
        })
}

/// The foreign key of a left value, as the right table's key bytes (J12).
fn foreign_key<V, KO: 'static, VO: 'static>(
    right: &Topic<KO, VO>,
    extract: &ForeignKeyFn<V, KO>,
    value: &V,
) -> Result<Option<Bytes>, DeliveryFailure> {
    let Some(foreign) = guarded(|| extract(value))? else {
        return Ok(None);
    };
    right
        .key_codec()
        .encode(&foreign)
        .map(Some)
        .map_err(|error| {
            DeliveryFailure::Logic(format!(
            "J12 (docs/RULES.md#j12): the right table's key codec refuses the foreign key: {error}"
        ))
        })
}

/// J12: the subscribe stage's fold. Its slot per left key: the foreign key
/// it last subscribed to.
pub(crate) fn subscribe<K, V, KO, VO, O>(
    topics: Topics<K, V, KO, VO, O>,
    extract: ForeignKeyFn<V, KO>,
) -> TypedLogic<Option<Bytes>>
where
    K: 'static,
    V: 'static,
    KO: 'static,
    VO: 'static,
    O: 'static,
{
    let source: SourceFn<Option<Bytes>> = Arc::new(move |subscribed, tp, consumed| {
        let key = key_of(consumed, tp, "left table")?;
        left_key(&topics.left, key)?;
        let foreign = match &consumed.data.value {
            None => None,
            Some(bytes) => {
                let value = topics
                    .left
                    .value_codec()
                    .decode(bytes)
                    .map_err(value_failure)?;
                foreign_key(&topics.right, &extract, &value)?
            }
        };
        let mut emissions = Vec::new();
        // A planted bug keeps the subscription the key leaves.
        let forgets = mutation::active(Mutation::ForeignKeySubscribeKeepsOld);
        if let Some(previous) =
            subscribed.filter(|previous| Some(previous) != foreign.as_ref() && !forgets)
        {
            let unsubscribe = Subscription::Unsubscribe { key: key.clone() };
            emissions.push(topics.subscription.send(previous, unsubscribe));
        }
        if let Some(foreign) = &foreign {
            // The version is the left record's offset: the resolve stage's
            // task reads the same record, and its gate (G2) holds every
            // response until it has (J14).
            let subscribe = Subscription::Subscribe {
                key: key.clone(),
                version: consumed.offset,
                partition: tp.partition,
            };
            emissions.push(topics.subscription.send(foreign.clone(), subscribe));
        }
        Ok(Step {
            state: foreign.map(Some),
            emissions,
        })
    });
    TypedLogic {
        state: Some(StateDecl {
            codec: Arc::new(Kept(RawBytes)),
            init: Arc::new(|| None),
        }),
        sources: vec![source],
        tick: None,
    }
}

/// J13: the respond stage's fold. Its slot per foreign key: the right
/// value and the subscribed left keys. Source 0 is the right table, source
/// 1 the subscription topic.
pub(crate) fn respond<K, V, KO, VO, O>(topics: Topics<K, V, KO, VO, O>) -> TypedLogic<Foreign>
where
    K: 'static,
    V: 'static,
    KO: 'static,
    VO: 'static,
    O: 'static,
{
    let kept = |foreign: Foreign, emissions| Step {
        state: (foreign.right.is_some() || !foreign.subscribers.is_empty()).then_some(foreign),
        emissions,
    };
    let right_topics = topics.clone();
    let on_right: SourceFn<Foreign> = Arc::new(move |mut foreign: Foreign, tp, consumed| {
        key_of(consumed, tp, "right table")?;
        let value = consumed.data.value.clone();
        if let Some(bytes) = &value {
            // A value its codec refuses is refused here, not when joined.
            right_topics
                .right
                .value_codec()
                .decode(bytes)
                .map_err(value_failure)?;
        } else if foreign.right.is_none() {
            // A tombstone for a key without a value changes nothing.
            return Ok(kept(foreign, Vec::new()));
        }
        let previous = std::mem::replace(&mut foreign.right, value);
        // A planted bug answers with the value the record replaced.
        let right = match mutation::active(Mutation::ForeignKeyRespondSendsPreviousRight) {
            true => previous,
            false => foreign.right.clone(),
        };
        let emissions = foreign
            .subscribers
            .iter()
            .map(|(key, &(version, partition))| {
                let response = Response {
                    version,
                    partition,
                    right: right.clone(),
                };
                right_topics.response.send(key.clone(), response)
            })
            .collect();
        Ok(kept(foreign, emissions))
    });
    let on_subscription: SourceFn<Foreign> = Arc::new(move |mut foreign: Foreign, tp, consumed| {
        key_of(consumed, tp, "subscription")?;
        let subscription =
            derived_value(&topics.subscription, consumed, "foreign-key subscription")?;
        let mut emissions = Vec::new();
        match subscription {
            Subscription::Subscribe {
                key,
                version,
                partition,
            } => {
                foreign
                    .subscribers
                    .insert(key.clone(), (version, partition));
                let response = Response {
                    version,
                    partition,
                    right: foreign.right.clone(),
                };
                emissions.push(topics.response.send(key, response));
            }
            Subscription::Unsubscribe { key } => {
                foreign.subscribers.remove(&key);
            }
        }
        Ok(kept(foreign, emissions))
    });
    TypedLogic {
        state: Some(StateDecl {
            codec: Arc::new(ForeignCodec),
            init: Arc::new(Foreign::default),
        }),
        sources: vec![on_right, on_subscription],
        tick: None,
    }
}

/// The joiner in its two-sided form ([`super::SidedJoinerFn`]): `None` when
/// the key has no result with these sides.
pub(crate) type ForeignJoinerFn<K, V, VO, O> = super::SidedJoinerFn<K, V, VO, O>;

/// The resolve stage's joining: the key's result with its left value and
/// this right value, or `None` when it has none (J14).
struct Resolver<K, V, KO, VO, O> {
    topics: Topics<K, V, KO, VO, O>,
    joiner: ForeignJoinerFn<K, V, VO, O>,
}

impl<K, V, KO, VO, O> Resolver<K, V, KO, VO, O>
where
    K: 'static,
    V: 'static,
    KO: 'static,
    VO: 'static,
    O: 'static,
{
    fn output(&self) -> &Topic<K, O> {
        self.topics
            .output
            .as_ref()
            .expect("the build refuses a join without an output topic")
    }

    fn key(&self, key: &Bytes) -> Result<K, DeliveryFailure> {
        left_key(&self.topics.left, key)
    }

    /// J14: what `key` writes when its left value `left` is joined with
    /// `right` (`None`: no right value), given whether it `had` a result:
    /// the joiner's result, a tombstone when the join has none and the key
    /// had one, or nothing. Returns it and whether the key has a result
    /// now.
    fn write(
        &self,
        key: &Bytes,
        left: &Bytes,
        right: Option<&Bytes>,
        had: bool,
    ) -> Result<(Option<crate::Emission>, bool), DeliveryFailure> {
        let decoded_key = self.key(key)?;
        let left = self
            .topics
            .left
            .value_codec()
            .decode(left)
            .map_err(value_failure)?;
        let right = right
            .map(|bytes| self.topics.right.value_codec().decode(bytes))
            .transpose()
            .map_err(value_failure)?;
        let joined =
            guarded(|| (self.joiner)(&decoded_key, Some(&left), right.as_ref()).transpose())?;
        Ok(match joined {
            Some(joined) => (Some(self.output().send(decoded_key, joined)), true),
            None if had => (Some(self.output().tombstone(decoded_key)), false),
            None => (None, false),
        })
    }
}

/// The user's foreign-key extractor and joiner with the join's codecs,
/// for the harness's oracle ([`ForeignKeyJoinDecl::extracted`] and
/// [`ForeignKeyJoinDecl::joined`]): decoding, the user's function and
/// encoding, and nothing of the join's own code.
///
/// [`ForeignKeyJoinDecl::extracted`]: super::ForeignKeyJoinDecl::extracted
/// [`ForeignKeyJoinDecl::joined`]: super::ForeignKeyJoinDecl::joined
pub(crate) trait ForeignKeyUserLogic: Send + Sync {
    fn extracted(&self, left: &[u8]) -> Result<Option<Bytes>, DeliveryFailure>;
    fn joined(
        &self,
        key: &[u8],
        left: &[u8],
        right: Option<&[u8]>,
    ) -> Result<Option<Bytes>, DeliveryFailure>;
}

/// [`ForeignKeyUserLogic`] for a join's types.
pub(crate) struct UserFns<K, V, KO, VO, O> {
    pub topics: Topics<K, V, KO, VO, O>,
    pub extract: ForeignKeyFn<V, KO>,
    pub joiner: ForeignJoinerFn<K, V, VO, O>,
}

impl<K, V, KO, VO, O> ForeignKeyUserLogic for UserFns<K, V, KO, VO, O>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    KO: Send + Sync + 'static,
    VO: Send + Sync + 'static,
    O: 'static,
{
    fn extracted(&self, left: &[u8]) -> Result<Option<Bytes>, DeliveryFailure> {
        let left = self
            .topics
            .left
            .value_codec()
            .decode(left)
            .map_err(value_failure)?;
        match guarded(|| (self.extract)(&left))? {
            None => Ok(None),
            Some(foreign) => self
                .topics
                .right
                .key_codec()
                .encode(&foreign)
                .map(Some)
                .map_err(|error| DeliveryFailure::Codec {
                    part: RecordPart::Key,
                    error,
                }),
        }
    }

    fn joined(
        &self,
        key: &[u8],
        left: &[u8],
        right: Option<&[u8]>,
    ) -> Result<Option<Bytes>, DeliveryFailure> {
        let key =
            self.topics
                .left
                .key_codec()
                .decode(key)
                .map_err(|error| DeliveryFailure::Codec {
                    part: RecordPart::Key,
                    error,
                })?;
        let left = self
            .topics
            .left
            .value_codec()
            .decode(left)
            .map_err(value_failure)?;
        let right = right
            .map(|bytes| self.topics.right.value_codec().decode(bytes))
            .transpose()
            .map_err(value_failure)?;
        let Some(joined) =
            guarded(|| (self.joiner)(&key, Some(&left), right.as_ref()).transpose())?
        else {
            return Ok(None);
        };
        let Some(output) = &self.topics.output else {
            return Ok(None);
        };
        match output.send(key, joined).encoded() {
            Ok((_, value)) => Ok(value.cloned()),
            Err(error) => Err(DeliveryFailure::Logic(format!(
                "the output topic's codec refuses the join's result: {error}"
            ))),
        }
    }
}

/// J14: the resolve stage's fold. Its slot per left key: the latest left
/// record's offset (the version) and value, and whether the key has a
/// result. Source 0 is the left table, source 1 the response topic.
pub(crate) fn resolve<K, V, KO, VO, O>(
    topics: Topics<K, V, KO, VO, O>,
    extract: ForeignKeyFn<V, KO>,
    joiner: ForeignJoinerFn<K, V, VO, O>,
) -> TypedLogic<Option<Current>>
where
    K: 'static,
    V: 'static,
    KO: 'static,
    VO: 'static,
    O: 'static,
{
    let resolver = Arc::new(Resolver { topics, joiner });
    let left_resolver = Arc::clone(&resolver);
    let on_left: SourceFn<Option<Current>> = Arc::new(move |current, tp, consumed| {
        let key = key_of(consumed, tp, "left table")?;
        left_resolver.key(key)?;
        let had = current.as_ref().is_some_and(|current| current.joined);
        let Some(bytes) = &consumed.data.value else {
            // A deleted left row deletes the key's result, if it had one.
            let mut emissions = Vec::new();
            if had {
                emissions.push(left_resolver.output().tombstone(left_resolver.key(key)?));
            }
            return Ok(Step {
                state: None,
                emissions,
            });
        };
        let value = left_resolver
            .topics
            .left
            .value_codec()
            .decode(bytes)
            .map_err(value_failure)?;
        let refers = foreign_key(&left_resolver.topics.right, &extract, &value)?.is_some();
        // Planted bug (I13): the key's first left value kept, not this one.
        let left = match current {
            Some(current) if mutation::active(Mutation::ForeignKeyJoinResolvesFirstLeft) => {
                current.left
            }
            _ => bytes.clone(),
        };
        let mut emissions = Vec::new();
        let mut joined = had;
        if !refers {
            // No foreign key: no response will come, so the key's result
            // is decided here, with no right value (J14).
            let (emission, now) = left_resolver.write(key, &left, None, had)?;
            emissions.extend(emission);
            joined = now;
        }
        Ok(Step {
            state: Some(Some(Current {
                version: consumed.offset,
                joined,
                left,
            })),
            emissions,
        })
    });
    let on_response: SourceFn<Option<Current>> = Arc::new(move |current, tp, consumed| {
        let key = key_of(consumed, tp, "response")?;
        // The subscribe stage refuses a left key its codec refuses (J15),
        // so only another writer of the response topic can name one.
        if let Err(error) = resolver.topics.left.key_codec().decode(key) {
            return Err(DeliveryFailure::Logic(format!(
                "J15 (docs/RULES.md#j15): response {tp}@{} names left key {}, which the left table's key codec refuses: {error}",
                consumed.offset,
                crate::text::bytes_for_humans(key)
            )));
        }
        let response = derived_value(&resolver.topics.response, consumed, "foreign-key response")?;
        // J11: the response was routed by Kafka's default partitioner on
        // the left key; another partition than its left record's means the
        // left table was written with another partitioner, and this task
        // never delivered the key: refused, not dropped as stale.
        if response.partition != tp.partition {
            return Err(DeliveryFailure::Logic(format!(
                "J11 (docs/RULES.md#j11): response {tp}@{} answers left key {} of partition {} of the left table {}, but Kafka's default partitioner put it on partition {}: the left table is not partitioned by Kafka's default partitioner on its key bytes, which a foreign-key join needs (write it with that partitioner, or re-key it first)",
                consumed.offset,
                crate::text::bytes_for_humans(key),
                response.partition,
                resolver.topics.left.name(),
                tp.partition
            )));
        }
        let Some(mut current) = current else {
            // The left row was deleted after the subscription: stale.
            return Ok(Step {
                state: None,
                emissions: Vec::new(),
            });
        };
        // The gate held this response until the task delivered the left
        // record it answers (J14, G2), so a version other than the current
        // one is an older left record's: stale, dropped.
        if current.version != response.version
            && !mutation::active(Mutation::ForeignKeyJoinKeepsStaleResponse)
        {
            return Ok(Step::of(Some(current)));
        }
        let (emission, joined) =
            resolver.write(key, &current.left, response.right.as_ref(), current.joined)?;
        current.joined = joined;
        Ok(Step {
            state: Some(Some(current)),
            emissions: emission.into_iter().collect(),
        })
    });
    TypedLogic {
        state: Some(StateDecl {
            codec: Arc::new(Kept(CurrentCodec)),
            init: Arc::new(|| None),
        }),
        sources: vec![on_left, on_response],
        tick: None,
    }
}
