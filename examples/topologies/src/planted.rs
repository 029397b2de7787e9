//! Which scenario exposes each planted bug, and by which invariant: the
//! mutation suite's table, shared by its test and its benchmark.

use parsley::mutation::Mutation;

use parsley_sim::sim::Invariant;

/// Each planted bug, the shipped scenario that exercises it, and the
/// invariant that must report it.
pub const PLANTED: [(Mutation, &str, Invariant); 56] = [
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
    (Mutation::SharedGroup, "diamond", Invariant::I15),
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
    (Mutation::SessionMergeKeepsLast, "windows", Invariant::I12),
    (
        Mutation::WindowWrittenAtClosingRecord,
        "windows",
        Invariant::I12,
    ),
    (
        Mutation::JoinIgnoresTombstones,
        "enrichment",
        Invariant::I13,
    ),
    (Mutation::JoinKeepsStaleRow, "enrichment", Invariant::I13),
    (Mutation::ExpiryHalfTtlEarly, "dedupe", Invariant::I14),
    (Mutation::ExpiryNeverExpires, "dedupe", Invariant::I14),
    (Mutation::RekeyDropsStamp, "by-product", Invariant::I5),
    (Mutation::RekeyOutputKeepsKey, "by-product", Invariant::I17),
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
    (
        Mutation::SyncIgnoresTimestamps,
        "enrichment",
        Invariant::I16,
    ),
    (
        Mutation::DeadLetterKindSwapped,
        "dead-letter",
        Invariant::I10,
    ),
    (
        Mutation::ForeignKeyJoinKeepsStaleResponse,
        "order-labels",
        Invariant::I13,
    ),
    (
        Mutation::ChangelogKeepsFirstChange,
        "balances",
        Invariant::I6,
    ),
    (
        Mutation::VersionedJoinExcludesEqual,
        "as-of",
        Invariant::I13,
    ),
    (Mutation::VersionedJoinTakesLatest, "as-of", Invariant::I13),
    (Mutation::VersionedGraceIgnored, "as-of", Invariant::I13),
    (Mutation::HoppingWindowSkipsStart, "windows", Invariant::I12),
    (Mutation::ViewReleasesEarly, "ledger", Invariant::I18),
    (Mutation::CutSkipsLane, "ledger", Invariant::I18),
    (Mutation::SyncWaitEndsEarly, "settlement", Invariant::I16),
    (Mutation::CheckpointTruncated, "branches", Invariant::I5),
    (Mutation::CheckpointBeforeFlush, "balances", Invariant::I19),
    (Mutation::QueryReadsUncommitted, "balances", Invariant::I20),
    (
        Mutation::StreamJoinPairsDropRight,
        "settlement",
        Invariant::I13,
    ),
    (
        Mutation::TableJoinResultDropsRight,
        "credit",
        Invariant::I13,
    ),
    (
        Mutation::ForeignKeyJoinResolvesFirstLeft,
        "order-labels",
        Invariant::I13,
    ),
    (
        Mutation::ForeignKeyRespondSendsPreviousRight,
        "order-labels",
        Invariant::I13,
    ),
    (
        Mutation::ForeignKeySubscribeKeepsOld,
        "order-labels",
        Invariant::I13,
    ),
];

/// A second shipped scenario that catches each planted bug, of another
/// shape than its row in [`PLANTED`], and the invariant that reports it
/// there: no bug is caught by one scenario alone, except those of
/// [`ONE_SHAPE_ONLY`].
pub const ALSO_PLANTED: [(Mutation, &str, Invariant); 48] = [
    (Mutation::GateIgnoresClaims, "regroup", Invariant::I1),
    (Mutation::StampingForgetsHeld, "enrichment", Invariant::I5),
    (Mutation::PositionsPastHeld, "chain", Invariant::I2),
    (Mutation::HistoryNotRestored, "timers", Invariant::I5),
    (Mutation::TickTimeNotRolledBack, "audit-cut", Invariant::I4),
    (Mutation::TickSlotIsNullSlot, "diamond", Invariant::I7),
    (Mutation::ConsumerNotRewound, "chain", Invariant::I2),
    (
        Mutation::EmissionsOutsideTransaction,
        "chain",
        Invariant::I7,
    ),
    (Mutation::TickOnPartitionZero, "chain", Invariant::I4),
    (Mutation::TickAtRecordTime, "chain", Invariant::I4),
    (Mutation::SharedGroup, "fan-out", Invariant::I15),
    (Mutation::DeadLetterDropsRecord, "bad-bytes", Invariant::I10),
    (Mutation::TimerFiresEarly, "sessions", Invariant::I11),
    (Mutation::TimerKeepsFired, "sessions", Invariant::I11),
    (Mutation::TimerDropsOddRequests, "sessions", Invariant::I11),
    (Mutation::TimerFireUnstamped, "sessions", Invariant::I5),
    (
        Mutation::CodecDeadLetterLosesValue,
        "storefront",
        Invariant::I10,
    ),
    (
        Mutation::WindowClosesOneIntervalEarly,
        "by-product",
        Invariant::I12,
    ),
    (Mutation::WindowGraceOffByOne, "storefront", Invariant::I12),
    (
        Mutation::SessionBridgeNotMerged,
        "storefront",
        Invariant::I12,
    ),
    (
        Mutation::SessionMergeKeepsLast,
        "storefront",
        Invariant::I12,
    ),
    (
        Mutation::WindowWrittenAtClosingRecord,
        "storefront",
        Invariant::I12,
    ),
    (
        Mutation::JoinIgnoresTombstones,
        "storefront",
        Invariant::I13,
    ),
    (Mutation::JoinKeepsStaleRow, "storefront", Invariant::I13),
    (Mutation::ExpiryHalfTtlEarly, "storefront", Invariant::I14),
    (Mutation::ExpiryNeverExpires, "storefront", Invariant::I14),
    (Mutation::RekeyDropsStamp, "storefront", Invariant::I5),
    (Mutation::RekeyOutputKeepsKey, "storefront", Invariant::I17),
    (
        Mutation::StreamJoinEmitsUnmatchedEarly,
        "storefront",
        Invariant::I13,
    ),
    (Mutation::TimerFiresOneMsEarly, "sessions", Invariant::I11),
    (Mutation::TimerSkipsExactDue, "sessions", Invariant::I11),
    (Mutation::TickOneMsEarly, "audit-cut", Invariant::I4),
    (Mutation::ExpiryOneMsEarly, "storefront", Invariant::I14),
    (
        Mutation::TimerLostWhenOverdueAtStart,
        "sessions",
        Invariant::I11,
    ),
    (
        Mutation::TableJoinSkipsTombstone,
        "storefront",
        Invariant::I13,
    ),
    (Mutation::DeadLetterKindSwapped, "bad-bytes", Invariant::I10),
    (
        Mutation::GateMatchesTopicOnly,
        "order-labels",
        Invariant::I8,
    ),
    (
        Mutation::ChangelogKeepsFirstChange,
        "by-product",
        Invariant::I6,
    ),
    (
        Mutation::VersionedGraceIgnored,
        "storefront",
        Invariant::I13,
    ),
    (Mutation::ViewReleasesEarly, "invoices", Invariant::I18),
    (Mutation::CutSkipsLane, "invoices", Invariant::I18),
    (
        Mutation::SyncIgnoresTimestamps,
        "settlement",
        Invariant::I16,
    ),
    (Mutation::SyncWaitEndsEarly, "enrichment", Invariant::I16),
    (Mutation::CheckpointKeeps16Tps, "branches", Invariant::I5),
    (Mutation::CheckpointBeforeFlush, "dedupe", Invariant::I19),
    (Mutation::QueryReadsUncommitted, "dedupe", Invariant::I20),
    (
        Mutation::StreamJoinPairsDropRight,
        "storefront",
        Invariant::I13,
    ),
    (
        Mutation::TableJoinResultDropsRight,
        "storefront",
        Invariant::I13,
    ),
];

/// The planted bugs only one shipped shape can reach, each with the
/// reason (also in the mutation's own docs).
pub const ONE_SHAPE_ONLY: [(Mutation, &str); 8] = [
    (
        Mutation::CheckpointTruncated,
        "only a task whose history passes Kafka's 4,096-byte offset metadata limit shows it: branches' forty long-named ledgers (regroup's 50 tps of two short names take about 400 bytes)",
    ),
    (
        Mutation::ForeignKeyJoinKeepsStaleResponse,
        "only a foreign-key join shows it: order-labels",
    ),
    (
        Mutation::VersionedJoinExcludesEqual,
        "only a versioned join shows it: as-of",
    ),
    (
        Mutation::VersionedJoinTakesLatest,
        "only a versioned join shows it: as-of",
    ),
    (
        Mutation::HoppingWindowSkipsStart,
        "only a hopping window shows it: windows' trend (the others' windows are tumbling or sessions)",
    ),
    (
        Mutation::ForeignKeyJoinResolvesFirstLeft,
        "only a foreign-key join shows it: order-labels",
    ),
    (
        Mutation::ForeignKeyRespondSendsPreviousRight,
        "only a foreign-key join shows it: order-labels",
    ),
    (
        Mutation::ForeignKeySubscribeKeepsOld,
        "only a foreign-key join shows it: order-labels",
    ),
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
            let second = ALSO_PLANTED
                .iter()
                .find(|(planted, _, _)| *planted == mutation);
            let alone = ONE_SHAPE_ONLY
                .iter()
                .any(|(planted, _)| *planted == mutation);
            assert!(
                second.is_some() != alone,
                "{mutation:?} needs a second scenario or a reason it has none, not both"
            );
            if let Some((_, scenario, _)) = second {
                let (_, first, _) = PLANTED
                    .iter()
                    .find(|(planted, _, _)| *planted == mutation)
                    .unwrap();
                assert_ne!(
                    first, scenario,
                    "{mutation:?}'s second scenario is its first"
                );
            }
        }
    }
}
