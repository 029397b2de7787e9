//! Planted bugs, to prove that the simulator's checker catches them.
//!
//! Each [`Mutation`] breaks one guarantee on purpose. They exist only to be
//! found: with the `mutations` cargo feature off (the default, and how the
//! library ships) [`active`] is a constant `false` and the compiler removes
//! every planted branch. With it on, a test activates one mutation for the
//! current thread and shows that the simulator reports the invariant it breaks.

/// One planted bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mutation {
    /// The gate delivers records whatever they claim (breaks G2).
    GateIgnoresClaims,
    /// The stamping site leaves out the stamps of held records (breaks G5).
    StampingForgetsHeld,
    /// Committed positions skip over held and buffered records (breaks G7).
    PositionsPastHeld,
    /// An abort keeps the aborted transaction's history (breaks G7, X3).
    HistoryNotRestored,
    /// An abort keeps the aborted transaction's tick time: a lost tick (T6).
    TickTimeNotRolledBack,
    /// Tick folds read and write the null key's slot (breaks T7).
    TickSlotIsNullSlot,
    /// The consumer is not sought back after an abort (breaks X3).
    ConsumerNotRewound,
    /// Emissions are written outside the task's transaction (breaks X1).
    EmissionsOutsideTransaction,
    /// Every task writes its ticks to partition 0 of its tick topic (breaks
    /// T4: a tick belongs on the task's own partition).
    TickOnPartitionZero,
    /// Ticks carry the last delivered record's timestamp instead of the wall
    /// clock (breaks T4).
    TickAtRecordTime,
    /// Every stage commits its positions and checkpoints under the
    /// application id, one group shared by all stages (breaks X6).
    SharedGroup,
    /// A dead-lettered record is passed but never written to the dead-letter
    /// topic: a silent skip (breaks X5's opt-in, I10).
    DeadLetterDropsRecord,
    /// The timer service fires what is due one resolution ahead of a
    /// tick's time: a fire before its due time (breaks K2, I11).
    TimerFiresEarly,
    /// The timer service fires what is due but keeps what came due within
    /// the last resolution pending, so the next tick fires it again (breaks
    /// K2, I11: duplicate fires).
    TimerKeepsFired,
    /// The timer service drops a request whose time is odd instead of
    /// holding it: a timer that never fires (breaks K2, I11; and I6).
    TimerDropsOddRequests,
    /// The timer service stamps its fires with an empty stamp, so a fire
    /// claims neither its request nor the request's causes (breaks K2, G5,
    /// I11, I5).
    TimerFireUnstamped,
    /// A checkpoint keeps the history's claims on its first 16 tps only, as
    /// a fixed-size buffer would: a restarted task of a wide application
    /// forgets causes (breaks G7, I5). Only a task whose history claims
    /// more than 16 tps reaches it: of the shipped scenarios, `regroup`'s
    /// wide topic and `branches`' forty ledgers.
    CheckpointKeeps16Tps,
    /// The gate finds a claim's lane by its topic alone, as if every claim
    /// named the task's own partition of that topic (co-partitioning taken
    /// for granted): a claim on another partition of a consumed topic, which
    /// the task must carry forward, is waited for on its own partition of it
    /// instead, where it may never resolve (breaks G2, I8). Only an
    /// application whose records claim another partition of a topic their
    /// task consumes reaches it: of the shipped scenarios, `regroup`, and
    /// `order-labels`, whose responses claim left records of every
    /// partition their respond task read subscriptions from.
    GateMatchesTopicOnly,
    /// A record its source's codec refuses is dead-lettered without its
    /// value: the bytes the codec could not read are dropped rather than
    /// kept as they were (breaks X5's opt-in, I10).
    CodecDeadLetterLosesValue,
    /// A windowed aggregation closes a window one advance before its end
    /// plus grace (an off-by-one-window in the close time): every record
    /// finds its window closed already (breaks W2, W3, I12).
    WindowClosesOneIntervalEarly,
    /// A windowed aggregation closes a window one millisecond before its
    /// end plus grace: a record at the last millisecond of grace is late
    /// (breaks W2, W3, I12).
    WindowGraceOffByOne,
    /// A session aggregation merges a record into the first open session
    /// within the gap of it only, not every one: a record that bridges two
    /// sessions leaves them apart (breaks W5, I12).
    SessionBridgeNotMerged,
    /// A session aggregation that merges sessions keeps only the last
    /// joined session's aggregate, dropping the others' (the session's
    /// bounds stay right): a record that bridges two sessions loses one's
    /// aggregate (breaks W5, I12).
    SessionMergeKeepsLast,
    /// A windowed aggregation writes a closed window at the timestamp of
    /// the record whose delivery closed it, not at the highest timestamp
    /// among the window's records (breaks W4, I12).
    WindowWrittenAtClosingRecord,
    /// A stream–table join ignores a tombstone: the deleted row stays, and
    /// later stream records are joined with it (breaks J1, I13).
    JoinIgnoresTombstones,
    /// A stream–table join keeps a key's first row and ignores its updates:
    /// a stream record is joined with a version older than the one its task
    /// delivered, even one its stamp claims (breaks J1, J3, I13).
    JoinKeepsStaleRow,
    /// Expiring state expires halfway through its time to live: a key's
    /// state is gone before its time (breaks E2, I14).
    ExpiryHalfTtlEarly,
    /// Expiring state never expires: a key's state outlives its time to
    /// live (breaks E2, I14).
    ExpiryNeverExpires,
    /// A re-key writes its records with an empty stamp: the re-keyed
    /// record claims neither its source record nor its causes (breaks R2
    /// or R3, G5, I5).
    RekeyDropsStamp,
    /// A left or outer stream–stream join writes a record's unmatched
    /// result when the record arrives with nothing to join yet, as Kafka
    /// Streams did before 3.1, instead of once its window closes: a match
    /// arriving later in the window yields a second, spurious result
    /// (breaks J7, I13).
    StreamJoinEmitsUnmatchedEarly,
    /// The timer service fires what is due one millisecond after a tick's
    /// time: a timer due 1 ms after a tick fires at that tick, 1 ms early
    /// (breaks K2, I11). Only a tick at exactly the millisecond before a
    /// due time shows it.
    TimerFiresOneMsEarly,
    /// The timer service fires only what is due strictly before a tick's
    /// time: a timer due at exactly a tick's time waits for the next tick,
    /// one interval late (breaks K2, I11). Only a tick at exactly a due
    /// time shows it.
    TimerSkipsExactDue,
    /// A task emits its tick one millisecond before its interval has
    /// passed (breaks T3, I4). Only a tick check at exactly the millisecond
    /// before the tick is due shows it.
    TickOneMsEarly,
    /// Expiring state expires one millisecond before its time to live has
    /// passed (breaks E2, I14). Only a frontier at exactly the millisecond
    /// before an expiry shows it.
    ExpiryOneMsEarly,
    /// A timer service's task started on restored state drops the timers
    /// already due at its start, as if they had fired (breaks K2, I11): a
    /// timer is lost when its task restarts while the timer is overdue.
    TimerLostWhenOverdueAtStart,
    /// A table–table join writes nothing when a deletion removes a key's
    /// result, instead of a tombstone: the output keeps a result whose
    /// sides are gone (breaks J8, I13).
    TableJoinSkipsTombstone,
    /// A stage that delivers in timestamp order offers its first
    /// deliverable source head in lane order, whatever its timestamp
    /// (breaks G9, I16). Only a stage declared with
    /// `synchronise_by_timestamp` reaches it: of the shipped scenarios,
    /// `enrichment`'s stream–table join and `settlement`'s inner
    /// stream–stream join.
    SyncIgnoresTimestamps,
    /// A stage that delivers in timestamp order ends its wait for a
    /// caught-up source one millisecond before `max_idle` has passed: the
    /// other sources' heads go while the wait should still hold them
    /// (breaks G9, I16). Only a stage declared with
    /// `synchronise_by_timestamp` and a delivery at exactly the
    /// millisecond before the wait's end reach it.
    SyncWaitEndsEarly,
    /// A checkpoint larger than Kafka's offset-metadata limit is cut to
    /// the history's claims that fit in it, instead of stopping the task:
    /// the commit succeeds, and a restarted task forgets the causes it cut
    /// (breaks X1's limit, G7, I5). Only a task whose history reaches the
    /// limit shows it: of the shipped scenarios, `branches`.
    CheckpointTruncated,
    /// A consistent view writes each output it replaces within an epoch
    /// as well, at the epoch's end: outputs of states partway through an
    /// epoch, released before the epoch they belong to ended (breaks V5,
    /// I18).
    ViewReleasesEarly,
    /// A task on a path to a consistent view leaves its last source out
    /// of its frontier: it delivers an epoch before that source has
    /// brought all of the epoch below it, a cut that skips one lane
    /// (breaks V4, I18).
    CutSkipsLane,
    /// A dead letter's kind has its logic and codec arms swapped: a record
    /// the topic's codec refused is dead-lettered as a logic error, and one
    /// the logic refused as a codec error, so whoever reads the
    /// dead-letter topic looks for the wrong fault (breaks X5's dead
    /// letter, I10).
    DeadLetterKindSwapped,
    /// A foreign-key join's resolve stage writes every response's result,
    /// whatever its version: a response to an older left record joins the
    /// latest left value with the right value of a foreign key it no
    /// longer refers to, a stale result (breaks J14, I13).
    ForeignKeyJoinKeepsStaleResponse,
    /// A transaction writes a slot it changed more than once with its first
    /// change instead of its value at the commit: the changelog, and every
    /// task restored from it, holds a state the fold has left behind
    /// (breaks S5, I6).
    ChangelogKeepsFirstChange,
    /// A re-key within a stage writes each copy under the key of the
    /// record it copies instead of the key its function selects: the copy
    /// lands on the wrong partition of the repartition topic, and a
    /// downstream stage counts it under the wrong key (breaks R3, I17).
    RekeyOutputKeepsKey,
    /// A versioned join's lookup leaves out a version of the stream
    /// record's own millisecond: a record joins the version before it
    /// (breaks J17, I13). Only a table update and a stream record of one
    /// key and one timestamp show it.
    VersionedJoinExcludesEqual,
    /// A versioned join's lookup takes the key's latest version whatever
    /// its timestamp, as a plain table does: a record joins a version
    /// newer than itself (breaks J17, I13).
    VersionedJoinTakesLatest,
    /// A versioned join declared with a grace period joins each stream
    /// record at once instead of holding it until the stream time passes
    /// its timestamp plus the grace: a table update arriving out of order
    /// within the grace is not seen (breaks J19, I13).
    VersionedGraceIgnored,
    /// A hopping window does not take a record at exactly its start: the
    /// window's start is taken as exclusive, so the record counts only in
    /// the earlier windows that hold it (breaks W1, I12). Only a record
    /// stamped on the advance's grid reaches it.
    HoppingWindowSkipsStart,
    /// A task's local store checkpoint is written before the store is
    /// synced: an OS crash between the two leaves a checkpoint vouching
    /// for writes the store lost, and a restart restores from after them
    /// (breaks S6, I19). Only a run with the simulator's local-disk model
    /// reaches it.
    CheckpointBeforeFlush,
    /// A stream–stream join's pairing drops the right side when a right
    /// record meets a held left record: the joiner is given the left
    /// alone, as if it had met nothing (breaks J5, I13).
    StreamJoinPairsDropRight,
    /// A table–table join's result leaves out the right side whenever the
    /// left one is present: the joiner is given the left alone (breaks J8,
    /// I13).
    TableJoinResultDropsRight,
    /// A foreign-key join's resolve stage keeps the first left value it
    /// saw for a key instead of the latest: a response, or a left record
    /// with no foreign key, is joined with a left value the key has left
    /// behind (breaks J14, I13). Only a foreign-key join reaches it: of
    /// the shipped scenarios, `order-labels`.
    ForeignKeyJoinResolvesFirstLeft,
    /// A foreign-key join's respond stage answers a right record's
    /// subscribers with the right value it had before the record (breaks
    /// J13, I13): every result joined after a right update carries the
    /// stale value, and the resolve stage, which takes a response as it
    /// comes, agrees with it.
    ForeignKeyRespondSendsPreviousRight,
    /// A foreign-key join's subscribe stage forgets to unsubscribe a left
    /// key from the foreign key it leaves (breaks J12, I13): the respond
    /// stage keeps answering it for that key, and the resolve stage drops
    /// those answers as stale, so no result shows it.
    ForeignKeySubscribeKeepsOld,
    /// An interactive query of a slot the open transaction changed answers
    /// that change instead of the slot's committed state: an answer a
    /// later abort takes back (breaks Q1, I20). Only a run with the
    /// simulator's query model (`[queries]`) reaches it; the live
    /// runtime's query side cannot see a task's open transaction.
    QueryReadsUncommitted,
}

impl Mutation {
    /// Every planted bug.
    pub const ALL: [Mutation; 56] = [
        Mutation::GateIgnoresClaims,
        Mutation::StampingForgetsHeld,
        Mutation::PositionsPastHeld,
        Mutation::HistoryNotRestored,
        Mutation::TickTimeNotRolledBack,
        Mutation::TickSlotIsNullSlot,
        Mutation::ConsumerNotRewound,
        Mutation::EmissionsOutsideTransaction,
        Mutation::TickOnPartitionZero,
        Mutation::TickAtRecordTime,
        Mutation::SharedGroup,
        Mutation::DeadLetterDropsRecord,
        Mutation::TimerFiresEarly,
        Mutation::TimerKeepsFired,
        Mutation::TimerDropsOddRequests,
        Mutation::TimerFireUnstamped,
        Mutation::CheckpointKeeps16Tps,
        Mutation::GateMatchesTopicOnly,
        Mutation::CodecDeadLetterLosesValue,
        Mutation::WindowClosesOneIntervalEarly,
        Mutation::WindowGraceOffByOne,
        Mutation::SessionBridgeNotMerged,
        Mutation::SessionMergeKeepsLast,
        Mutation::WindowWrittenAtClosingRecord,
        Mutation::JoinIgnoresTombstones,
        Mutation::JoinKeepsStaleRow,
        Mutation::ExpiryHalfTtlEarly,
        Mutation::ExpiryNeverExpires,
        Mutation::RekeyDropsStamp,
        Mutation::StreamJoinEmitsUnmatchedEarly,
        Mutation::TimerFiresOneMsEarly,
        Mutation::TimerSkipsExactDue,
        Mutation::TickOneMsEarly,
        Mutation::ExpiryOneMsEarly,
        Mutation::TimerLostWhenOverdueAtStart,
        Mutation::TableJoinSkipsTombstone,
        Mutation::SyncIgnoresTimestamps,
        Mutation::ViewReleasesEarly,
        Mutation::CutSkipsLane,
        Mutation::DeadLetterKindSwapped,
        Mutation::ForeignKeyJoinKeepsStaleResponse,
        Mutation::ChangelogKeepsFirstChange,
        Mutation::RekeyOutputKeepsKey,
        Mutation::VersionedJoinExcludesEqual,
        Mutation::VersionedJoinTakesLatest,
        Mutation::VersionedGraceIgnored,
        Mutation::HoppingWindowSkipsStart,
        Mutation::SyncWaitEndsEarly,
        Mutation::CheckpointTruncated,
        Mutation::CheckpointBeforeFlush,
        Mutation::StreamJoinPairsDropRight,
        Mutation::TableJoinResultDropsRight,
        Mutation::ForeignKeyJoinResolvesFirstLeft,
        Mutation::ForeignKeyRespondSendsPreviousRight,
        Mutation::ForeignKeySubscribeKeepsOld,
        Mutation::QueryReadsUncommitted,
    ];

    /// The name used on the command line (`--mutation NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Mutation::GateIgnoresClaims => "gate-ignores-claims",
            Mutation::StampingForgetsHeld => "stamping-forgets-held",
            Mutation::PositionsPastHeld => "positions-past-held",
            Mutation::HistoryNotRestored => "history-not-restored",
            Mutation::TickTimeNotRolledBack => "tick-time-not-rolled-back",
            Mutation::TickSlotIsNullSlot => "tick-slot-is-null-slot",
            Mutation::ConsumerNotRewound => "consumer-not-rewound",
            Mutation::EmissionsOutsideTransaction => "emissions-outside-transaction",
            Mutation::TickOnPartitionZero => "tick-on-partition-zero",
            Mutation::TickAtRecordTime => "tick-at-record-time",
            Mutation::SharedGroup => "shared-group",
            Mutation::DeadLetterDropsRecord => "dead-letter-drops-record",
            Mutation::TimerFiresEarly => "timer-fires-early",
            Mutation::TimerKeepsFired => "timer-keeps-fired",
            Mutation::TimerDropsOddRequests => "timer-drops-odd-requests",
            Mutation::TimerFireUnstamped => "timer-fire-unstamped",
            Mutation::CheckpointKeeps16Tps => "checkpoint-keeps-16-tps",
            Mutation::GateMatchesTopicOnly => "gate-matches-topic-only",
            Mutation::CodecDeadLetterLosesValue => "codec-dead-letter-loses-value",
            Mutation::WindowClosesOneIntervalEarly => "window-closes-one-interval-early",
            Mutation::WindowGraceOffByOne => "window-grace-off-by-one",
            Mutation::SessionBridgeNotMerged => "session-bridge-not-merged",
            Mutation::SessionMergeKeepsLast => "session-merge-keeps-last",
            Mutation::WindowWrittenAtClosingRecord => "window-written-at-closing-record",
            Mutation::JoinIgnoresTombstones => "join-ignores-tombstones",
            Mutation::JoinKeepsStaleRow => "join-keeps-stale-row",
            Mutation::ExpiryHalfTtlEarly => "expiry-half-ttl-early",
            Mutation::ExpiryNeverExpires => "expiry-never-expires",
            Mutation::RekeyDropsStamp => "rekey-drops-stamp",
            Mutation::RekeyOutputKeepsKey => "rekey-output-keeps-key",
            Mutation::HoppingWindowSkipsStart => "hopping-window-skips-start",
            Mutation::StreamJoinEmitsUnmatchedEarly => "stream-join-emits-unmatched-early",
            Mutation::TimerFiresOneMsEarly => "timer-fires-one-ms-early",
            Mutation::TimerSkipsExactDue => "timer-skips-exact-due",
            Mutation::TickOneMsEarly => "tick-one-ms-early",
            Mutation::ExpiryOneMsEarly => "expiry-one-ms-early",
            Mutation::TimerLostWhenOverdueAtStart => "timer-lost-when-overdue-at-start",
            Mutation::TableJoinSkipsTombstone => "table-join-skips-tombstone",
            Mutation::SyncIgnoresTimestamps => "sync-ignores-timestamps",
            Mutation::SyncWaitEndsEarly => "sync-wait-ends-early",
            Mutation::CheckpointTruncated => "checkpoint-truncated",
            Mutation::ViewReleasesEarly => "view-releases-early",
            Mutation::CutSkipsLane => "cut-skips-lane",
            Mutation::DeadLetterKindSwapped => "dead-letter-kind-swapped",
            Mutation::ForeignKeyJoinKeepsStaleResponse => "fk-join-keeps-stale-response",
            Mutation::ChangelogKeepsFirstChange => "changelog-keeps-first-change",
            Mutation::VersionedJoinExcludesEqual => "versioned-join-excludes-equal",
            Mutation::VersionedJoinTakesLatest => "versioned-join-takes-latest",
            Mutation::VersionedGraceIgnored => "versioned-grace-ignored",
            Mutation::CheckpointBeforeFlush => "checkpoint-before-flush",
            Mutation::StreamJoinPairsDropRight => "stream-join-pairs-drop-right",
            Mutation::TableJoinResultDropsRight => "table-join-result-drops-right",
            Mutation::ForeignKeyJoinResolvesFirstLeft => "fk-join-resolves-first-left",
            Mutation::ForeignKeyRespondSendsPreviousRight => "fk-respond-sends-previous-right",
            Mutation::ForeignKeySubscribeKeepsOld => "fk-subscribe-keeps-old",
            Mutation::QueryReadsUncommitted => "query-reads-uncommitted",
        }
    }

    /// The mutation with this name.
    pub fn from_name(name: &str) -> Option<Mutation> {
        Mutation::ALL
            .into_iter()
            .find(|mutation| mutation.name() == name)
    }
}

#[cfg(feature = "mutations")]
thread_local! {
    static ACTIVE: std::cell::Cell<Option<Mutation>> = const { std::cell::Cell::new(None) };
}

/// Whether bugs can be planted: this build has the `mutations` feature.
pub const AVAILABLE: bool = cfg!(feature = "mutations");

/// Activates `mutation` (or none) for the current thread. Without the
/// `mutations` feature nothing can be planted: check [`AVAILABLE`] first
/// (this call then does nothing).
pub fn set(mutation: Option<Mutation>) {
    #[cfg(feature = "mutations")]
    ACTIVE.with(|active| active.set(mutation));
    #[cfg(not(feature = "mutations"))]
    let _ = mutation;
}

/// True when `mutation` is planted on this thread. Always false without the
/// `mutations` feature.
#[inline(always)]
pub fn active(mutation: Mutation) -> bool {
    #[cfg(feature = "mutations")]
    {
        ACTIVE.with(|active| active.get() == Some(mutation)) || planted_in_unit_tests(mutation)
    }
    #[cfg(not(feature = "mutations"))]
    {
        let _ = mutation;
        false
    }
}

/// The environment variable that plants one mutation on every thread of the
/// core's own unit-test binary (and nowhere else): how
/// `every_core_mutation_fails_a_core_unit_test` runs the unit tests under
/// each planted bug.
#[cfg(all(test, feature = "mutations"))]
const PLANT_IN_UNIT_TESTS: &str = "PARSLEY_UNIT_TESTS_PLANT";

#[cfg(all(test, feature = "mutations"))]
fn planted_in_unit_tests(mutation: Mutation) -> bool {
    static PLANTED: std::sync::OnceLock<Option<Mutation>> = std::sync::OnceLock::new();
    *PLANTED.get_or_init(|| {
        std::env::var(PLANT_IN_UNIT_TESTS)
            .ok()
            .map(|name| Mutation::from_name(&name).expect("a planted bug's name"))
    }) == Some(mutation)
}

#[cfg(all(not(test), feature = "mutations"))]
#[inline(always)]
fn planted_in_unit_tests(_: Mutation) -> bool {
    false
}

impl Mutation {
    /// Whether the bug is planted in a driver (the simulator's task host)
    /// rather than in the core: the core's unit tests cannot see it, and
    /// the harness's own tests catch it (`sim/tests/transactions.rs`).
    pub fn in_driver(self) -> bool {
        matches!(
            self,
            Mutation::ConsumerNotRewound | Mutation::EmissionsOutsideTransaction
        )
    }
}

#[cfg(all(test, feature = "mutations"))]
mod tests {
    use super::*;

    /// Every planted bug of the core fails at least one of the core's own
    /// unit tests, not only the simulator's checker: the unit-test binary
    /// runs itself once per mutation, with the mutation planted on every
    /// thread, and that run must fail.
    #[test]
    fn every_core_mutation_fails_a_core_unit_test() {
        if std::env::var_os(PLANT_IN_UNIT_TESTS).is_some() {
            return; // this is one of the runs below
        }
        let binary = std::env::current_exe().expect("the unit-test binary");
        let uncaught: Vec<&str> = Mutation::ALL
            .into_iter()
            .filter(|mutation| !mutation.in_driver())
            .filter(|mutation| {
                let run = std::process::Command::new(&binary)
                    .env(PLANT_IN_UNIT_TESTS, mutation.name())
                    .args(["--quiet", "--skip", "every_core_mutation_fails"])
                    .output()
                    .expect("the unit-test binary runs");
                run.status.success()
            })
            .map(Mutation::name)
            .collect();
        assert!(
            uncaught.is_empty(),
            "the core's unit tests all pass with these bugs planted: {uncaught:?}"
        );
    }
}
