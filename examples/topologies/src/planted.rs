//! Which scenario exposes each planted bug, and by which invariant: the
//! mutation suite's table, shared by its test and its benchmark.

use parsley::mutation::Mutation;

use parsley_sim::sim::Invariant;

/// Each planted bug, the shipped scenario that exercises it, and the
/// invariant that must report it.
pub const PLANTED: [(Mutation, &str, Invariant); 34] = [
    (Mutation::GateIgnoresClaims, "fan-in", Invariant::I1),
    (Mutation::StampingForgetsHeld, "fan-in", Invariant::I5),
    (Mutation::PositionsPastHeld, "balances", Invariant::I2),
    (Mutation::HistoryNotRestored, "balances", Invariant::I5),
    (Mutation::TickTimeNotRolledBack, "balances", Invariant::I4),
    (Mutation::TickSlotIsNullSlot, "audit-cut", Invariant::I6),
    (Mutation::ConsumerNotRewound, "balances", Invariant::I2),
    (
        Mutation::EmissionsOutsideTransaction,
        "balances",
        Invariant::I7,
    ),
    (Mutation::TickOnPartitionZero, "balances", Invariant::I4),
    (Mutation::TickAtRecordTime, "balances", Invariant::I4),
    (Mutation::SharedGroup, "diamond", Invariant::I2),
    (
        Mutation::DeadLetterDropsRecord,
        "dead-letter",
        Invariant::I10,
    ),
    (Mutation::TimerFiresEarly, "timers", Invariant::I11),
    (Mutation::TimerKeepsFired, "timers", Invariant::I11),
    (Mutation::TimerDropsOddRequests, "timers", Invariant::I11),
    (Mutation::TimerFireUnstamped, "timers", Invariant::I5),
    (Mutation::CheckpointKeeps16Tps, "regroup", Invariant::I5),
    (Mutation::GateMatchesTopicOnly, "regroup", Invariant::I8),
    (
        Mutation::CodecDeadLetterLosesValue,
        "bad-bytes",
        Invariant::I10,
    ),
    (
        Mutation::WindowClosesOneIntervalEarly,
        "windows",
        Invariant::I12,
    ),
    (Mutation::WindowGraceOffByOne, "windows", Invariant::I12),
    (Mutation::SessionBridgeNotMerged, "windows", Invariant::I12),
    (
        Mutation::JoinIgnoresTombstones,
        "enrichment",
        Invariant::I13,
    ),
    (Mutation::JoinKeepsStaleRow, "enrichment", Invariant::I13),
    (Mutation::ExpiryHalfTtlEarly, "dedupe", Invariant::I14),
    (Mutation::ExpiryNeverExpires, "dedupe", Invariant::I14),
    (Mutation::RekeyDropsStamp, "by-product", Invariant::I5),
    (
        Mutation::StreamJoinEmitsUnmatchedEarly,
        "settlement",
        Invariant::I13,
    ),
    (Mutation::TimerFiresOneMsEarly, "timers", Invariant::I11),
    (Mutation::TimerSkipsExactDue, "timers", Invariant::I11),
    (Mutation::TickOneMsEarly, "balances", Invariant::I4),
    (Mutation::ExpiryOneMsEarly, "dedupe", Invariant::I14),
    (
        Mutation::TimerLostWhenOverdueAtStart,
        "timers",
        Invariant::I11,
    ),
    (Mutation::TableJoinSkipsTombstone, "credit", Invariant::I13),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutation_has_a_row() {
        for mutation in Mutation::ALL {
            assert!(
                PLANTED.iter().any(|(planted, _, _)| *planted == mutation),
                "{mutation:?} has no row"
            );
        }
    }
}
