//! The bounded exhaustive mode (`Simulation::explore`) on the example
//! topologies: clean on the unplanted core within the bounds it prints, and
//! every planted core bug found on the smallest topology that shows it.
//! Figures: BENCHMARKS.md, "Bounded exhaustive mode".

mod shipped;

use parsley::mutation::Mutation;
use parsley_examples::planted::PLANTED;
use parsley_sim::sim::{Bounds, FaultKind, Invariant};

/// The bound of every row unless it says otherwise: two inputs on one
/// partition and one instance, one abort or crash, eight steps.
fn tiny(steps: u64) -> Bounds {
    Bounds {
        steps,
        ..Bounds::default()
    }
}

/// `bounds` over two partitions and two keys.
fn two_partitions(bounds: Bounds) -> Bounds {
    Bounds {
        partitions: 2,
        keys: 2,
        ..bounds
    }
}

/// `bounds` with one input record its logic refuses among the faults.
fn with_rejected(mut bounds: Bounds) -> Bounds {
    bounds.kinds.push(FaultKind::LogicError);
    bounds
}

/// Each planted core bug the exhaustive mode finds, on the smallest
/// shipped topology that shows it, with its bound and the invariant that
/// reports it there (where the tiny world shows a bug first by another
/// invariant than the shipped scenario does, the row says which).
fn found() -> Vec<(Mutation, &'static str, Bounds, Invariant)> {
    use Mutation::*;
    vec![
        (GateIgnoresClaims, "fan-in", tiny(8), Invariant::I1),
        (StampingForgetsHeld, "fan-in", tiny(8), Invariant::I5),
        (PositionsPastHeld, "balances", tiny(8), Invariant::I2),
        (HistoryNotRestored, "balances", tiny(8), Invariant::I5),
        (TickSlotIsNullSlot, "audit-cut", tiny(8), Invariant::I6),
        (ConsumerNotRewound, "balances", tiny(8), Invariant::I2),
        (
            EmissionsOutsideTransaction,
            "balances",
            tiny(8),
            Invariant::I7,
        ),
        (
            TickOnPartitionZero,
            "balances",
            two_partitions(tiny(8)),
            Invariant::I4,
        ),
        (TickAtRecordTime, "balances", tiny(8), Invariant::I4),
        // Two stages in one group: named by the group offsets the first
        // commit leaves (I15).
        (
            SharedGroup,
            "diamond",
            two_partitions(tiny(8)),
            Invariant::I15,
        ),
        (
            DeadLetterDropsRecord,
            "dead-letter",
            with_rejected(tiny(8)),
            Invariant::I10,
        ),
        (TimerFiresEarly, "timers", tiny(8), Invariant::I11),
        (TimerKeepsFired, "timers", tiny(8), Invariant::I11),
        // The dropped request is missing from the committed state (I6)
        // before its fire is missed.
        (TimerDropsOddRequests, "timers", tiny(8), Invariant::I6),
        (TimerFireUnstamped, "timers", tiny(8), Invariant::I5),
        (
            GateMatchesTopicOnly,
            "regroup",
            two_partitions(tiny(8)),
            Invariant::I8,
        ),
        (
            CodecDeadLetterLosesValue,
            "bad-bytes",
            with_rejected(tiny(8)),
            Invariant::I10,
        ),
        (
            WindowClosesOneIntervalEarly,
            "windows",
            tiny(8),
            Invariant::I12,
        ),
        (WindowGraceOffByOne, "windows", tiny(8), Invariant::I12),
        (ExpiryHalfTtlEarly, "dedupe", tiny(8), Invariant::I14),
        (ExpiryNeverExpires, "dedupe", tiny(8), Invariant::I14),
        (RekeyDropsStamp, "by-product", tiny(8), Invariant::I5),
        (
            StreamJoinEmitsUnmatchedEarly,
            "settlement",
            tiny(8),
            Invariant::I13,
        ),
        (TimerSkipsExactDue, "timers", tiny(8), Invariant::I11),
        (TickOneMsEarly, "balances", tiny(8), Invariant::I4),
        (ExpiryOneMsEarly, "dedupe", tiny(8), Invariant::I14),
        (
            TimerLostWhenOverdueAtStart,
            "timers",
            tiny(8),
            Invariant::I11,
        ),
        (TableJoinSkipsTombstone, "credit", tiny(8), Invariant::I13),
        (
            SyncIgnoresTimestamps,
            "enrichment",
            Bounds {
                inputs: 3,
                ..tiny(8)
            },
            Invariant::I16,
        ),
        (
            JoinIgnoresTombstones,
            "enrichment",
            Bounds {
                inputs: 3,
                ..tiny(8)
            },
            Invariant::I13,
        ),
        (
            JoinKeepsStaleRow,
            "enrichment",
            Bounds {
                inputs: 3,
                range_ends: true,
                ..tiny(8)
            },
            Invariant::I13,
        ),
        (TickTimeNotRolledBack, "balances", tiny(8), Invariant::I4),
    ]
}

/// The planted core bugs the exhaustive mode does not find within a bound
/// CI can afford, and why (the seeded scenarios catch each: `simulator.rs`).
const NOT_FOUND: [(Mutation, &str); 3] = [
    (
        Mutation::CheckpointKeeps16Tps,
        "a checkpoint cut at 16 tps shows only in a task whose history spans 17 tps or more \
         (the regroup scenario's 24 partitions): far beyond an exhaustive bound",
    ),
    (
        Mutation::SessionBridgeNotMerged,
        "a bridge needs two sessions apart by more than the gap and a third record between \
         them, each produced at its own time: 3 inputs and about 12 steps (not found in \
         150,000 runs of 3 inputs and 8 steps)",
    ),
    (
        Mutation::TimerFiresOneMsEarly,
        "needs a tick due, and polled, at exactly the millisecond before a timer's due time, \
         a tick interval after the request: more than 8 steps (not found in 1,000,000 runs \
         of 2 inputs and 8 steps, 167 s)",
    ),
];

#[test]
fn every_planted_bug_is_found_or_said_to_need_a_bigger_shape() {
    let found = found();
    for (planted, _, _) in PLANTED {
        let rows = found.iter().filter(|row| row.0 == planted).count()
            + NOT_FOUND.iter().filter(|row| row.0 == planted).count();
        assert_eq!(rows, 1, "{} needs one row, found or not", planted.name());
    }
}

#[test]
fn every_planted_core_bug_is_found_within_its_bound() {
    for (planted, topology, bounds, invariant) in found() {
        let simulation = shipped::planted(&shipped::scenario(topology), Some(planted));
        let exploration = simulation.explore(&bounds);
        eprintln!("{} on {topology}: {exploration}", planted.name());
        let violation = exploration
            .violation
            .as_ref()
            .unwrap_or_else(|| panic!("{} on {topology}: {exploration}", planted.name()));
        assert!(
            violation
                .violations
                .iter()
                .any(|violation| violation.invariant == invariant),
            "{} on {topology} is not reported by {invariant}: {exploration}",
            planted.name()
        );
    }
}

/// The unplanted core within the bounds the test prints: every schedule
/// explored, none violating, the same counts on every run.
#[test]
fn the_unplanted_core_is_clean_within_the_bound() {
    for topology in ["chain", "balances"] {
        let simulation = shipped::shipped(topology);
        let bounds = tiny(6);
        let exploration = simulation.explore(&bounds);
        eprintln!("{topology}: {exploration}");
        assert!(exploration.clean(), "{topology}: {exploration}");
        assert!(exploration.schedules > 1_000 && exploration.states > 1_000);
        assert!(exploration
            .to_string()
            .starts_with("no violation within the bound (2 inputs over 1 partition"));
    }
}

#[test]
fn an_exploration_is_deterministic_and_its_tape_replays() {
    let simulation = shipped::planted(
        &shipped::scenario("balances"),
        Some(Mutation::PositionsPastHeld),
    );
    let bounds = tiny(8);
    let first = simulation.explore(&bounds);
    let second = simulation.explore(&bounds);
    assert_eq!(
        (first.schedules, first.cut, first.states),
        (second.schedules, second.cut, second.states)
    );
    let violation = first.violation.expect("positions-past-held is found");
    let replayed = simulation.within(&bounds).run_tape(&violation.tape);
    assert_eq!(replayed.trace_hash, violation.trace_hash);
    assert_eq!(
        replayed.violations.first().map(|v| v.invariant),
        Some(Invariant::I2)
    );
}

#[test]
fn a_cap_on_the_runs_is_no_verdict() {
    let simulation = shipped::shipped("balances");
    let exploration = simulation.explore(&Bounds {
        runs_max: 50,
        ..tiny(8)
    });
    assert!(!exploration.exhausted && !exploration.clean());
    assert_eq!(exploration.schedules + exploration.cut, 50);
    assert!(
        exploration.to_string().contains("was not exhausted"),
        "{exploration}"
    );
}
