//! The application under the `TestDriver`: 100,000 transfers, out of order
//! in event time by up to ten seconds, piped one at a time and in batches
//! of 1,000. Every total the application emits is counted: a total that is
//! not 0 is impossible, since every prefix of the transfers sums to 0.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parsley_sim::{TestDriver, TestRecord};
use parsley_transfers::{app, transfers, Balance, Topics, Transfer, BASE_MS};

const TRANSFERS: usize = 100_000;
/// The input `parsley-transfers csv` writes by default.
const SEED: u64 = 0;

/// What a run committed, as the test reads it back.
struct Outcome {
    totals: Vec<i64>,
    balances: Vec<Balance>,
}

impl Outcome {
    fn impossible_totals(&self) -> usize {
        self.totals.iter().filter(|total| **total != 0).count()
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
    Outcome {
        totals: driver
            .output(&topics.totals)
            .unwrap()
            .read_values()
            .unwrap(),
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

    /// Each account's final balance.
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

/// Checks what holds with or without a consistent view, and returns the
/// counts of impossible totals and of balances no prefix gives.
fn check(label: &str, transfers: &[Transfer], outcome: &Outcome) -> (usize, usize) {
    let prefixes = Prefixes::of(transfers);
    // Caught up, the total is that of the whole input.
    assert_eq!(outcome.totals.last(), Some(&0), "{label}: the final total");
    // Each account's last balance is its credit and debit over the whole input.
    let mut last: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for balance in &outcome.balances {
        last.insert(balance.account.clone(), (balance.credit, balance.debit));
    }
    assert_eq!(last, prefixes.last(), "{label}: the final balances");
    let impossible = outcome.impossible_totals();
    let inconsistent = outcome
        .balances
        .iter()
        .filter(|b| !prefixes.consistent(b))
        .count();
    println!(
        "{label}: {impossible} of {} totals impossible; {inconsistent} of {} balances hold a credit and a debit no prefix holds together",
        outcome.totals.len(),
        outcome.balances.len()
    );
    (impossible, inconsistent)
}

#[test]
fn one_at_a_time() {
    let transfers = transfers(SEED, TRANSFERS);
    let started = Instant::now();
    let outcome = run(&transfers, 1, None);
    println!("one at a time: {:.1} s", started.elapsed().as_secs_f64());
    let (impossible, inconsistent) = check("one at a time", &transfers, &outcome);
    // Each transfer is processed to the end before the next: an account's
    // credit and debit always come from one prefix...
    assert_eq!(inconsistent, 0);
    // ...but without a consistent view the total sees one account's new
    // balance before the other's.
    assert!(
        impossible > 0,
        "without a consistent view some totals are impossible"
    );
}

#[test]
fn in_batches_of_a_thousand() {
    let transfers = transfers(SEED, TRANSFERS);
    let started = Instant::now();
    let outcome = run(&transfers, 1_000, None);
    println!("in batches: {:.1} s", started.elapsed().as_secs_f64());
    let (impossible, _inconsistent) = check("in batches of 1,000", &transfers, &outcome);
    assert!(
        impossible > 0,
        "without a consistent view some totals are impossible"
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
