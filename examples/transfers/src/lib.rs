//! Transfers between accounts, as a user would write them: the
//! internal-consistency test of streaming systems (Jamie Brandon, 2021).
//!
//! ```text
//! transfers ─┬─ by `to` ───► credits ──► credits ─┐
//!            └─ by `from` ─► debits ───► debits ──┴─► balance (outer join) ──► balances
//!                                                        └─ by "total" ──► total ──► totals
//! ```
//!
//! Each transfer moves an amount from one account to another. `credits`
//! sums what each account received, `debits` what it sent; `balance` joins
//! the two tables (a missing side counts as 0), and `total` keeps each
//! account's latest balance and emits their sum. Every prefix of the
//! transfers sums to 0, so a total that is not 0 is *impossible*: no
//! prefix of the input produces it. Without a consistent view some totals
//! are: the total meets the balance of the account a transfer credits
//! before that of the account it debits (docs/CONCEPTS.md, *Internal
//! consistency*). Declared a consistent view ([`parsley::Stage::consistent`],
//! docs/RULES.md#v1), the total is released at the end of each epoch, at a
//! cut of the transfers, and none is.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use parsley::{App, CompositionError, Join, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use serde::{Deserialize, Serialize};

/// The accounts, "0" to "9".
pub const ACCOUNTS: u64 = 10;
/// The event time of transfer 0 before its lag, in ms since the epoch.
pub const BASE_MS: i64 = 1_700_000_000_000;
/// The largest lag of a transfer's event time behind its place in the input.
pub const MAX_LAG_MS: i64 = 10_000;
/// The one key of the total.
pub const TOTAL: &str = "total";
/// The consistent view's epoch by default: the total is released once a
/// second of event time.
pub const EPOCH: Duration = Duration::from_secs(1);

/// A transfer's value on `transfers` (JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferValue {
    /// The account debited.
    pub from: String,
    /// The account credited.
    pub to: String,
    /// How much.
    pub amount: i64,
}

/// An account's balance on `balances` (JSON): its credit and debit as the
/// join saw them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    /// The account (also the record's key).
    pub account: String,
    /// What it received.
    pub credit: i64,
    /// What it sent.
    pub debit: i64,
    /// `credit - debit`.
    pub balance: i64,
}

/// The application's topics: its source and sinks.
#[derive(Clone)]
pub struct Topics {
    /// Transfers, keyed by transfer id, timestamped with their event time.
    pub transfers: Topic<String, TransferValue>,
    /// What each account received so far (a table).
    pub credits: Topic<String, i64>,
    /// What each account sent so far (a table).
    pub debits: Topic<String, i64>,
    /// Each account's balance (a table).
    pub balances: Topic<String, Balance>,
    /// The sum of the balances, under the key "total".
    pub totals: Topic<String, i64>,
}

impl Topics {
    /// The topics, every name after `prefix`.
    pub fn new(prefix: &str) -> Topics {
        Topics {
            transfers: Topic::with_codecs(format!("{prefix}transfers"), Utf8, Json),
            credits: Topic::with_codecs(format!("{prefix}credits"), Utf8, I64),
            debits: Topic::with_codecs(format!("{prefix}debits"), Utf8, I64),
            balances: Topic::with_codecs(format!("{prefix}balances"), Utf8, Json),
            totals: Topic::with_codecs(format!("{prefix}totals"), Utf8, I64),
        }
    }
}

/// A stage summing the amounts of `source` per key into `sums`.
fn sum(name: &str, source: &Topic<String, TransferValue>, sums: &Topic<String, i64>) -> Stage {
    let out = sums.clone();
    Stage::named(name)
        .state(I64, || 0i64)
        .on(source, move |sum: i64, transfer| {
            let sum = sum + transfer.value().amount;
            Step::of(sum).emit(out.send(transfer.key().cloned(), sum))
        })
        .into(sums)
        .build()
}

/// The application, its id after `prefix`. With `epoch`, the total is a
/// consistent view released at the end of each epoch of that length; with
/// `None` it is not, as in Kafka Streams.
pub fn app(
    prefix: &str,
    topics: &Topics,
    epoch: Option<Duration>,
) -> Result<App, CompositionError> {
    let bank = Parsley::named(format!("{prefix}transfers"));
    let (to, by_to) =
        Stage::named("by-to").rekey(&topics.transfers, Utf8, |t| t.value().to.clone());
    let (from, by_from) =
        Stage::named("by-from").rekey(&topics.transfers, Utf8, |t| t.value().from.clone());
    // Every balance again, under one key, for the total (R3).
    let by_total = topics.balances.repartition("by-total", Utf8);
    let credits = sum("credits", &by_to, &topics.credits);
    let debits = sum("debits", &by_from, &topics.debits);
    let balance = Stage::named("balance")
        .join(Join::table_table(&topics.credits, &topics.debits))
        .outer(
            |account: &String, credit: Option<&i64>, debit: Option<&i64>| {
                let (credit, debit) = (credit.copied().unwrap_or(0), debit.copied().unwrap_or(0));
                Balance {
                    account: account.clone(),
                    credit,
                    debit,
                    balance: credit - debit,
                }
            },
        )
        .into(&topics.balances)
        .rekey_output(&topics.balances, &by_total, |_, _| TOTAL.to_string())
        .build();
    // The declarations: the balances and the total are consistent views
    // (V1), so no balance shows a transfer's credit without its debit and
    // no total is one no prefix of the transfers gives.
    let balance = match epoch {
        Some(epoch) => balance.consistent(epoch),
        None => balance,
    };
    let out = topics.totals.clone();
    let total = Stage::named("total")
        .state(Json, BTreeMap::<String, i64>::new)
        .on(
            &by_total,
            move |mut latest: BTreeMap<String, i64>, balance| {
                latest.insert(balance.value().account.clone(), balance.value().balance);
                let total = latest.values().sum::<i64>();
                Step::of(latest).emit(out.send(Some(TOTAL.to_string()), total))
            },
        )
        .into(&topics.totals)
        .build();
    let total = match epoch {
        Some(epoch) => total.consistent(epoch),
        None => total,
    };
    bank.stages([to, from, credits, debits, balance, total])
        .build()
}

/// One transfer of the input: its key, value and event time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The transfer id, `t<i>`: the record's key.
    pub id: String,
    /// The account debited.
    pub from: String,
    /// The account credited.
    pub to: String,
    /// How much (always 1 here).
    pub amount: i64,
    /// The event time, ms since the epoch: the record's timestamp.
    pub timestamp_ms: i64,
}

impl Transfer {
    /// The record's value.
    pub fn value(&self) -> TransferValue {
        TransferValue {
            from: self.from.clone(),
            to: self.to.clone(),
            amount: self.amount,
        }
    }
}

/// `n` transfers of amount 1 from `seed`, with event times from
/// [`BASE_MS`]: see [`transfers_from`].
pub fn transfers(seed: u64, n: usize) -> Vec<Transfer> {
    transfers_from(seed, n, BASE_MS)
}

/// `n` transfers of amount 1 between [`ACCOUNTS`] accounts (never from an
/// account to itself) drawn from `seed`: transfer `i`, id `t<i>`, happened
/// at `base_ms + i` less a lag drawn uniformly from `0..=MAX_LAG_MS`, so
/// event times are out of order by up to ten seconds.
///
/// The draws are those of the Kafka Streams side's generator
/// (bench/kafka-streams-transfers, README, "Input"), so that both read the
/// same bytes from the same seed: SplitMix64 from `seed`, and for each
/// transfer `lag = next() mod 10001`, `from = next() mod 10`,
/// `to = next() mod 9`, plus 1 if `to >= from`.
pub fn transfers_from(seed: u64, n: usize, base_ms: i64) -> Vec<Transfer> {
    let mut state = seed;
    let mut next = move || {
        // SplitMix64.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|i| {
            let lag = (next() % (MAX_LAG_MS as u64 + 1)) as i64;
            let from = next() % ACCOUNTS;
            let to = next() % (ACCOUNTS - 1);
            let to = if to >= from { to + 1 } else { to };
            Transfer {
                id: format!("t{i}"),
                from: from.to_string(),
                to: to.to_string(),
                amount: 1,
                timestamp_ms: base_ms + i as i64 - lag,
            }
        })
        .collect()
}

/// The transfers as CSV, one a line, no header: `id,from,to,amount,timestamp_ms`.
pub fn to_csv(transfers: &[Transfer]) -> String {
    let mut csv = String::with_capacity(transfers.len() * 32);
    for t in transfers {
        let _ = writeln!(
            csv,
            "{},{},{},{},{}",
            t.id, t.from, t.to, t.amount, t.timestamp_ms
        );
    }
    csv
}

/// Transfers read from CSV in [`to_csv`]'s format (blank lines skipped).
pub fn from_csv(csv: &str) -> Result<Vec<Transfer>, String> {
    let line = |(number, line): (usize, &str)| {
        let bad = |what: &str| format!("line {}: {what}: {line:?}", number + 1);
        let fields: Vec<&str> = line.trim_end_matches('\r').split(',').collect();
        let [id, from, to, amount, timestamp_ms] = fields[..] else {
            return Err(bad("expected id,from,to,amount,timestamp_ms"));
        };
        Ok(Transfer {
            id: id.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            amount: amount
                .parse()
                .map_err(|_| bad("an amount that is not an integer"))?,
            timestamp_ms: timestamp_ms
                .parse()
                .map_err(|_| bad("a timestamp that is not an integer"))?,
        })
    };
    csv.lines()
        .enumerate()
        .filter(|(_, text)| !text.trim().is_empty())
        .map(line)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_are_deterministic_out_of_order_and_between_distinct_accounts() {
        let transfers = transfers(7, 20_000);
        assert_eq!(transfers, super::transfers(7, 20_000));
        assert_ne!(transfers, super::transfers(8, 20_000));
        for (i, t) in transfers.iter().enumerate() {
            assert_eq!(t.id, format!("t{i}"));
            assert_ne!(t.from, t.to);
            assert!(
                t.from.parse::<u64>().unwrap() < ACCOUNTS
                    && t.to.parse::<u64>().unwrap() < ACCOUNTS
            );
            assert_eq!(t.amount, 1);
            let lag = BASE_MS + i as i64 - t.timestamp_ms;
            assert!((0..=MAX_LAG_MS).contains(&lag), "{t:?}");
        }
        let late = transfers
            .windows(2)
            .filter(|w| w[1].timestamp_ms < w[0].timestamp_ms)
            .count();
        assert!(late > 5_000, "{late} transfers earlier than the one before");
    }

    #[test]
    fn the_same_bytes_as_the_kafka_streams_side_writes() {
        // bench/kafka-streams-transfers/README.md, "Input": seed 1's first lines.
        let csv = to_csv(&transfers(1, 3));
        assert_eq!(
            csv,
            "t0,9,3,1,1699999993996\nt1,1,6,1,1699999990566\nt2,3,0,1,1699999993070\n"
        );
    }

    #[test]
    fn csv_round_trips() {
        let transfers = transfers(1, 100);
        let csv = to_csv(&transfers);
        assert_eq!(
            csv.lines().next(),
            Some(
                format!(
                    "t0,{},{},1,{}",
                    transfers[0].from, transfers[0].to, transfers[0].timestamp_ms
                )
                .as_str()
            )
        );
        assert_eq!(from_csv(&csv).unwrap(), transfers);
        assert!(from_csv("t0,1,2,x,5\n").unwrap_err().contains("line 1"));
    }
}
