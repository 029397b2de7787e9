//! Two transactional producers and one plain producer interleave at random
//! over two partitions, with fencing, timeouts and zombie calls. An oracle
//! tracks the fate of every offset independently of the model, and after
//! every step the model must agree: offsets consecutive, the LSO at the
//! earliest open record, `read_committed` never returning an aborted or
//! open record or one at/after the LSO, and never skipping a committed one.

use parsley::Tp;
use proptest::prelude::*;

use super::fixtures::*;
use crate::model::*;

const TIMEOUT_MS: i64 = 50_000;
const PARTITIONS: u32 = 2;

#[derive(Clone, Debug)]
enum Op {
    Begin(usize),
    Send(usize, u32),
    Commit(usize),
    Abort(usize),
    Append(u32),
    Reinit(usize),
    Zombie(usize, u32),
    Tick(i64),
    Fetch(u32, u64, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..2usize;
    let part = 0..PARTITIONS;
    prop_oneof![
        3 => p.clone().prop_map(Op::Begin),
        6 => (p.clone(), part.clone()).prop_map(|(p, k)| Op::Send(p, k)),
        2 => p.clone().prop_map(Op::Commit),
        2 => p.clone().prop_map(Op::Abort),
        3 => part.clone().prop_map(Op::Append),
        1 => p.clone().prop_map(Op::Reinit),
        1 => (p, part.clone()).prop_map(|(p, k)| Op::Zombie(p, k)),
        1 => (0..40_000i64).prop_map(Op::Tick),
        3 => (part, any::<u64>(), 0..5usize).prop_map(|(k, f, m)| Op::Fetch(k, f, m)),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Committed,
    Open(usize),
    Aborted,
    Marker(ControlKind),
}

struct Oracle {
    fates: Vec<Vec<Fate>>,
    handles: [ProducerId; 2],
    stale: [Option<ProducerId>; 2],
    fenced: [bool; 2],
    started: [Option<i64>; 2],
    now: i64,
}

impl Oracle {
    fn end(&mut self, p: usize, kind: ControlKind) {
        for fates in &mut self.fates {
            let mut wrote = false;
            for fate in fates.iter_mut() {
                if *fate == Fate::Open(p) {
                    wrote = true;
                    *fate = match kind {
                        ControlKind::Commit => Fate::Committed,
                        ControlKind::Abort => Fate::Aborted,
                    };
                }
            }
            if wrote {
                fates.push(Fate::Marker(kind));
            }
        }
        self.started[p] = None;
    }

    /// What a call by producer `p`'s current handle must fail with, if
    /// anything, before it looks at the transaction.
    fn fencing(&self, p: usize) -> Option<ModelError> {
        self.fenced[p].then(|| ModelError::Fenced {
            transactional_id: name(p),
            epoch: self.handles[p].epoch,
            current_epoch: self.handles[p].epoch + 1,
        })
    }

    fn no_txn(&self, p: usize) -> Option<ModelError> {
        self.fencing(p).or_else(|| {
            self.started[p]
                .is_none()
                .then(|| ModelError::NoOpenTransaction {
                    transactional_id: name(p),
                })
        })
    }
}

fn name(p: usize) -> String {
    format!("txn-{p}")
}

fn expect_unit(result: Result<(), ModelError>, expected: Option<ModelError>) {
    match expected {
        Some(err) => assert_eq!(result, Err(err)),
        None => assert_eq!(result, Ok(())),
    }
}

fn check(c: &Cluster, o: &Oracle) {
    for k in 0..PARTITIONS {
        let t = Tp::new("t", k);
        let fates = &o.fates[k as usize];
        let entries = c.entries(&t).unwrap();
        assert_eq!(entries.len(), fates.len(), "offsets are consecutive");
        assert_eq!(c.high_watermark(&t).unwrap(), fates.len() as u64);
        for (entry, fate) in entries.iter().zip(fates) {
            match (entry, fate) {
                (Entry::Control { kind, .. }, Fate::Marker(expected)) => {
                    assert_eq!(kind, expected)
                }
                (Entry::Data { .. }, Fate::Committed | Fate::Open(_) | Fate::Aborted) => {}
                other => panic!("entry and fate disagree: {other:?}"),
            }
        }
        let lso = fates
            .iter()
            .position(|f| matches!(f, Fate::Open(_)))
            .unwrap_or(fates.len()) as u64;
        assert_eq!(c.last_stable_offset(&t).unwrap(), lso);

        let f = c
            .fetch(&t, 0, usize::MAX, Isolation::ReadCommitted)
            .unwrap();
        let visible: Vec<u64> = (0..lso)
            .filter(|&o| fates[o as usize] == Fate::Committed)
            .collect();
        let got: Vec<u64> = f.records.iter().map(|r| r.offset).collect();
        assert_eq!(
            got, visible,
            "read_committed returns exactly the committed records below the LSO"
        );
        assert_eq!(f.next_offset, lso);

        let f = c
            .fetch(&t, 0, usize::MAX, Isolation::ReadUncommitted)
            .unwrap();
        let data: Vec<u64> = (0..fates.len() as u64)
            .filter(|&o| !matches!(fates[o as usize], Fate::Marker(_)))
            .collect();
        let got: Vec<u64> = f.records.iter().map(|r| r.offset).collect();
        assert_eq!(got, data);
    }
    let open: Vec<String> = (0..2)
        .filter(|&p| o.started[p].is_some())
        .map(name)
        .collect();
    assert_eq!(c.open_transactions(), open);
}

fn partial_fetch(c: &Cluster, o: &Oracle, k: u32, from_seed: u64, max: usize) {
    let t = Tp::new("t", k);
    let fates = &o.fates[k as usize];
    let hw = fates.len() as u64;
    let from = from_seed % (hw + 1);
    let f = c.fetch(&t, from, max, Isolation::ReadCommitted).unwrap();
    let lso = f.last_stable_offset;
    assert!(f.records.len() <= max);
    assert!(f.next_offset >= from);
    assert!(f.next_offset <= lso.max(from));
    let got: Vec<u64> = f.records.iter().map(|r| r.offset).collect();
    for &offset in &got {
        assert!(
            offset >= from && offset < lso,
            "offset {offset} outside [{from}, {lso})"
        );
        assert_eq!(fates[offset as usize], Fate::Committed, "offset {offset}");
    }
    // No committed record in [from, next_offset) was skipped.
    let expected: Vec<u64> = (from..f.next_offset)
        .filter(|&o| fates[o as usize] == Fate::Committed)
        .collect();
    assert_eq!(got, expected);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn read_committed_never_sees_aborted_or_unstable_records(
        ops in proptest::collection::vec(op(), 1..80)
    ) {
        let mut c = Cluster::with_transaction_timeout(TIMEOUT_MS);
        c.create_topic("t", PARTITIONS).unwrap();
        let handles = [c.init_producer(&name(0), 0), c.init_producer(&name(1), 0)];
        let mut o = Oracle {
            fates: vec![Vec::new(); PARTITIONS as usize],
            handles,
            stale: [None; 2],
            fenced: [false; 2],
            started: [None; 2],
            now: 0,
        };
        let mut counter = 0u64;
        for op in ops {
            counter += 1;
            let value = rec(&counter.to_string());
            match op {
                Op::Begin(p) => {
                    let expected = o.fencing(p).or_else(|| {
                        o.started[p].map(|_| ModelError::TransactionAlreadyOpen {
                            transactional_id: name(p),
                        })
                    });
                    let ok = expected.is_none();
                    expect_unit(c.begin(o.handles[p], o.now), expected);
                    if ok {
                        o.started[p] = Some(o.now);
                    }
                }
                Op::Send(p, k) => {
                    let result = c.send(o.handles[p], &Tp::new("t", k), value);
                    match o.no_txn(p) {
                        Some(err) => prop_assert_eq!(result, Err(err)),
                        None => {
                            let fates = &mut o.fates[k as usize];
                            prop_assert_eq!(result, Ok(fates.len() as u64));
                            fates.push(Fate::Open(p));
                        }
                    }
                }
                Op::Commit(p) | Op::Abort(p) => {
                    let kind = if matches!(op, Op::Commit(_)) {
                        ControlKind::Commit
                    } else {
                        ControlKind::Abort
                    };
                    let result = match kind {
                        ControlKind::Commit => c.commit(o.handles[p]),
                        ControlKind::Abort => c.abort(o.handles[p]),
                    };
                    let expected = o.no_txn(p);
                    let ok = expected.is_none();
                    expect_unit(result, expected);
                    if ok {
                        o.end(p, kind);
                    }
                }
                Op::Append(k) => {
                    let fates = &mut o.fates[k as usize];
                    prop_assert_eq!(c.append(&Tp::new("t", k), value), Ok(fates.len() as u64));
                    fates.push(Fate::Committed);
                }
                Op::Reinit(p) => {
                    if o.started[p].is_some() {
                        o.end(p, ControlKind::Abort);
                    }
                    let fresh = c.init_producer(&name(p), o.now);
                    let bump = if o.fenced[p] { 2 } else { 1 };
                    prop_assert_eq!(fresh.epoch, o.handles[p].epoch + bump);
                    o.stale[p] = Some(o.handles[p]);
                    o.handles[p] = fresh;
                    o.fenced[p] = false;
                }
                Op::Zombie(p, k) => {
                    if let Some(stale) = o.stale[p] {
                        let result = c.send(stale, &Tp::new("t", k), value);
                        prop_assert!(
                            matches!(result, Err(ModelError::Fenced { .. })),
                            "a stale handle must be fenced, got {:?}",
                            result
                        );
                    }
                }
                Op::Tick(ms) => {
                    o.now += ms;
                    let mut expected = Vec::new();
                    for p in 0..2 {
                        if o.started[p].is_some_and(|s| o.now - s > TIMEOUT_MS) {
                            o.end(p, ControlKind::Abort);
                            o.fenced[p] = true;
                            expected.push(name(p));
                        }
                    }
                    prop_assert_eq!(c.expire_transactions(o.now), expected);
                }
                Op::Fetch(k, from_seed, max) => partial_fetch(&c, &o, k, from_seed, max),
            }
            check(&c, &o);
        }
    }
}
