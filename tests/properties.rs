//! Property tests of the core: stamps form a join semilattice
//! (G1), the header codec is canonical and never panics (§8), and the gate
//! condition is monotone (G2, G3).
//!
//! Stamps and claims come from quickcheck `Arbitrary` newtypes over a small
//! universe (three topics, partitions below 4, offsets below 64) so that random
//! stamps share tps often enough for merging and dominance to be interesting.
//! The gate property drives a real task with a proptest strategy of causal
//! histories and schedules. Every property is named `prop_*`; inputs outside a
//! property's domain are discarded, never asserted on.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use proptest::prelude::*;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult, Testable};

use parsley::header::{self, STAMP_HEADER};
use parsley::{
    assemble, Claim, ConsumedRecord, Header, Parsley, Record, RecordData, Stage, Stamp, Task,
    TaskConfig, Topic, Tp,
};
use parsley::{Fetched, HeadStatus};

// ----- quickcheck values -----

/// The topic alphabet of arbitrary claims: small, so that claims collide.
const TOPICS: [&str; 3] = ["a", "b", "orders"];
/// Arbitrary partitions are below this.
const PARTITIONS: u32 = 4;
/// Arbitrary offsets are below this.
const OFFSETS: u64 = 64;
/// Arbitrary stamps have at most this many claims before merging per tp.
const CLAIMS_MAX: usize = 8;

/// How many cases each quickcheck property tries.
const QUICKCHECK_TESTS: u64 = 1_000;

fn quickcheck<A: Testable>(property: A) {
    QuickCheck::new()
        .tests(QUICKCHECK_TESTS)
        .max_tests(QUICKCHECK_TESTS * 20)
        // Properties that discard must still have tried enough cases.
        .min_tests_passed(QUICKCHECK_TESTS / 4)
        .quickcheck(property);
}

/// A claim on the small universe.
#[derive(Clone, Debug)]
struct ArbClaim(Claim);

impl Arbitrary for ArbClaim {
    fn arbitrary(g: &mut Gen) -> Self {
        let topic = *g.choose(&TOPICS).expect("the alphabet is not empty");
        let partition = u32::arbitrary(g) % PARTITIONS;
        let offset = u64::arbitrary(g) % OFFSETS;
        ArbClaim(Claim::new(Tp::new(topic, partition), offset))
    }

    /// Smaller offsets, then smaller partitions, then earlier topics.
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let claim = self.0.clone();
        let topic = TOPICS
            .iter()
            .position(|topic| *topic == claim.tp.topic.as_str())
            .unwrap_or(0);
        let mut smaller = Vec::new();
        for offset in [0, claim.offset / 2, claim.offset.saturating_sub(1)] {
            if offset < claim.offset {
                smaller.push((topic, claim.tp.partition, offset));
            }
        }
        if claim.tp.partition > 0 {
            smaller.push((topic, 0, claim.offset));
        }
        if topic > 0 {
            smaller.push((0, claim.tp.partition, claim.offset));
        }
        smaller.dedup();
        Box::new(smaller.into_iter().map(|(topic, partition, offset)| {
            ArbClaim(Claim::new(Tp::new(TOPICS[topic], partition), offset))
        }))
    }
}

/// A stamp of up to [`CLAIMS_MAX`] claims on the small universe.
#[derive(Clone, Debug)]
struct ArbStamp(Stamp);

impl Arbitrary for ArbStamp {
    fn arbitrary(g: &mut Gen) -> Self {
        let count = usize::arbitrary(g) % (CLAIMS_MAX + 1);
        ArbStamp(
            (0..count)
                .map(|_| ArbClaim::arbitrary(g).0)
                .collect::<Stamp>(),
        )
    }

    /// Shrinks the claim list: fewer claims, then smaller ones.
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let claims: Vec<ArbClaim> = self.0.claims().iter().cloned().map(ArbClaim).collect();
        Box::new(
            claims
                .shrink()
                .map(|claims| ArbStamp(claims.into_iter().map(|claim| claim.0).collect())),
        )
    }
}

/// Dominance written out per claim, as G1 states it: an oracle independent of
/// `Stamp::dominates`' merge walk.
fn dominates_per_tp(a: &Stamp, b: &Stamp) -> bool {
    b.claims().iter().all(|claim| {
        a.offset(&claim.tp)
            .is_some_and(|offset| offset >= claim.offset)
    })
}

// ----- G1: merge is a join -----

#[test]
fn prop_merge_is_commutative() {
    fn property(a: ArbStamp, b: ArbStamp) -> bool {
        a.0.merged(&b.0) == b.0.merged(&a.0)
    }
    quickcheck(property as fn(ArbStamp, ArbStamp) -> bool);
}

#[test]
fn prop_merge_is_associative() {
    fn property(a: ArbStamp, b: ArbStamp, c: ArbStamp) -> bool {
        let (a, b, c) = (a.0, b.0, c.0);
        a.merged(&b).merged(&c) == a.merged(&b.merged(&c))
    }
    quickcheck(property as fn(ArbStamp, ArbStamp, ArbStamp) -> bool);
}

#[test]
fn prop_merge_is_idempotent() {
    fn property(a: ArbStamp) -> bool {
        a.0.merged(&a.0) == a.0
    }
    quickcheck(property as fn(ArbStamp) -> bool);
}

/// The empty stamp ("no known causes") is the join's identity and the bottom
/// of dominance.
#[test]
fn prop_empty_stamp_is_the_bottom() {
    fn property(a: ArbStamp) -> bool {
        let empty = Stamp::empty();
        a.0.merged(&empty) == a.0 && empty.merged(&a.0) == a.0 && a.0.dominates(&empty)
    }
    quickcheck(property as fn(ArbStamp) -> bool);
}

/// Merging takes the larger offset per tp, and keeps every tp either side
/// claims, checked against a map oracle.
#[test]
fn prop_merge_takes_the_larger_offset_per_tp() {
    fn property(a: ArbStamp, b: ArbStamp) -> bool {
        let mut oracle: BTreeMap<Tp, u64> = BTreeMap::new();
        for claim in a.0.claims().iter().chain(b.0.claims()) {
            let offset = oracle.entry(claim.tp.clone()).or_insert(claim.offset);
            *offset = (*offset).max(claim.offset);
        }
        let merged = a.0.merged(&b.0);
        let expected: Vec<Claim> = oracle
            .into_iter()
            .map(|(tp, offset)| Claim::new(tp, offset))
            .collect();
        merged.claims() == expected.as_slice()
    }
    quickcheck(property as fn(ArbStamp, ArbStamp) -> bool);
}

// ----- G1: dominance is the partial order of the join -----

/// `a` dominates `b` exactly when merging `b` into `a` changes nothing.
#[test]
fn prop_dominates_is_consistent_with_merge() {
    fn property(a: ArbStamp, b: ArbStamp) -> bool {
        let (a, b) = (a.0, b.0);
        a.dominates(&b) == (a.merged(&b) == a)
            && a.dominates(&b) == dominates_per_tp(&a, &b)
            && a.merged(&b).dominates(&a)
            && a.merged(&b).dominates(&b)
    }
    quickcheck(property as fn(ArbStamp, ArbStamp) -> bool);
}

#[test]
fn prop_dominates_is_reflexive() {
    fn property(a: ArbStamp) -> bool {
        a.0.dominates(&a.0)
    }
    quickcheck(property as fn(ArbStamp) -> bool);
}

/// Two stamps that dominate each other are equal. Pairs that do not
/// dominate each other are outside the property's domain; the pair `(a, a ∨
/// b)` is offered too so that the domain is not empty.
#[test]
fn prop_dominates_is_antisymmetric() {
    fn property(a: ArbStamp, b: ArbStamp, join: bool) -> TestResult {
        let a = a.0;
        let b = if join { a.merged(&b.0) } else { b.0 };
        if !(a.dominates(&b) && b.dominates(&a)) {
            return TestResult::discard();
        }
        TestResult::from_bool(a == b)
    }
    quickcheck(property as fn(ArbStamp, ArbStamp, bool) -> TestResult);
}

/// Dominance is transitive. The chain `c ≤ c ∨ x ≤ c ∨ x ∨ y` is built so the
/// premise holds; arbitrary triples whose premise fails are discarded.
#[test]
fn prop_dominates_is_transitive() {
    fn property(c: ArbStamp, x: ArbStamp, y: ArbStamp, build_chain: bool) -> TestResult {
        let (a, b, c) = if build_chain {
            let b = c.0.merged(&x.0);
            (b.merged(&y.0), b, c.0)
        } else {
            (y.0, x.0, c.0)
        };
        if !(a.dominates(&b) && b.dominates(&c)) {
            return TestResult::discard();
        }
        TestResult::from_bool(a.dominates(&c))
    }
    quickcheck(property as fn(ArbStamp, ArbStamp, ArbStamp, bool) -> TestResult);
}

/// The join is the least upper bound: anything that dominates both sides
/// dominates their merge. Upper bounds are built as `a ∨ b ∨ x` and then
/// lowered on one claim, so that both bounds and non-bounds are tried; the
/// non-bounds are discarded.
#[test]
fn prop_merge_is_the_least_upper_bound() {
    fn property(a: ArbStamp, b: ArbStamp, x: ArbStamp, lower: Option<usize>) -> TestResult {
        let (a, b) = (a.0, b.0);
        let mut claims: Vec<Claim> = a.merged(&b).merged(&x.0).claims().to_vec();
        if let Some(index) = lower.filter(|_| !claims.is_empty()) {
            let index = index % claims.len();
            claims[index].offset = claims[index].offset.saturating_sub(1);
        }
        let upper = Stamp::from_claims(claims);
        if !(upper.dominates(&a) && upper.dominates(&b)) {
            return TestResult::discard();
        }
        TestResult::from_bool(upper.dominates(&a.merged(&b)))
    }
    quickcheck(property as fn(ArbStamp, ArbStamp, ArbStamp, Option<usize>) -> TestResult);
}

// ----- G1: claims -----

/// Adding one claim is merging the one-claim stamp, and the stamp then claims
/// at least that offset on that tp.
#[test]
fn prop_claim_is_merging_a_single_claim() {
    fn property(a: ArbStamp, claim: ArbClaim) -> bool {
        let (mut stamp, claim) = (a.0, claim.0);
        let expected = stamp.merged(&Stamp::from_claims([claim.clone()]));
        let before = stamp.offset(&claim.tp);
        stamp.claim(&claim.tp, claim.offset);
        stamp == expected
            && stamp.offset(&claim.tp) == Some(before.map_or(claim.offset, |o| o.max(claim.offset)))
    }
    quickcheck(property as fn(ArbStamp, ArbClaim) -> bool);
}

/// Claims in any order collapse to one per tp, the largest, sorted by tp.
#[test]
fn prop_from_claims_is_order_independent_and_canonical() {
    fn property(claims: Vec<ArbClaim>) -> bool {
        let claims: Vec<Claim> = claims.into_iter().map(|claim| claim.0).collect();
        let stamp = Stamp::from_claims(claims.clone());
        let reversed = Stamp::from_claims(claims.iter().rev().cloned());
        let sorted_unique = stamp
            .claims()
            .windows(2)
            .all(|pair| pair[0].tp < pair[1].tp);
        let largest = claims
            .iter()
            .all(|claim| stamp.offset(&claim.tp).is_some_and(|o| o >= claim.offset));
        let one_by_one = claims.iter().fold(Stamp::empty(), |mut acc, claim| {
            acc.claim(&claim.tp, claim.offset);
            acc
        });
        stamp == reversed && sorted_unique && largest && stamp == one_by_one
    }
    quickcheck(property as fn(Vec<ArbClaim>) -> bool);
}

// ----- the header codec (§8) -----

#[test]
fn prop_header_round_trips() {
    fn property(a: ArbStamp) -> bool {
        header::decode(&header::encode(&a.0)).as_ref() == Ok(&a.0)
    }
    quickcheck(property as fn(ArbStamp) -> bool);
}

/// The decoder never panics on arbitrary bytes, and whatever it accepts
/// re-encodes to the same bytes. A rejection is an answer, not a failure.
#[test]
fn prop_header_decode_never_panics_and_accepts_only_canonical_bytes() {
    fn property(bytes: Vec<u8>) -> bool {
        match header::decode(&bytes) {
            Ok(stamp) => header::encode(&stamp).as_ref() == bytes.as_slice(),
            Err(_) => true,
        }
    }
    quickcheck(property as fn(Vec<u8>) -> bool);
}

/// Arbitrary bytes rarely get past the version byte; a valid encoding with
/// one byte changed reaches every field of the decoder. Whatever it accepts
/// still re-encodes identically.
#[test]
fn prop_header_decode_of_a_mutated_encoding_is_canonical_or_refused() {
    fn property(a: ArbStamp, at: usize, byte: u8) -> bool {
        let mut bytes = header::encode(&a.0).to_vec();
        let at = at % bytes.len();
        bytes[at] = byte;
        match header::decode(&bytes) {
            Ok(stamp) => header::encode(&stamp).as_ref() == bytes.as_slice(),
            Err(_) => true,
        }
    }
    quickcheck(property as fn(ArbStamp, usize, u8) -> bool);
}

/// The encoding is self-delimiting: no proper prefix of a header decodes, and
/// no header with bytes appended does.
#[test]
fn prop_header_prefixes_and_extensions_are_refused() {
    fn property(a: ArbStamp, cut: usize, tail: Vec<u8>) -> TestResult {
        let bytes = header::encode(&a.0);
        let cut = cut % bytes.len();
        if header::decode(&bytes[..cut]).is_ok() {
            return TestResult::failed();
        }
        if tail.is_empty() {
            return TestResult::discard();
        }
        let mut extended = bytes.to_vec();
        extended.extend_from_slice(&tail);
        TestResult::from_bool(header::decode(&extended).is_err())
    }
    quickcheck(property as fn(ArbStamp, usize, Vec<u8>) -> TestResult);
}

// ----- G2, G3: the gate condition is monotone -----

/// The wall clock the gate tests start at.
const T0: i64 = 1_700_000_000_000;
const ORDERS: &str = "orders";
const PAYMENTS: &str = "payments";
const OUT: &str = "out";

/// A claim of a generated record, before it is placed in a history.
#[derive(Clone, Debug)]
enum ClaimPick {
    /// A record already appended to the other source tp (a cross-topic cause).
    Other(u8),
    /// An earlier record of the record's own tp.
    Own(u8),
    /// A tp the task does not consume: carried forward, never waited on.
    Elsewhere(u8),
}

/// One record of a generated history: which source tp it is appended to,
/// and what it claims.
#[derive(Clone, Debug)]
struct AppendPick {
    payments: bool,
    claims: Vec<ClaimPick>,
}

fn append_pick() -> impl Strategy<Value = AppendPick> {
    let claim = prop_oneof![
        3 => any::<u8>().prop_map(ClaimPick::Other),
        1 => any::<u8>().prop_map(ClaimPick::Own),
        1 => any::<u8>().prop_map(ClaimPick::Elsewhere),
    ];
    (any::<bool>(), prop::collection::vec(claim, 0..3))
        .prop_map(|(payments, claims)| AppendPick { payments, claims })
}

/// A history in the order records were appended, each claiming only records
/// appended before it: every stamp a real producer could have written (G6),
/// so every record can eventually be delivered.
fn history(appends: &[AppendPick], source_tps: &[Tp; 2]) -> [Vec<Stamp>; 2] {
    let mut logs: [Vec<Stamp>; 2] = [Vec::new(), Vec::new()];
    let elsewhere = [Tp::new("refunds", 0), Tp::new(ORDERS, 1)];
    for append in appends {
        let own = usize::from(append.payments);
        let other = 1 - own;
        let mut stamp = Stamp::empty();
        for claim in &append.claims {
            match *claim {
                ClaimPick::Other(pick) if !logs[other].is_empty() => {
                    let offset = u64::from(pick) % logs[other].len() as u64;
                    stamp.claim(&source_tps[other], offset);
                }
                ClaimPick::Own(pick) if !logs[own].is_empty() => {
                    let offset = u64::from(pick) % logs[own].len() as u64;
                    stamp.claim(&source_tps[own], offset);
                }
                ClaimPick::Elsewhere(pick) => {
                    stamp.claim(&elsewhere[usize::from(pick) % 2], u64::from(pick));
                }
                ClaimPick::Other(_) | ClaimPick::Own(_) => {}
            }
        }
        logs[own].push(stamp);
    }
    logs
}

/// A started task of stage `s`, which consumes partition 0 of `orders` and
/// `payments` and echoes every record to `out`.
fn echo_task() -> Task {
    let orders: Topic<String, i64> = Topic::new(ORDERS);
    let payments: Topic<String, i64> = Topic::new(PAYMENTS);
    let out: Topic<String, String> = Topic::new(OUT);
    let (to_out, to_out_too) = (out.clone(), out.clone());
    let stage = Stage::named("s")
        .on(&orders, move |record: &Record<String, i64>| {
            vec![to_out.send(None, format!("{}@{}", record.topic(), record.offset()))]
        })
        .on(&payments, move |record: &Record<String, i64>| {
            vec![to_out_too.send(None, format!("{}@{}", record.topic(), record.offset()))]
        })
        .into(&out)
        .build();
    let app = Parsley::named("app")
        .stage(stage)
        .build()
        .expect("the echo app composes");
    let metadata: BTreeMap<String, u32> = [(ORDERS, 1), (PAYMENTS, 1), (OUT, 1)]
        .into_iter()
        .map(|(topic, partitions)| (topic.to_string(), partitions))
        .collect();
    let assembly = assemble(&app, &metadata).expect("the cluster has every topic");
    let mut task = Task::new(&app, &assembly, "s", 0, TaskConfig::default()).expect("task s-0");
    let nothing = vec![None; task.consumed_tps().len()];
    task.start(&nothing, T0).expect("the task starts");
    task
}

fn consumed(offset: u64, stamp: &Stamp) -> ConsumedRecord {
    ConsumedRecord {
        offset,
        data: RecordData {
            key: None,
            value: Some(Bytes::from_static(b"1")),
            headers: vec![Header {
                name: STAMP_HEADER.into(),
                value: header::encode(stamp),
            }],
            timestamp: T0 + offset as i64,
        },
    }
}

/// Whether the task has delivered up to `claim.offset` of a consumed tp.
fn resolved(task: &Task, claim: &Claim) -> bool {
    task.position(&claim.tp)
        .is_some_and(|position| position > claim.offset)
}

/// Every claim on a consumed tp of every record in the history, resolved now.
fn resolved_claims(task: &Task, logs: &[Vec<Stamp>; 2]) -> BTreeSet<Claim> {
    logs.iter()
        .flatten()
        .flat_map(|stamp| stamp.claims().iter())
        .filter(|claim| resolved(task, claim))
        .cloned()
        .collect()
}

/// The heads the task may deliver now, by tp, with their offsets.
fn deliverable_heads(task: &Task) -> BTreeMap<Tp, u64> {
    task.heads()
        .into_iter()
        .filter(|(_, _, status)| *status == HeadStatus::Deliverable)
        .map(|(tp, offset, _)| (tp, offset))
        .collect()
}

proptest! {
    // No failure file: a shrunk counterexample is printed; pin it as a
    // named test.
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// G2 is monotone. A task consumes two source tps whose records claim
    /// each other (and tps it does not consume); the schedule fetches them
    /// in chunks and delivers deliverable heads in some order. After every
    /// step: a head that was deliverable is still the head of its lane and
    /// still deliverable (unless it was the one delivered), a claim that was
    /// resolved stays resolved, a head's status agrees with the positions
    /// (deliverable exactly when every claim on a consumed tp is resolved,
    /// held on an unresolved one), and every emission dominates the stamp of
    /// the record delivered plus a claim on it (G5). Since the history is
    /// causal, the schedule ends with everything delivered.
    #[test]
    fn prop_gate_condition_is_monotone(
        appends in prop::collection::vec(append_pick(), 1..14),
        schedule in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut task = echo_task();
        let source_tps = [Tp::new(ORDERS, 0), Tp::new(PAYMENTS, 0)];
        prop_assert_eq!(task.consumed_tps(), source_tps.to_vec());
        let logs = history(&appends, &source_tps);
        let total: usize = logs.iter().map(Vec::len).sum();
        let mut fetched = [0usize; 2];
        let mut delivered = 0usize;
        let mut choices = schedule.into_iter();
        // A driver's buffers, kept from step to step.
        let (mut ready, mut fetch_buffer, mut produced) = (Vec::new(), Fetched::default(), Vec::new());
        // Each step fetches at least one record or delivers one.
        for _ in 0..2 * total {
            if delivered == total {
                break;
            }
            task.deliverable(0, &mut ready).expect("a causal history has no poison");
            let before = deliverable_heads(&task);
            prop_assert_eq!(ready.iter().cloned().collect::<BTreeSet<_>>(),
                before.keys().cloned().collect::<BTreeSet<_>>());
            let resolved_before = resolved_claims(&task, &logs);

            // The options: fetch the next chunk of a tp, or deliver a head.
            let mut options: Vec<(bool, usize)> = Vec::new();
            for lane in 0..2 {
                if fetched[lane] < logs[lane].len() {
                    options.push((true, lane));
                }
            }
            for tp in &ready {
                let lane = source_tps.iter().position(|source| source == tp).expect("a source tp");
                options.push((false, lane));
            }
            prop_assert!(!options.is_empty(), "stalled with {} of {} delivered", delivered, total);
            let choice = usize::from(choices.next().unwrap_or(0));
            let (fetch, lane) = options[choice % options.len()];
            let tp = &source_tps[lane];
            if fetch {
                let chunk = 1 + choice / options.len() % 3;
                let end = (fetched[lane] + chunk).min(logs[lane].len());
                fetch_buffer.records.extend((fetched[lane]..end)
                    .map(|offset| consumed(offset as u64, &logs[lane][offset])));
                fetch_buffer.next_offset = end as u64;
                fetch_buffer.log_end = logs[lane].len() as u64;
                task.handle_fetched(tp, &mut fetch_buffer);
                fetched[lane] = end;
            } else {
                let offset = task.position(tp).expect("a consumed tp");
                let stamp = &logs[lane][offset as usize];
                // G2 at the moment of delivery.
                for claim in stamp.claims() {
                    prop_assert!(
                        task.position(&claim.tp).is_none() || resolved(&task, claim),
                        "{}@{} is deliverable with {} unresolved", tp, offset, claim
                    );
                }
                produced.clear();
                task.deliver(tp, &mut produced).expect("the delivery succeeds");
                let mut caused = stamp.clone();
                caused.claim(tp, offset);
                for record in &produced {
                    let bytes = record.data.header(STAMP_HEADER).expect("emissions are stamped");
                    let emitted = header::decode(bytes).expect("the stamp decodes");
                    prop_assert!(emitted.dominates(&caused), "G5: {:?} does not dominate {:?}", emitted, caused);
                }
                delivered += 1;
            }

            // Monotone: nothing deliverable became held, nothing resolved
            // became unresolved.
            let after = deliverable_heads(&task);
            for (head_tp, head_offset) in &before {
                if !fetch && head_tp == tp {
                    continue;
                }
                prop_assert_eq!(after.get(head_tp), Some(head_offset),
                    "{}@{} was deliverable and is not after {} {}", head_tp, head_offset,
                    if fetch { "fetching" } else { "delivering" }, tp);
            }
            let resolved_after = resolved_claims(&task, &logs);
            prop_assert!(resolved_before.is_subset(&resolved_after),
                "resolved claims were lost: {:?}",
                resolved_before.difference(&resolved_after).collect::<Vec<_>>());

            // Every head's status agrees with the positions.
            for (head_tp, head_offset, status) in task.heads() {
                let lane = source_tps.iter().position(|source| *source == head_tp).expect("a source tp");
                let stamp = &logs[lane][head_offset as usize];
                let unresolved: Vec<&Claim> = stamp.claims().iter()
                    .filter(|claim| task.position(&claim.tp).is_some() && !resolved(&task, claim))
                    .collect();
                match status {
                    HeadStatus::Deliverable => prop_assert!(unresolved.is_empty(),
                        "{}@{} is deliverable with {:?} unresolved", head_tp, head_offset, unresolved),
                    HeadStatus::Held(claim) => prop_assert!(unresolved.contains(&&claim),
                        "{}@{} is held on {} which is not unresolved", head_tp, head_offset, claim),
                    HeadStatus::Poison(poison) => prop_assert!(false,
                        "{}@{} is poison in a causal history: {:?}", head_tp, head_offset, poison),
                }
            }
        }
        prop_assert_eq!(delivered, total, "every record of a causal history is delivered");
    }
}
