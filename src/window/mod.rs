//! Windowed aggregation as an operator (W1–W5): Kafka Streams'
//! `groupByKey().windowedBy(TimeWindows…).aggregate(…)`, with
//! `suppress(untilWindowCloses)` as the default emission, built into a
//! stage so that every driver runs the same windows.
//!
//! A windowed aggregation is a stage ([`OperatorBuilder::build`] returns a
//! [`Stage`]) that reads one source topic and keeps, in each key's slot, the
//! key's open windows with their aggregates:
//!
//! - **Membership (W1).** Windows are Kafka Streams' time windows: a window
//!   `[start, end)` holds the records whose timestamp `t` has
//!   `start <= t < end`. Windows start at every multiple of the advance
//!   from the epoch ([`Windows::tumbling`]: the advance is the size;
//!   [`Windows::hopping`]: a record belongs to `size / advance` windows).
//!   A record without a key, or with a negative timestamp, is refused with
//!   W1 (its task stops, or dead-letters it with
//!   [`OperatorBuilder::dead_letter_queue`]).
//! - **Sessions (W5).** [`SessionWindows::with_inactivity_gap`]: a key's
//!   records at most the gap apart make one session `[start, end]` (its
//!   first and last records' timestamps). A record within the gap of a
//!   session joins it; one within the gap of two merges them, their
//!   aggregates combined by the declared merge, as Kafka Streams'
//!   `SessionWindows` with its `Merger`. A session closes when the
//!   frontier passes `end + gap + grace`; it emits on close.
//! - **Closing (W2).** Each task keeps a close frontier: by default its
//!   stream time (the highest record timestamp it delivered, as Kafka
//!   Streams' `observedStreamTime`), or, with [`Close::WallClock`], the
//!   time of its last tick. A window closes when the frontier reaches
//!   `end + grace`, and not a millisecond earlier. A window closed by stream
//!   time closes only when a later record arrives, as in Kafka Streams;
//!   wall-clock closing closes it by time alone, at most one resolution
//!   late.
//! - **Late records (W3).** A record whose windows are all or partly closed
//!   already is late for those windows: it is folded into the ones still
//!   open and, once, counted (`window-records-late-total`) and written
//!   as it came (its own key and value bytes) to the late topic, with
//!   [`OperatorBuilder::late_records_to`]. Kafka Streams drops it and only
//!   counts it.
//! - **Emission (W4).** [`Emit::OnClose`] (the default) writes each window's
//!   final aggregate once, when it closes: the closes of one delivery in
//!   the order (end, key, start). [`Emit::OnUpdate`] writes the window's
//!   aggregate on every record folded into it, as a Kafka Streams
//!   `KTable` without `suppress` does (with caching off), and nothing on
//!   close. The output's key is a [`Windowed`] key: the record's key and the
//!   window's bounds.
//!
//! Windows are state: a record's delivery changes its key's slot and the
//! task's clock (kept in its tick slot) in the record's transaction, written
//! to the stage's changelog (S5); a restarted or moved task restores its
//! open windows and its frontier, so a crash neither loses a window nor
//! closes one twice (X1). A closed window's slot is removed. Emitted
//! aggregates are stamped at the stamping site (G5), so a closed window
//! claims every record folded into it.
//!
//! ```
//! use std::time::Duration;
//! use parsley::{WindowDecl, WindowShape, Windowed, WindowedCodec, Windows};
//! use parsley::{Parsley, Stage, Topic, Utf8, I64};
//!
//! let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
//! let per_minute =
//!     Topic::<Windowed<String>, i64>::with_codecs("sales-per-minute", WindowedCodec(Utf8), I64);
//! // Revenue per product per minute, each minute written once it closes.
//! let revenue = Stage::named("revenue")
//!     .windowed(Windows::tumbling(Duration::from_secs(60)).grace(Duration::from_secs(5)))
//!     .aggregate(&sales, I64, || 0i64, |total, sale| total + sale.value())
//!     .into(&per_minute)
//!     .build();
//! let app = Parsley::named("shop").stage(revenue).build()?;
//! let declared = app.stage("revenue").unwrap().stage.hooks().operator::<WindowDecl>().unwrap();
//! let size = Duration::from_secs(60);
//! assert_eq!(declared.shape, WindowShape::Time { size, advance: size });
//! assert_eq!(declared.grace, Duration::from_secs(5));
//! # Ok::<(), parsley::CompositionError>(())
//! ```

mod assign;
mod logic;
mod state;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::codec::{Codec, CodecError, Direction};
use crate::emission::Record;
use crate::operator::{Counter, Operator, OperatorProblem, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::logic::Fallible;
use crate::stage::{
    Declaration, Declaring, OperatorBuilder, OperatorParts, ReplayError, Stage, StageBuilder,
    StageHead, StageProblem, Stateless, TickDecl, TickKind,
};
use crate::topic::{Topic, TopicRef};
use crate::tp::{TopicName, Tp};

use assign::{millis, Shape};
pub(crate) use logic::WindowLogic;
use state::WindowSlotCodec;

/// When a windowed aggregation writes a window's aggregate (W4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Emit {
    /// Once, when the window closes: Kafka Streams'
    /// `suppress(Suppressed.untilWindowCloses(…))`. The default.
    #[default]
    OnClose,
    /// On every record folded into the window, and nothing on close.
    OnUpdate,
}

/// What closes a windowed aggregation's windows (W2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Close {
    /// The task's stream time: the highest record timestamp it delivered,
    /// as in Kafka Streams. The default. Windows close only as records
    /// arrive.
    #[default]
    StreamTime,
    /// The task's wall clock: the stage ticks every `resolution` (T3), and
    /// a tick closes the windows its time reaches. Records do not move the
    /// frontier, so an input whose timestamps run ahead of the clock does
    /// not close windows early.
    WallClock {
        /// The tick interval: how late a window may close.
        resolution: Duration,
    },
}

/// The key of a windowed aggregation's output: the record's key and the
/// window's bounds in milliseconds since the epoch: `[start, end)` for a
/// time window, `[start, end]` for a session (its first and last records'
/// timestamps, as Kafka Streams' `SessionWindow` has them).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Windowed<K> {
    /// The key the records were grouped by.
    pub key: K,
    /// The window's first millisecond.
    pub start: i64,
    /// The millisecond after its last; a session's last millisecond.
    pub end: i64,
}

/// A codec of [`Windowed`] keys over a codec of the key: the key's bytes,
/// then the window's start and end, 8 big-endian bytes each. (Kafka
/// Streams' `TimeWindowedSerializer` writes the start alone, so its reader
/// must be told the window size; this one carries the end too.)
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowedCodec<KC>(pub KC);

impl<K, KC: Codec<K>> Codec<Windowed<K>> for WindowedCodec<KC> {
    fn encode(&self, value: &Windowed<K>) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &Windowed<K>, out: &mut BytesMut) -> Result<(), CodecError> {
        self.0.encode_to(&value.key, out)?;
        out.put_i64(value.start);
        out.put_i64(value.end);
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Windowed<K>, CodecError> {
        let Some(split) = bytes.len().checked_sub(16) else {
            return Err(CodecError {
                codec: "windowed",
                direction: Direction::Decode,
                type_name: "windowed key",
                message: format!(
                    "expected the key and 16 bytes of window bounds, got {} bytes",
                    bytes.len()
                ),
            });
        };
        let (key, bounds) = bytes.split_at(split);
        let start = i64::from_be_bytes(bounds[..8].try_into().expect("8 bytes"));
        let end = i64::from_be_bytes(bounds[8..].try_into().expect("8 bytes"));
        Ok(Windowed {
            key: self.0.decode(key)?,
            start,
            end,
        })
    }
}

/// The windows a windowed aggregation declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowShape {
    /// Time windows (W1): of `size`, starting every `advance` (the size,
    /// for tumbling windows).
    Time {
        /// The windows' size.
        size: Duration,
        /// How far apart windows start.
        advance: Duration,
    },
    /// Session windows (W5): each key's records at most `gap` apart.
    Session {
        /// The inactivity gap.
        gap: Duration,
    },
}

/// A windowed aggregation's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowDecl {
    /// The topic whose records are windowed.
    pub source: TopicName,
    /// The topic the windows' aggregates are written to.
    pub output: Option<TopicName>,
    /// The topic late records are written to, if any (W3).
    pub late: Option<TopicName>,
    /// Time or session windows, and their sizes.
    pub shape: WindowShape,
    /// How long after its end (a session: its end plus the gap) a window
    /// still takes records (W2).
    pub grace: Duration,
    /// When aggregates are written (W4).
    pub emit: Emit,
    /// What closes windows (W2).
    pub close: Close,
    /// The user's logic with the topics' codecs, for [`WindowDecl::fold`]
    /// and the rest.
    pub(crate) fold: UserLogic<dyn logic::WindowFold>,
}

impl Operator for WindowDecl {
    /// A record may close other keys' windows (W2).
    fn record_reads_every_slot(&self) -> bool {
        true
    }

    /// A tick may close any key's windows (W2).
    fn tick_reads_every_slot(&self) -> bool {
        true
    }

    fn counters(&self) -> &'static [Counter] {
        &[Counter {
            name: logic::LATE_RECORDS,
            help: "Records a windowed aggregation (W3) delivered too late for at least one of their windows.",
        }]
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The user's logic of a windowed aggregation, for a checker that decides
/// membership, merging and closing by itself (I12): the user's initial
/// value, fold and merge over aggregates encoded with the aggregate's codec,
/// and a window's output record; none of the operator's window arithmetic.
impl WindowDecl {
    /// The initial aggregate, encoded.
    pub fn initial(&self) -> Result<Bytes, ReplayError> {
        self.fold.initial().map_err(ReplayError::delivery)
    }

    /// `record`, read from `tp`, folded into `aggregate` by the user's fold.
    pub fn fold(
        &self,
        aggregate: &[u8],
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Bytes, ReplayError> {
        self.fold
            .fold(aggregate, tp, record)
            .map_err(ReplayError::delivery)
    }

    /// A session aggregation's merge of `earlier`, a joined session's
    /// aggregate, into `aggregate` (W5); time windows have none.
    pub fn merge(&self, aggregate: &[u8], earlier: &[u8]) -> Result<Bytes, ReplayError> {
        self.fold
            .merge(aggregate, earlier)
            .map_err(ReplayError::delivery)
    }

    /// The output record (key and value bytes) of the window `[start, end)`
    /// (a session: `[start, end]`) of `key` (its bytes in the source's key
    /// codec) with `aggregate`, encoded with the output topic's codecs.
    pub fn output(
        &self,
        key: &[u8],
        (start, end): (i64, i64),
        aggregate: &[u8],
    ) -> Result<(Bytes, Bytes), ReplayError> {
        self.fold
            .output(key, (start, end), aggregate)
            .map_err(ReplayError::delivery)
    }
}

/// W1's and W5's declaration mistakes.
fn problem(reason: &'static str) -> StageProblem {
    StageProblem::Operator(OperatorProblem {
        rules: "W1, W5",
        anchor: "w1",
        operator: "windowed aggregation",
        reason,
    })
}

/// The time windows of an aggregation: their size, advance and grace (W1,
/// W2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    size: Duration,
    advance: Duration,
    grace: Duration,
}

impl Windows {
    /// Windows of `size` that do not overlap: each record belongs to one.
    /// Kafka Streams' `TimeWindows.ofSizeWithNoGrace(size)`.
    pub fn tumbling(size: Duration) -> Windows {
        Windows {
            size,
            advance: size,
            grace: Duration::ZERO,
        }
    }

    /// Windows of `size` starting every `advance` (at most `size`): a record
    /// belongs to `size / advance` of them. Kafka Streams'
    /// `TimeWindows.ofSizeWithNoGrace(size).advanceBy(advance)`.
    pub fn hopping(size: Duration, advance: Duration) -> Windows {
        Windows {
            size,
            advance,
            grace: Duration::ZERO,
        }
    }

    /// How long after its end a window still takes late records before it
    /// closes (W2). Default zero.
    pub fn grace(mut self, grace: Duration) -> Windows {
        self.grace = grace;
        self
    }
}

/// The session windows of an aggregation: their inactivity gap and grace
/// (W5, W2). Kafka Streams' `SessionWindows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionWindows {
    gap: Duration,
    grace: Duration,
}

impl SessionWindows {
    /// Sessions of each key's records at most `gap` apart: a record within
    /// `gap` of a session joins it, and one within `gap` of two merges
    /// them. Kafka Streams' `SessionWindows.ofInactivityGapWithNoGrace(gap)`.
    pub fn with_inactivity_gap(gap: Duration) -> SessionWindows {
        SessionWindows {
            gap,
            grace: Duration::ZERO,
        }
    }

    /// How long after its end plus the gap a session still takes late
    /// records before it closes (W2). Default zero.
    pub fn grace(mut self, grace: Duration) -> SessionWindows {
        self.grace = grace;
        self
    }
}

impl StageBuilder<Stateless> {
    /// A windowed aggregation's stage: `windows` are [`Windows`] (tumbling
    /// or hopping) or [`SessionWindows`]; its `aggregate` follows. Kafka
    /// Streams' `groupByKey().windowedBy(..)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use parsley::prelude::*;
    ///
    /// let sales: Topic<String, i64> = Topic::new("sales");
    /// let revenue: Topic<Windowed<String>, i64> =
    ///     Topic::with_codecs("revenue", WindowedCodec(Utf8), I64);
    /// let stage = Stage::named("revenue")
    ///     .windowed(Windows::tumbling(Duration::from_secs(60)))
    ///     .aggregate(&sales, I64, || 0i64, |total, sale| total + sale.value())
    ///     .into(&revenue)
    ///     .build();
    /// assert_eq!(stage.name(), "revenue");
    /// ```
    pub fn windowed<W: Windowing>(self, windows: W) -> Declaring<W> {
        self.choose(windows)
    }
}

/// The windows a windowed aggregation takes ([`StageBuilder::windowed`]):
/// [`Windows`] or [`SessionWindows`].
pub trait Windowing: sealed::Windowing {}

mod sealed {
    pub trait Windowing {}
}

impl sealed::Windowing for Windows {}
impl Windowing for Windows {}
impl sealed::Windowing for SessionWindows {}
impl Windowing for SessionWindows {}

impl Declaring<Windows> {
    /// The aggregation: each key's records of `source`, per window, folded
    /// from `init()` with `fold` (which may return `A` or `Result<A, E>`;
    /// an error or a panic refuses the record, X5). Aggregates are kept
    /// with `codec` on the changelog.
    pub fn aggregate<K, V, A, C, R>(
        self,
        source: &Topic<K, V>,
        codec: C,
        init: impl Fn() -> A + Send + Sync + 'static,
        fold: impl Fn(A, &Record<K, V>) -> R + Send + Sync + 'static,
    ) -> OperatorBuilder<WindowAggregation<K, V, A>>
    where
        K: Clone + Send + Sync + 'static,
        V: Send + Sync + 'static,
        A: Clone + Send + Sync + 'static,
        C: Codec<A>,
        R: Fallible<A>,
    {
        let windows = self.spec;
        let shape = WindowShape::Time {
            size: windows.size,
            advance: windows.advance,
        };
        self.with(WindowAggregation::new(
            shape,
            windows.grace,
            source,
            codec,
            init,
            fold,
        ))
    }
}

impl Declaring<SessionWindows> {
    /// The session aggregation: each key's records of `source`, per
    /// session, folded from `init()` with `fold`; when a record joins
    /// sessions, their aggregates are combined with `merge` (W5). Either
    /// may return `A` or `Result<A, E>`; an error or a panic refuses the
    /// record (X5). Sessions emit on close ([`Emit::OnClose`]).
    pub fn aggregate<K, V, A, C, R, M>(
        self,
        source: &Topic<K, V>,
        codec: C,
        init: impl Fn() -> A + Send + Sync + 'static,
        fold: impl Fn(A, &Record<K, V>) -> R + Send + Sync + 'static,
        merge: impl Fn(A, A) -> M + Send + Sync + 'static,
    ) -> OperatorBuilder<WindowAggregation<K, V, A>>
    where
        K: Clone + Send + Sync + 'static,
        V: Send + Sync + 'static,
        A: Clone + Send + Sync + 'static,
        C: Codec<A>,
        R: Fallible<A>,
        M: Fallible<A>,
    {
        let sessions = self.spec;
        let shape = WindowShape::Session { gap: sessions.gap };
        let mut aggregation =
            WindowAggregation::new(shape, sessions.grace, source, codec, init, fold);
        aggregation.merge = Some(Arc::new(move |one, two| merge(one, two).into_result()));
        self.with(aggregation)
    }
}

/// A windowed aggregation's logic, as [`OperatorBuilder`] declares it (the
/// rules it keeps are in `docs/RULES.md`).
pub struct WindowAggregation<K, V, A> {
    shape: WindowShape,
    grace: Duration,
    source: Topic<K, V>,
    codec: Arc<dyn Codec<A>>,
    init: Arc<dyn Fn() -> A + Send + Sync>,
    fold: logic::FoldFn<K, V, A>,
    merge: Option<logic::MergeFn<A>>,
    late: Option<Topic<K, V>>,
    emit: Emit,
    close: Close,
}

impl<K, V, A> WindowAggregation<K, V, A>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    A: Clone + Send + Sync + 'static,
{
    fn new<C, R>(
        shape: WindowShape,
        grace: Duration,
        source: &Topic<K, V>,
        codec: C,
        init: impl Fn() -> A + Send + Sync + 'static,
        fold: impl Fn(A, &Record<K, V>) -> R + Send + Sync + 'static,
    ) -> Self
    where
        C: Codec<A>,
        R: Fallible<A>,
    {
        WindowAggregation {
            shape,
            grace,
            source: source.clone(),
            codec: Arc::new(codec),
            init: Arc::new(init),
            fold: Arc::new(move |aggregate, record| fold(aggregate, record).into_result()),
            merge: None,
            late: None,
            emit: Emit::default(),
            close: Close::default(),
        }
    }
}

impl<K, V, A> OperatorBuilder<WindowAggregation<K, V, A>>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    A: Clone + Send + Sync + 'static,
{
    /// When aggregates are written (W4). Default [`Emit::OnClose`].
    pub fn emit(mut self, emit: Emit) -> Self {
        self.declaration.emit = emit;
        self
    }

    /// What closes windows (W2). Default [`Close::StreamTime`].
    pub fn close_by(mut self, close: Close) -> Self {
        self.declaration.close = close;
        self
    }

    /// W3: late records are written, as they came, to `late` (as well as
    /// counted). Without it they are only counted.
    pub fn late_records_to(mut self, late: &Topic<K, V>) -> Self {
        self.declaration.late = Some(late.clone());
        self
    }
}

impl<K, V, A> Declaration for WindowAggregation<K, V, A>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    A: Clone + Send + Sync + 'static,
{
    type Output = Topic<Windowed<K>, A>;
    type Built = Stage;

    fn declare(self, head: StageHead, output: Option<Topic<Windowed<K>, A>>) -> Stage {
        let grace = self.grace;
        let mut problems = Vec::new();
        let shape = match self.shape {
            WindowShape::Time { size, advance } => {
                if size.is_zero() {
                    problems.push(problem("a window size of zero"));
                } else if advance.is_zero() || advance > size {
                    problems.push(problem("an advance of zero or larger than the window size"));
                }
                Shape::Time {
                    size: millis(size),
                    advance: millis(advance).max(1),
                    grace: millis(grace),
                }
            }
            WindowShape::Session { gap } => {
                if gap.is_zero() {
                    problems.push(problem("a session inactivity gap of zero"));
                }
                if self.emit == Emit::OnUpdate {
                    problems.push(problem(
                        "session windows emitting on update (a merge would need a tombstone for each session it replaces; sessions emit on close)",
                    ));
                }
                Shape::Session {
                    gap: millis(gap),
                    grace: millis(grace),
                }
            }
        };
        if output.is_none() {
            problems.push(problem("no output topic (declare one with `into`)"));
        }
        let ticks = match self.close {
            Close::StreamTime => None,
            Close::WallClock { resolution } => {
                if resolution.is_zero() {
                    problems.push(StageProblem::ZeroTickInterval);
                }
                Some(TickDecl {
                    interval: resolution,
                    kind: TickKind::Fold,
                })
            }
        };
        let mut sinks = Vec::new();
        sinks.extend(output.iter().map(TopicRef::from));
        sinks.extend(self.late.iter().map(TopicRef::from));
        let sources = vec![TopicRef::from(&self.source)];
        let logic = Arc::new(WindowLogic {
            source: self.source.clone(),
            output: output.clone(),
            late: self.late.clone(),
            shape,
            emit: self.emit,
            close: self.close,
            init: self.init,
            fold: self.fold,
            merge: self.merge,
            codec: Arc::new(WindowSlotCodec {
                aggregate: self.codec,
            }),
        });
        let decl = WindowDecl {
            fold: UserLogic(logic.clone()),
            source: self.source.name().clone(),
            output: output.as_ref().map(|topic| topic.name().clone()),
            late: self.late.as_ref().map(|topic| topic.name().clone()),
            shape: self.shape,
            grace,
            emit: self.emit,
            close: self.close,
        };
        head.stage(OperatorParts {
            sources,
            sinks,
            ticks,
            operator: Arc::new(decl),
            logic,
            problems,
        })
    }
}

/// An open window of a task, as [`open_windows_of`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenWindow<A> {
    /// The key's bytes, in the source topic's key codec.
    pub key: Bytes,
    /// The window's first millisecond.
    pub start: i64,
    /// The millisecond after its last; a session's last millisecond.
    pub end: i64,
    /// The aggregate so far.
    pub aggregate: A,
}

/// The open windows of a windowed aggregation's task (its windowed store),
/// in the order they close: by end, then key, then start. `None` when the
/// task is not a windowed aggregation's or `A` is not its aggregate type. A
/// driver's view for tests; the open transaction's changes are included.
pub fn open_windows_of<A: Clone + Send + Sync + 'static>(
    slots: crate::stage::SlotsView<'_>,
) -> Option<Vec<OpenWindow<A>>> {
    let slots = slots.of::<state::WindowSlot<A>>()?;
    let mut open: Vec<OpenWindow<A>> = slots
        .current_slots()
        .filter_map(|(slot, state)| match (slot, state) {
            (crate::stage::SlotKey::Key(key), state::WindowSlot::Windows(windows)) => {
                Some(windows.iter().map(move |window| OpenWindow {
                    key: key.clone(),
                    start: window.span.start,
                    end: window.span.end,
                    aggregate: window.aggregate.clone(),
                }))
            }
            _ => None,
        })
        .flatten()
        .collect();
    open.sort_by(|a, b| (a.end, &a.key, a.start).cmp(&(b.end, &b.key, b.start)));
    Some(open)
}

#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod tests;
