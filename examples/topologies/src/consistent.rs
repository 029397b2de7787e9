//! Consistent views (V1–V5), in two shapes that I18's reference evaluates
//! whole:
//!
//! * [`ledger()`]: transfers between accounts re-keyed by recipient and by
//!   sender (two re-key stages, R1), summed per account, the sums joined
//!   by an outer table–table join into balances, each balance re-keyed to
//!   one key within the join (R3) and folded into a total: the view. Every
//!   prefix of the transfers has total 0, so a released total that is not
//!   is impossible.
//! * [`invoices()`]: ledger entries split by a stateless stage into
//!   charges and payments, each summed per customer, and the two sums
//!   joined by a left table–table join into what each customer owes: the
//!   join is the view.

use std::collections::BTreeMap;
use std::time::Duration;

use parsley::{App, CompositionError, Join, Json, Parsley, Stage, Step, Topic, Utf8};
use parsley_sim::sim::{BoxError, Committed};
use serde::{Deserialize, Serialize};

/// The epoch length of both examples' views, in milliseconds: short
/// against the simulator's clock steps, so a run spans many epochs.
pub const VIEW_EPOCH_MS: u64 = 250;

/// The key of the ledger's total.
pub const TOTAL: &str = "total";

/// A transfer, keyed by its id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The account debited.
    pub from: String,
    /// The account credited.
    pub to: String,
    /// How much.
    pub amount: i64,
}

/// An account's balance, keyed by the account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    /// The account.
    pub account: String,
    /// What it received less what it sent.
    pub balance: i64,
}

/// The topics of the ledger.
#[derive(Clone, Debug)]
pub struct LedgerTopics {
    /// Transfers, keyed by transfer id, stamped with their event time.
    pub transfers: Topic<String, Transfer>,
    /// What each account received (a table).
    pub credits: Topic<String, i64>,
    /// What each account sent (a table).
    pub debits: Topic<String, i64>,
    /// Each account's balance (a table).
    pub balances: Topic<String, Balance>,
    /// The sum of the balances, under [`TOTAL`]: the view's output.
    pub totals: Topic<String, i64>,
}

impl LedgerTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        LedgerTopics {
            transfers: Topic::with_codecs("transfers", Utf8, Json),
            credits: Topic::with_codecs("credits", Utf8, Json),
            debits: Topic::with_codecs("debits", Utf8, Json),
            balances: Topic::with_codecs("balances", Utf8, Json),
            totals: Topic::with_codecs("totals", Utf8, Json),
        }
    }
}

impl Default for LedgerTopics {
    fn default() -> Self {
        LedgerTopics::new()
    }
}

/// A stage summing `source`'s amounts per key into `sums`.
fn sum<V: 'static>(
    name: &str,
    source: &Topic<String, V>,
    sums: &Topic<String, i64>,
    amount: fn(&V) -> i64,
) -> Stage {
    let out = sums.clone();
    Stage::named(name)
        .state(Json, || 0i64)
        .on(source, move |sum: i64, record| {
            let sum = sum + amount(record.value());
            Step::of(sum).emit(out.send(record.key().cloned(), sum))
        })
        .into(sums)
        .build()
}

/// The ledger: its total a consistent view with epochs of `epoch`.
pub fn ledger(topics: &LedgerTopics, epoch: Duration) -> Result<App, CompositionError> {
    let bank = Parsley::named("ledger");
    let (by_to, to) =
        Stage::named("by-to").rekey(&topics.transfers, Utf8, |t| t.value().to.clone());
    let (by_from, from) =
        Stage::named("by-from").rekey(&topics.transfers, Utf8, |t| t.value().from.clone());
    let all = topics.balances.repartition("all", Utf8);
    let credit = sum("credit", &to, &topics.credits, |t: &Transfer| t.amount);
    let debit = sum("debit", &from, &topics.debits, |t: &Transfer| t.amount);
    let balance = Stage::named("balance")
        .join(Join::table_table(&topics.credits, &topics.debits))
        .outer(
            |account: &String, credit: Option<&i64>, debit: Option<&i64>| Balance {
                account: account.clone(),
                balance: credit.copied().unwrap_or(0) - debit.copied().unwrap_or(0),
            },
        )
        .into(&topics.balances)
        .rekey_output(&topics.balances, &all, |_, _| TOTAL.to_string())
        .build();
    let out = topics.totals.clone();
    let total = Stage::named("total")
        .state(Json, BTreeMap::<String, i64>::new)
        .on(&all, move |mut each: BTreeMap<String, i64>, balance| {
            each.insert(balance.value().account.clone(), balance.value().balance);
            let total = each.values().sum::<i64>();
            Step::of(each).emit(out.send(Some(TOTAL.to_string()), total))
        })
        .into(&topics.totals)
        .build()
        .consistent(epoch);
    bank.stages([by_to, by_from, credit, debit, balance, total])
        .build()
}

/// The committed totals the ledger's view released that are not 0: no
/// prefix of the transfers gives them.
pub fn impossible_totals(
    run: &Committed<'_>,
    totals: &Topic<String, i64>,
) -> Result<Vec<parsley::Record<String, i64>>, BoxError> {
    Ok(run
        .records(totals)?
        .into_iter()
        .filter(|total| *total.value() != 0)
        .collect())
}

/// A ledger entry, keyed by customer: a charge, a payment, or both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// What the customer was charged (0: nothing).
    pub charge: i64,
    /// What the customer paid (0: nothing).
    pub payment: i64,
}

/// The topics of the invoices.
#[derive(Clone, Debug)]
pub struct InvoiceTopics {
    /// Ledger entries, keyed by customer.
    pub entries: Topic<String, Entry>,
    /// Each charge, keyed by customer.
    pub charges: Topic<String, i64>,
    /// Each payment, keyed by customer.
    pub payments: Topic<String, i64>,
    /// What each customer was charged in all (a table).
    pub charged: Topic<String, i64>,
    /// What each customer paid in all (a table).
    pub paid: Topic<String, i64>,
    /// What each customer owes: the view's output (a table).
    pub owed: Topic<String, i64>,
}

impl InvoiceTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        InvoiceTopics {
            entries: Topic::with_codecs("entries", Utf8, Json),
            charges: Topic::with_codecs("charges", Utf8, Json),
            payments: Topic::with_codecs("payments", Utf8, Json),
            charged: Topic::with_codecs("charged", Utf8, Json),
            paid: Topic::with_codecs("paid", Utf8, Json),
            owed: Topic::with_codecs("owed", Utf8, Json),
        }
    }
}

impl Default for InvoiceTopics {
    fn default() -> Self {
        InvoiceTopics::new()
    }
}

/// The invoices: what each customer owes, a consistent view with epochs
/// of `epoch`.
pub fn invoices(topics: &InvoiceTopics, epoch: Duration) -> Result<App, CompositionError> {
    let (charges, payments) = (topics.charges.clone(), topics.payments.clone());
    let split = Stage::named("split")
        .on(&topics.entries, move |entry| {
            let customer = entry.key().cloned();
            let mut out = Vec::new();
            if entry.value().charge != 0 {
                out.push(charges.send(customer.clone(), entry.value().charge));
            }
            if entry.value().payment != 0 {
                out.push(payments.send(customer, entry.value().payment));
            }
            out
        })
        .into((&topics.charges, &topics.payments))
        .build();
    let charged = sum("charged", &topics.charges, &topics.charged, |amount| {
        *amount
    });
    let paid = sum("paid", &topics.payments, &topics.paid, |amount| *amount);
    let owed = Stage::named("owed")
        .join(Join::table_table(&topics.charged, &topics.paid))
        .left(|_customer: &String, charged: &i64, paid: Option<&i64>| {
            charged - paid.copied().unwrap_or(0)
        })
        .into(&topics.owed)
        .build()
        .consistent(epoch);
    Parsley::named("invoices")
        .stages([split, charged, paid, owed])
        .build()
}
