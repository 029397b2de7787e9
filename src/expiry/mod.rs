//! Expiring state as an operator (E1–E3): per-key state with a time to
//! live, by event time or by the wall clock, expired without a timer
//! round-trip. Flink's `StateTtlConfig`; in Kafka Streams, a window store's
//! retention or a punctuator that deletes, written by hand.
//!
//! An expiring fold is a stage ([`OperatorBuilder::build`] returns a
//! [`Stage`]) that reads one source topic and keeps, in each key's slot, the
//! fold's state and the time it expires:
//!
//! - **Time to live (E1).** A key's state expires `ttl` after the timestamp
//!   of the record that last wrote it ([`Expiring::after`]), or that first
//!   wrote it since it was last absent ([`Expiring::from_first_write`]: the
//!   deduplication window). A fold that returns [`Step::delete`] deletes it
//!   at once. A record without a key, or with a negative timestamp, is
//!   refused with E1.
//! - **Expiry (E2).** Each task keeps an expiry frontier: its stream time
//!   (the highest record timestamp it delivered), or, with
//!   [`Expire::WallClock`], the time of its last tick. A key's state expires
//!   when the frontier reaches its expiry time, and not a millisecond
//!   earlier: the delivery that moves the frontier there deletes it (a
//!   tombstone on the changelog, in that delivery's transaction), whichever
//!   key it delivers. A record that comes after sees `init()` again.
//! - **A record's own delivery (E3).** The record's timestamp first moves
//!   the frontier (stream time), then what is due expires — the record's
//!   own key included — then the fold runs on the key's live state or
//!   `init()`. A record whose state would expire at or before the frontier
//!   already (a record `ttl` or more behind stream time) leaves none.
//!
//! The state and the clock are state (S5): a restarted or moved task
//! restores its live keys and its frontier, so a crash neither revives an
//! expired key nor forgets a live one (X1).
//!
//! ```
//! use std::time::Duration;
//! use parsley::Expiring;
//! use parsley::{Parsley, Stage, Step, Topic, Json, Utf8, I64};
//!
//! let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
//! let unique = Topic::<String, i64>::with_codecs("unique-orders", Utf8, I64);
//! let out = unique.clone();
//! // Each order id once within ten minutes of its first sighting.
//! let dedupe = Stage::named("dedupe")
//!     .expiring(Expiring::after(Duration::from_secs(600)).from_first_write())
//!     .fold(&orders, Json, || false, move |seen: bool, order| match seen {
//!         true => Step::of(true),
//!         false => Step::of(true).emit(out.send(order.key().cloned(), *order.value())),
//!     })
//!     .into(&unique)
//!     .build();
//! let app = Parsley::named("shop").stage(dedupe).build()?;
//! assert_eq!(app.stage("dedupe").unwrap().stage.hooks().operator::<parsley::ExpiryDecl>().unwrap().ttl, Duration::from_secs(600));
//! # Ok::<(), parsley::CompositionError>(())
//! ```

mod logic;
mod state;

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

use crate::codec::Codec;
use crate::emission::Emission;
use crate::emission::{Record, Step};
use crate::operator::{Operator, OperatorProblem, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::logic::Fallible;
use crate::stage::{
    Declaration, Declaring, OperatorBuilder, OperatorParts, ReplayError, Stage, StageBuilder,
    StageHead, StageProblem, Stateless, TickDecl, TickKind,
};
use crate::topic::{Topic, TopicRef};
use crate::tp::{TopicName, Tp};

use logic::ExpiryLogic;
use state::ExpirySlotCodec;

/// From which write a key's time to live runs (E1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Since {
    /// Every write starts it again (Flink's `OnCreateAndWrite`).
    #[default]
    LastWrite,
    /// Only the write that creates the state starts it: rewrites keep the
    /// expiry time (a deduplication window).
    FirstWrite,
}

/// What moves the expiry frontier (E2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expire {
    /// The task's stream time: the highest record timestamp it delivered.
    #[default]
    StreamTime,
    /// The wall clock, by ticks every `resolution`: state expires at most
    /// one resolution (plus a commit interval) late, records or not.
    WallClock {
        /// The tick interval (T3).
        resolution: Duration,
    },
}

/// An expiring fold's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiryDecl {
    /// The source topic.
    pub source: TopicName,
    /// The time to live.
    pub ttl: Duration,
    /// From which write it runs.
    pub since: Since,
    /// What moves the frontier.
    pub expire: Expire,
    /// The user's fold with the topics' codecs, for
    /// [`ExpiryDecl::initial`] and [`ExpiryDecl::fold`].
    pub(crate) fold: UserLogic<dyn logic::ExpiringFold>,
}

impl Operator for ExpiryDecl {
    /// A record may expire other keys (E2).
    fn record_reads_every_slot(&self) -> bool {
        true
    }

    /// A tick may expire any key (E2).
    fn tick_reads_every_slot(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The user's logic of an expiring fold, for a checker that decides
/// expiry by itself (I14): the user's initial state and fold over states
/// encoded with the state's codec; none of the operator's expiry
/// arithmetic or slots.
impl ExpiryDecl {
    /// The initial state, encoded.
    pub fn initial(&self) -> Result<Bytes, ReplayError> {
        self.fold.initial().map_err(ReplayError::delivery)
    }

    /// `record`, read from `tp`, folded into `state` (encoded) by the
    /// user's fold: the state after it (`None`: the fold deleted it) and
    /// its emissions.
    pub fn fold(
        &self,
        state: &[u8],
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<(Option<Bytes>, Vec<Emission>), ReplayError> {
        self.fold
            .fold(state, tp, record)
            .map_err(ReplayError::delivery)
    }
}

/// Expiring state being declared: its time to live, before the fold.
#[derive(Clone, Copy, Debug)]
pub struct Expiring {
    ttl: Duration,
    since: Since,
    expire: Expire,
}

impl Expiring {
    /// State that expires `ttl` after the record that last wrote it, by
    /// stream time.
    pub fn after(ttl: Duration) -> Expiring {
        Expiring {
            ttl,
            since: Since::LastWrite,
            expire: Expire::StreamTime,
        }
    }

    /// The time to live runs from the write that created the state (E1).
    pub fn from_first_write(mut self) -> Expiring {
        self.since = Since::FirstWrite;
        self
    }

    /// What moves the frontier (E2); stream time by default.
    pub fn expire_by(mut self, expire: Expire) -> Expiring {
        self.expire = expire;
        self
    }
}

impl StageBuilder<Stateless> {
    /// An expiring fold's stage: state per key that expires as
    /// `expiring` says; its `fold` follows.
    pub fn expiring(self, expiring: Expiring) -> Declaring<Expiring> {
        self.choose(expiring)
    }
}

impl Declaring<Expiring> {
    /// The fold: each key's records of `source` folded from `init()` with
    /// `fold` (which may return `Step<S>` or `Result<Step<S>, E>`; an
    /// error or a panic refuses the record, X5), the state kept with
    /// `codec` until it expires.
    pub fn fold<K, V, S, C, R>(
        self,
        source: &Topic<K, V>,
        codec: C,
        init: impl Fn() -> S + Send + Sync + 'static,
        fold: impl Fn(S, &Record<K, V>) -> R + Send + Sync + 'static,
    ) -> OperatorBuilder<ExpiringFold<K, V, S>>
    where
        K: Send + Sync + 'static,
        V: Send + Sync + 'static,
        S: Clone + Send + Sync + 'static,
        C: Codec<S>,
        R: Fallible<Step<S>>,
    {
        let expiring = self.spec;
        self.with(ExpiringFold {
            expiring,
            source: source.clone(),
            codec: Arc::new(codec),
            init: Arc::new(init),
            fold: Arc::new(move |state, record| fold(state, record).into_result()),
        })
    }
}

/// An expiring fold's logic, as [`OperatorBuilder`] declares it (the rules
/// it keeps are in `docs/RULES.md`).
pub struct ExpiringFold<K, V, S> {
    expiring: Expiring,
    source: Topic<K, V>,
    codec: Arc<dyn Codec<S>>,
    init: Arc<dyn Fn() -> S + Send + Sync>,
    fold: logic::FoldFn<K, V, S>,
}

impl<K, V, S> Declaration for ExpiringFold<K, V, S>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
{
    type Output = Vec<TopicRef>;
    type Built = Stage;

    fn declare(self, head: StageHead, sinks: Option<Vec<TopicRef>>) -> Stage {
        let Expiring { ttl, since, expire } = self.expiring;
        let mut problems = Vec::new();
        if ttl.is_zero() {
            problems.push(StageProblem::Operator(OperatorProblem {
                rules: "E1",
                anchor: "e1",
                operator: "expiring fold",
                reason: "a time to live of zero",
            }));
        }
        let ticks = match expire {
            Expire::StreamTime => None,
            Expire::WallClock { resolution } => {
                if resolution.is_zero() {
                    problems.push(StageProblem::ZeroTickInterval);
                }
                Some(TickDecl {
                    interval: resolution,
                    kind: TickKind::Fold,
                })
            }
        };
        let sources = vec![TopicRef::from(&self.source)];
        let logic = Arc::new(ExpiryLogic {
            source: self.source.clone(),
            ttl: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            since,
            expire,
            init: self.init,
            fold: self.fold,
            codec: Arc::new(ExpirySlotCodec { state: self.codec }),
        });
        let decl = ExpiryDecl {
            source: self.source.name().clone(),
            ttl,
            since,
            expire,
            fold: UserLogic(logic.clone()),
        };
        head.stage(OperatorParts {
            sources,
            sinks: sinks.unwrap_or_default(),
            ticks,
            operator: Arc::new(decl),
            logic,
            problems,
        })
    }
}

/// The live keys of an expiring fold's task: each key's bytes (in the
/// source's key codec), its state and its expiry time, in key order. `None`
/// when the task is not an expiring fold's or `S` is not its state type. A
/// driver's view for tests; the open transaction's changes are included.
pub fn live_state_of<S: Clone + Send + Sync + 'static>(
    slots: crate::stage::SlotsView<'_>,
) -> Option<Vec<(bytes::Bytes, S, i64)>> {
    let slots = slots.of::<state::ExpirySlot<S>>()?;
    let mut live: Vec<(bytes::Bytes, S, i64)> = slots
        .current_slots()
        .filter_map(|(slot, entry)| match (slot, entry) {
            (crate::stage::SlotKey::Key(key), state::ExpirySlot::Entry { state, expires_at }) => {
                Some((key.clone(), state.clone(), *expires_at))
            }
            _ => None,
        })
        .collect();
    live.sort_by(|a, b| a.0.cmp(&b.0));
    Some(live)
}

#[cfg(test)]
mod tests;
