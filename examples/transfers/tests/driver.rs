//! The application under the `TestDriver`: 100,000 transfers, out of order
//! in event time by up to ten seconds, piped one at a time and in batches
//! of 1,000, into the application with its total declared a consistent
//! view and into the same application without the declaration. Every total
//! is counted: a total that is not 0 is impossible, since every prefix of
//! the transfers sums to 0.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parsley::header::{cut_of, is_progress};
use parsley::{Codec, Isolation, I64};
use parsley_sim::{TestDriver, TestRecord};
use parsley_transfers::{app, transfers, Balance, Topics, Transfer, BASE_MS, EPOCH};

const TRANSFERS: usize = 100_000;
/// The input `parsley-transfers csv` writes by default, and the Kafka
/// Streams side measured (bench/kafka-streams-transfers).
const SEED: u64 = 1;

/// What a run committed, as the test reads it back.
struct Outcome {
    /// Each total in the order written, with its cut (a view's outputs
    /// have one).
    totals: Vec<(i64, Option<i64>)>,
    balances: Vec<Balance>,
}

impl Outcome {
    fn impossible_totals(&self) -> usize {
        self.totals.iter().filter(|(total, _)| *total != 0).count()
    }
}

/// Pipes `transfers` into a fresh driver, `batch` at a time (1: each its own
/// pipe, processed and committed before the next).
fn run(transfers: &[Transfer], batch: usize, epoch: Option<Duration>) -> Outcome {
    let topics = Topics::new("");
    let app = app("", &topics, epoch).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(BASE_MS)
        .build()
        .unwrap();
    let input = driver.input(&topics.transfers).unwrap();
    let record = |t: &Transfer| TestRecord::new(t.id.clone(), t.value()).at(t.timestamp_ms);
    for chunk in transfers.chunks(batch) {
        match chunk {
            [one] => input.pipe_record(record(one)).map(|_| ()).unwrap(),
            many => input.pipe_all(many.iter().map(record)).unwrap(),
        }
    }
    assert!(
        driver.stopped_tasks().is_empty(),
        "{:?}",
        driver.stopped_tasks()
    );
    // The totals with their headers, from the driver's Kafka model: one key,
    // so one partition.
    let totals = driver
        .cluster()
        .fetch(
            &topics.totals.tp(0),
            0,
            usize::MAX,
            Isolation::ReadCommitted,
        )
        .unwrap()
        .records
        .iter()
        .filter(|record| !is_progress(&record.data))
        .map(|record| {
            let value = record.data.value.as_deref().expect("a total");
            (I64.decode(value).expect("a long"), cut_of(&record.data))
        })
        .collect();
    Outcome {
        totals,
        balances: driver
            .output(&topics.balances)
            .unwrap()
            .read_values()
            .unwrap(),
    }
}

/// Per account, the prefixes of `transfers` (by length, `0..=len`) at
/// which its credit, and its debit, first reach each value.
struct Prefixes {
    credit_reached: BTreeMap<String, Vec<usize>>,
    debit_reached: BTreeMap<String, Vec<usize>>,
    len: usize,
}

impl Prefixes {
    fn of(transfers: &[Transfer]) -> Prefixes {
        let (mut credit_reached, mut debit_reached) = (BTreeMap::new(), BTreeMap::new());
        for (i, t) in transfers.iter().enumerate() {
            assert_eq!(t.amount, 1);
            credit_reached
                .entry(t.to.clone())
                .or_insert_with(|| vec![0])
                .push(i + 1);
            debit_reached
                .entry(t.from.clone())
                .or_insert_with(|| vec![0])
                .push(i + 1);
        }
        Prefixes {
            credit_reached,
            debit_reached,
            len: transfers.len(),
        }
    }

    /// The prefix lengths at which `account`'s sum on one side is `value`.
    fn holding(
        &self,
        reached: &BTreeMap<String, Vec<usize>>,
        account: &str,
        value: i64,
    ) -> (usize, usize) {
        let reached = reached.get(account).map_or(&[0][..], Vec::as_slice);
        let value = value as usize;
        let start = reached.get(value).copied().unwrap_or(usize::MAX);
        let end = reached.get(value + 1).copied().unwrap_or(self.len + 1);
        (start, end)
    }

    /// Whether some prefix of the transfers gives `balance`'s account this
    /// credit and this debit together.
    fn consistent(&self, balance: &Balance) -> bool {
        let credit = self.holding(&self.credit_reached, &balance.account, balance.credit);
        let debit = self.holding(&self.debit_reached, &balance.account, balance.debit);
        balance.balance == balance.credit - balance.debit
            && credit.0.max(debit.0) < credit.1.min(debit.1)
    }

    /// Each account's credit and debit over the whole input.
    fn last(&self) -> BTreeMap<String, (i64, i64)> {
        let mut last: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for (account, reached) in &self.credit_reached {
            last.entry(account.clone()).or_default().0 = reached.len() as i64 - 1;
        }
        for (account, reached) in &self.debit_reached {
            last.entry(account.clone()).or_default().1 = reached.len() as i64 - 1;
        }
        last
    }
}

/// The epoch of each transfer (V3): the largest timestamp up to it, in
/// epochs. The driver's `transfers` topic has one partition.
fn epochs(transfers: &[Transfer], epoch: Duration) -> Vec<i64> {
    let epoch = epoch.as_millis() as i64;
    let mut highest = i64::MIN;
    transfers
        .iter()
        .map(|t| {
            highest = highest.max(t.timestamp_ms);
            highest.div_euclid(epoch)
        })
        .collect()
}

/// What a run shows: the counts of impossible totals and of balances whose
/// credit and debit no prefix holds together.
struct Counts {
    impossible: usize,
    inconsistent: usize,
}

/// Checks what holds of `outcome`, a run over `transfers` with the view's
/// `epoch` or without a view, and counts.
fn check(
    label: &str,
    transfers: &[Transfer],
    epoch: Option<Duration>,
    outcome: &Outcome,
) -> Counts {
    // Each account's last balance: with no view, over the whole input;
    // with one, over the transfers of the epochs below the last (the last
    // stays open: no later record closes it, V5).
    let mut last: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for balance in &outcome.balances {
        last.insert(balance.account.clone(), (balance.credit, balance.debit));
    }
    let expected = match epoch {
        None => transfers,
        Some(epoch) => {
            let epochs = epochs(transfers, epoch);
            let open = *epochs.last().unwrap();
            &transfers[..epochs.iter().position(|e| *e == open).unwrap()]
        }
    };
    assert_eq!(
        last,
        Prefixes::of(expected).last(),
        "{label}: the final balances"
    );
    // The last total is that of the whole input, or of the last cut.
    assert_eq!(
        outcome.totals.last().map(|(total, _)| *total),
        Some(0),
        "{label}: the final total"
    );
    let prefixes = Prefixes::of(transfers);
    let counts = Counts {
        impossible: outcome.impossible_totals(),
        inconsistent: outcome
            .balances
            .iter()
            .filter(|b| !prefixes.consistent(b))
            .count(),
    };
    println!(
        "{label}: {} of {} totals impossible; {} of {} balances hold a credit and a debit no prefix holds together",
        counts.impossible,
        outcome.totals.len(),
        counts.inconsistent,
        outcome.balances.len()
    );
    counts
}

/// The view's totals: each carries its cut, the cuts rise epoch by epoch,
/// and the last is the last epoch's start (V1, V5).
fn check_cuts(label: &str, transfers: &[Transfer], outcome: &Outcome) {
    let cuts: Vec<i64> = outcome
        .totals
        .iter()
        .map(|(_, cut)| cut.unwrap_or_else(|| panic!("{label}: a total without its cut")))
        .collect();
    assert!(
        cuts.windows(2).all(|pair| pair[0] < pair[1]),
        "{label}: cuts {cuts:?}"
    );
    let open = *epochs(transfers, EPOCH).last().unwrap();
    assert_eq!(cuts.last(), Some(&open), "{label}: the last cut");
}

fn timed<T>(label: &str, run: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = run();
    println!("{label}: {:.1} s", started.elapsed().as_secs_f64());
    result
}

#[test]
fn one_at_a_time() {
    let transfers = transfers(SEED, TRANSFERS);
    let plain = timed("one at a time, no view", || run(&transfers, 1, None));
    let plain = check("one at a time, no view", &transfers, None, &plain);
    // Each transfer is processed to the end before the next: an account's
    // credit and debit always come from one prefix, but the total sees one
    // account's new balance before the other's.
    assert_eq!(plain.inconsistent, 0);
    assert!(
        plain.impossible > 0,
        "without a consistent view some totals are impossible"
    );

    let view = timed("one at a time, view", || run(&transfers, 1, Some(EPOCH)));
    check_cuts("one at a time, view", &transfers, &view);
    let counts = check("one at a time, view", &transfers, Some(EPOCH), &view);
    assert_eq!(
        counts.impossible, 0,
        "a consistent view's totals are all possible"
    );
    assert_eq!(
        counts.inconsistent, 0,
        "no consistent balance shows a credit without its debit"
    );
}

#[test]
fn in_batches_of_a_thousand() {
    let transfers = transfers(SEED, TRANSFERS);
    let plain = timed("in batches, no view", || run(&transfers, 1_000, None));
    let plain = check("in batches of 1,000, no view", &transfers, None, &plain);
    assert!(
        plain.impossible > 0,
        "without a consistent view some totals are impossible"
    );

    let view = timed("in batches, view", || run(&transfers, 1_000, Some(EPOCH)));
    check_cuts("in batches of 1,000, view", &transfers, &view);
    let counts = check("in batches of 1,000, view", &transfers, Some(EPOCH), &view);
    assert_eq!(
        counts.impossible, 0,
        "a consistent view's totals are all possible"
    );
    assert_eq!(
        counts.inconsistent, 0,
        "no consistent balance shows a credit without its debit"
    );
    assert!(
        plain.inconsistent > 0,
        "in batches, some plain balances show a credit without its debit"
    );
}

#[test]
fn the_checks_tell_a_prefix_from_no_prefix() {
    // t0: 0 → 1, t1: 1 → 2.
    let transfers: Vec<Transfer> = [("0", "1"), ("1", "2")]
        .iter()
        .enumerate()
        .map(|(i, (from, to))| Transfer {
            id: format!("t{i}"),
            from: from.to_string(),
            to: to.to_string(),
            amount: 1,
            timestamp_ms: BASE_MS + i as i64,
        })
        .collect();
    let prefixes = Prefixes::of(&transfers);
    let balance = |credit, debit| Balance {
        account: "1".into(),
        credit,
        debit,
        balance: credit - debit,
    };
    assert!(prefixes.consistent(&balance(0, 0)));
    assert!(prefixes.consistent(&balance(1, 0)));
    assert!(prefixes.consistent(&balance(1, 1)));
    // Account 1's debit (t1) without its earlier credit (t0).
    assert!(!prefixes.consistent(&balance(0, 1)));
    assert!(!prefixes.consistent(&balance(2, 1)));
    assert_eq!(prefixes.last()["1"], (1, 1));
}
