//! Stamps and claims (G1).
//!
//! A *claim* `(tp, offset)` says that the record at `offset` of `tp` — and so
//! every earlier offset of that tp — is a cause of the record carrying it. A
//! *stamp* is a set of claims with at most one claim per tp: two claims on one tp
//! collapse to the larger offset, because the larger one already implies the
//! smaller. Stamps therefore form a join semilattice under [`Stamp::merge`], with
//! the empty stamp ("no known causes") as its bottom.

use std::fmt;

use crate::tp::Tp;

/// The record at `offset` of `tp` (and every earlier offset of it) is a cause.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Claim {
    /// The claimed tp.
    pub tp: Tp,
    /// The claimed offset: it and every earlier offset of the tp are causes.
    pub offset: u64,
}

impl Claim {
    /// A claim on `offset` of `tp`.
    pub fn new(tp: Tp, offset: u64) -> Self {
        Claim { tp, offset }
    }
}

impl fmt::Debug for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.tp, self.offset)
    }
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A set of claims, at most one per tp, kept sorted by tp so that merging and
/// comparing are linear and the encoding is canonical.
#[derive(Default, PartialEq, Eq, Hash)]
pub struct Stamp {
    claims: Vec<Claim>,
}

impl Clone for Stamp {
    fn clone(&self) -> Self {
        Stamp {
            claims: self.claims.clone(),
        }
    }

    // A task snapshots its history at every commit: reuse the buffer.
    fn clone_from(&mut self, source: &Self) {
        self.claims.clone_from(&source.claims);
    }
}

impl Stamp {
    /// The empty stamp: no known causes.
    pub fn empty() -> Self {
        Stamp::default()
    }

    /// Builds a stamp from claims in any order; claims on one tp merge to the
    /// largest offset.
    pub fn from_claims(claims: impl IntoIterator<Item = Claim>) -> Self {
        let mut claims: Vec<Claim> = claims.into_iter().collect();
        claims.sort_unstable_by(|a, b| a.tp.cmp(&b.tp).then(b.offset.cmp(&a.offset)));
        // After sorting by tp with the largest offset first, keep the first of each tp.
        claims.dedup_by(|later, kept| later.tp == kept.tp);
        Stamp { claims }
    }

    /// Wraps claims that are already sorted by tp with no tp repeated, as the
    /// header decoder produces them.
    pub(crate) fn from_sorted_unique(claims: Vec<Claim>) -> Self {
        debug_assert!(
            claims.windows(2).all(|pair| pair[0].tp < pair[1].tp),
            "claims must be sorted by tp and unique per tp"
        );
        Stamp { claims }
    }

    /// The claims, sorted by tp.
    pub fn claims(&self) -> &[Claim] {
        &self.claims
    }

    /// Whether the stamp claims nothing.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// How many tps the stamp claims.
    pub fn len(&self) -> usize {
        self.claims.len()
    }

    /// The offset this stamp claims on `tp`, if any.
    pub fn offset(&self, tp: &Tp) -> Option<u64> {
        self.claims
            .binary_search_by(|claim| claim.tp.cmp(tp))
            .ok()
            .map(|index| self.claims[index].offset)
    }

    /// Adds one claim, keeping the larger offset if `tp` is already claimed.
    pub fn claim(&mut self, tp: &Tp, offset: u64) {
        match self.claims.binary_search_by(|claim| claim.tp.cmp(tp)) {
            Ok(index) => {
                let existing = &mut self.claims[index].offset;
                *existing = (*existing).max(offset);
            }
            Err(index) => self.claims.insert(index, Claim::new(tp.clone(), offset)),
        }
    }

    /// The join: per tp, the larger offset of the two stamps.
    pub fn merge(&mut self, other: &Stamp) {
        if other.claims.is_empty() {
            return;
        }
        if self.claims.is_empty() {
            self.claims.clone_from(&other.claims);
            return;
        }
        // The common case on the hot path: `other` adds nothing new.
        if self.dominates(other) {
            return;
        }
        let mut merged = Vec::with_capacity(self.claims.len() + other.claims.len());
        let (mut mine, mut theirs) = (
            self.claims.iter().peekable(),
            other.claims.iter().peekable(),
        );
        loop {
            match (mine.peek(), theirs.peek()) {
                (Some(a), Some(b)) => match a.tp.cmp(&b.tp) {
                    std::cmp::Ordering::Less => merged.push(mine.next().unwrap().clone()),
                    std::cmp::Ordering::Greater => merged.push(theirs.next().unwrap().clone()),
                    std::cmp::Ordering::Equal => {
                        let offset = a.offset.max(b.offset);
                        merged.push(Claim::new(a.tp.clone(), offset));
                        mine.next();
                        theirs.next();
                    }
                },
                (Some(_), None) => merged.extend(mine.by_ref().cloned()),
                (None, Some(_)) => merged.extend(theirs.by_ref().cloned()),
                (None, None) => break,
            }
        }
        self.claims = merged;
    }

    /// The join as a new stamp.
    pub fn merged(&self, other: &Stamp) -> Stamp {
        let mut result = self.clone();
        result.merge(other);
        result
    }

    /// True when this stamp claims at least as much as `other` on every tp.
    pub fn dominates(&self, other: &Stamp) -> bool {
        let mut mine = self.claims.iter();
        'outer: for theirs in &other.claims {
            for claim in mine.by_ref() {
                match claim.tp.cmp(&theirs.tp) {
                    std::cmp::Ordering::Less => continue,
                    std::cmp::Ordering::Equal if claim.offset >= theirs.offset => continue 'outer,
                    _ => return false,
                }
            }
            return false;
        }
        true
    }

    /// This stamp without claims on `topic` (G8: claims on a stage's own tick
    /// topic matter only to that stage).
    pub fn without_topic(&self, topic: &crate::tp::TopicName) -> Stamp {
        Stamp {
            claims: self
                .claims
                .iter()
                .filter(|claim| !claim.tp.topic.same(topic))
                .cloned()
                .collect(),
        }
    }
}

impl fmt::Debug for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (index, claim) in self.claims.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{claim}")?;
        }
        f.write_str("}")
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl FromIterator<Claim> for Stamp {
    fn from_iter<I: IntoIterator<Item = Claim>>(iter: I) -> Self {
        Stamp::from_claims(iter)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tp(topic: &str, partition: u32) -> Tp {
        Tp::new(topic, partition)
    }

    fn stamp(claims: &[(&str, u32, u64)]) -> Stamp {
        claims
            .iter()
            .map(|&(topic, partition, offset)| Claim::new(tp(topic, partition), offset))
            .collect()
    }

    /// Claims and stamps print as `tp@offset`, sorted, in braces: the form
    /// every error and report uses.
    #[test]
    fn claims_and_stamps_print_sorted_as_tp_at_offset() {
        let claim = Claim::new(tp("orders", 3), 12);
        assert_eq!(format!("{claim}"), "orders-3@12");
        assert_eq!(format!("{claim:?}"), "orders-3@12");
        let two = stamp(&[("orders", 1, 9), ("audits", 0, 1)]);
        assert_eq!(format!("{two}"), "{audits-0@1, orders-1@9}");
        assert_eq!(format!("{two:?}"), "{audits-0@1, orders-1@9}");
        assert_eq!(format!("{}", Stamp::empty()), "{}");
        let one = stamp(&[("orders", 1, 9)]);
        assert_eq!(format!("{one}"), "{orders-1@9}");
        assert!(Stamp::empty().is_empty() && !one.is_empty());
    }

    /// G8: a stamp can drop the claims on one topic (a stage's own tick
    /// topic, say) and keeps the rest.
    #[test]
    fn g8_without_topic_drops_that_topic_only() {
        let ticks = crate::tp::TopicName::new("app-s-ticks");
        let mixed = stamp(&[("app-s-ticks", 0, 4), ("orders", 0, 7), ("orders", 1, 2)]);
        assert_eq!(
            mixed.without_topic(&ticks),
            stamp(&[("orders", 0, 7), ("orders", 1, 2)])
        );
        assert_eq!(
            mixed.without_topic(&crate::tp::TopicName::new("elsewhere")),
            mixed
        );
    }

    /// G1: merging takes the larger offset per tp.
    #[test]
    fn g1_merge_takes_larger_offset_per_tp() {
        let a = stamp(&[("orders", 0, 4), ("orders", 1, 9)]);
        let b = stamp(&[("orders", 0, 7), ("audits", 0, 1)]);
        assert_eq!(
            a.merged(&b),
            stamp(&[("audits", 0, 1), ("orders", 0, 7), ("orders", 1, 9)])
        );
    }

    /// G1: a stamp dominates another when it is at least as large on every tp,
    /// and the empty stamp is dominated by every stamp.
    #[test]
    fn g1_dominates_is_per_tp() {
        let big = stamp(&[("orders", 0, 7), ("orders", 1, 9)]);
        assert!(big.dominates(&stamp(&[("orders", 0, 7)])));
        assert!(big.dominates(&Stamp::empty()));
        assert!(!big.dominates(&stamp(&[("orders", 0, 8)])));
        assert!(!big.dominates(&stamp(&[("audits", 0, 0)])));
        assert!(!Stamp::empty().dominates(&big));
    }

    /// G1: claims on one tp collapse to the largest offset.
    #[test]
    fn g1_one_claim_per_tp() {
        let s = stamp(&[("t", 0, 3), ("t", 0, 9), ("t", 0, 1)]);
        assert_eq!(s.len(), 1);
        assert_eq!(s.offset(&tp("t", 0)), Some(9));
    }

    pub(crate) fn arb_stamp() -> impl Strategy<Value = Stamp> {
        prop::collection::vec(
            (
                prop::sample::select(vec!["a", "b", "orders"]),
                0u32..4,
                0u64..50,
            ),
            0..8,
        )
        .prop_map(|claims| {
            claims
                .into_iter()
                .map(|(topic, partition, offset)| Claim::new(Tp::new(topic, partition), offset))
                .collect()
        })
    }

    proptest! {
        /// G1: merge is a join: commutative, associative, idempotent, and its
        /// result dominates both sides.
        #[test]
        fn prop_g1_merge_is_a_join(a in arb_stamp(), b in arb_stamp(), c in arb_stamp()) {
            prop_assert_eq!(a.merged(&b), b.merged(&a));
            prop_assert_eq!(a.merged(&b).merged(&c), a.merged(&b.merged(&c)));
            prop_assert_eq!(a.merged(&a), a.clone());
            let joined = a.merged(&b);
            prop_assert!(joined.dominates(&a) && joined.dominates(&b));
            prop_assert_eq!(a.dominates(&b), a.merged(&b) == a);
        }
    }
}
