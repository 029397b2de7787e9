//! The invariants that the simulator's checker verifies on every run and
//! the audit verifies on committed logs, each defined in `docs/RULES.md`
//! under its id.

use std::fmt;

/// The invariants the checker verifies on every simulated run, and the audit
/// on committed logs. Each is defined, with the rules it rests on, in
/// `docs/RULES.md` under its id (`docs/RULES.md#i1` … `#i18`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// Causal delivery: every committed delivery came after the task had
    /// delivered each claim the record makes on its tps (G2;
    /// docs/RULES.md#i1).
    I1,
    /// Exactly once, in order: every committed record of a consumed tp is
    /// delivered once in the committed history, in offset order (G3, X3;
    /// docs/RULES.md#i2).
    I2,
    /// No aborted reads: nothing from an aborted transaction is delivered or
    /// claimed (docs/RULES.md#i3).
    I3,
    /// Tick durability and cadence: every committed tick is delivered once,
    /// no due tick is skipped and no check emits two (T3, T6;
    /// docs/RULES.md#i4).
    I4,
    /// Stamp inheritance: an emission's stamp dominates the delivered
    /// record's stamp plus a claim on it; a tick's dominates the history
    /// (G5, T4; docs/RULES.md#i5).
    I5,
    /// State: committed key slots and tick slots equal the pure fold of the
    /// committed deliveries (S1, S2, T7; docs/RULES.md#i6).
    I6,
    /// Exactly-once outputs: committed outputs are exactly the emissions of
    /// committed deliveries (X1; docs/RULES.md#i7).
    I7,
    /// Liveness: once faults and inputs stop, the world quiesces with nothing
    /// held and every committed input delivered (G6; docs/RULES.md#i8).
    I8,
    /// Determinism: the same seed or tape gives the same trace, byte for byte
    /// (docs/RULES.md#i9).
    I9,
    /// Dead letters: with X5's opt-in, a committed delivery of a record the
    /// logic refuses wrote exactly one record, on the task's partition of
    /// the stage's dead-letter topic, holding the refused key and value and
    /// naming its stage, tp and offset, and nothing else; no record the
    /// logic accepts is dead-lettered; every committed dead letter comes
    /// from one committed delivery, and names a record no other does
    /// (docs/RULES.md#i10).
    I10,
    /// Timers: every request a timer service delivered in its committed
    /// history and accepted fires exactly once once a tick past its time
    /// claims it, never before its time, with a stamp that claims the
    /// request and its causes; no fire without such a request (K2;
    /// docs/RULES.md#i11).
    I11,
    /// Windows: for every windowed aggregation, each window a committed
    /// delivery closes is written once by it with the fold of the records
    /// the window holds (on close), or each change is written by the
    /// delivery that made it (on update); each late record is written to
    /// the late topic once, as it came (W1–W5; docs/RULES.md#i12).
    I12,
    /// Joins: for every stream–table join, each committed delivery of a
    /// stream record writes the join of the record with the row its task
    /// had for its key (the latest committed table record of that key it
    /// delivered, none after a tombstone), and nothing else; the row is at
    /// least as new as every table record the stream record's stamp claims
    /// (J1–J3; docs/RULES.md#i13).
    I13,
    /// Expiring state: for every expiring fold, each committed delivery
    /// deletes exactly the keys whose expiry the frontier reaches, none
    /// before, and emits what the fold over the key's live records emits
    /// (E1–E3; docs/RULES.md#i14).
    I14,
    /// Consumer groups: each group that holds committed positions is the
    /// group of the one stage that consumes those tps, so no stage resumes
    /// from another's position (X6; docs/RULES.md#i15).
    I15,
    /// Timestamp order: a stage that delivers in timestamp order never
    /// delivers a source record while another source's deliverable head
    /// has a lower timestamp (ties broken by tp), nor while it waits for
    /// another source, behind its log or caught up within `max_idle` (G9;
    /// docs/RULES.md#i16).
    I16,
    /// Re-keyed outputs: every record a stage wrote to an output it
    /// re-keys within itself is followed, in the same committed delivery,
    /// by one copy on the re-key's repartition topic with the record's
    /// value, timestamp and stamp, under the key the re-key's function
    /// selects, on the partition that key hashes to; and no copy without
    /// its record (R3; docs/RULES.md#i17).
    I17,
    /// Consistent views: every record a consistent view released with a
    /// cut equals what the application computes for its key from the
    /// source records of the epochs below the cut, and nothing else; no
    /// cut is past what every source partition's committed log reached,
    /// and the cuts of one key's releases never go down (V1;
    /// docs/RULES.md#i18).
    I18,
    /// Restored state: what a task's start loads into its slots through
    /// its local store (the store's slots, then the changelog after its
    /// checkpoint, or the whole changelog into a rebuilt store) equals the
    /// latest value per slot of its committed changelog below where the
    /// restore read to (S5, S6; docs/RULES.md#i19).
    I19,
    /// Interactive queries: every answer a task's owner gives to a query
    /// of a slot is the slot's committed state as of the task's last
    /// commit before the query, never an open transaction's change (Q1,
    /// S6; docs/RULES.md#i20).
    I20,
    /// A property of the simulation's own (its index among the properties,
    /// then the "sometimes" marks): the violation's message names it.
    Property(u16),
}

impl Invariant {
    /// The invariant's short title, as reports print it.
    pub fn title(self) -> &'static str {
        match self {
            Invariant::I1 => "causal delivery",
            Invariant::I2 => "exactly-once, in order",
            Invariant::I3 => "no aborted reads",
            Invariant::I4 => "tick durability and cadence",
            Invariant::I5 => "stamp inheritance",
            Invariant::I6 => "state",
            Invariant::I7 => "exactly-once outputs",
            Invariant::I8 => "liveness",
            Invariant::I9 => "determinism",
            Invariant::I10 => "dead letters",
            Invariant::I11 => "timers",
            Invariant::I12 => "windows",
            Invariant::I13 => "joins",
            Invariant::I14 => "expiring state",
            Invariant::I15 => "a group per stage",
            Invariant::I16 => "timestamp order",
            Invariant::I17 => "re-keyed outputs",
            Invariant::I18 => "consistent views",
            Invariant::I19 => "restored state",
            Invariant::I20 => "query answers",
            Invariant::Property(_) => "user property",
        }
    }
}

impl Invariant {
    /// The short name that labels use: the rule id (`I4`), or a property's
    /// number as reports count them (`property #3`, from 1).
    pub fn short(self) -> String {
        match self {
            Invariant::Property(index) => format!("property #{}", index + 1),
            other => format!("{other:?}"),
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Invariant::Property(index) = self {
            return write!(f, "user property #{}", index + 1);
        }
        let id = format!("{self:?}");
        write!(
            f,
            "{id} {} (docs/RULES.md#{})",
            self.title(),
            id.to_lowercase()
        )
    }
}
