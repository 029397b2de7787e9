//! The credit example (J8, J9).

use serde::{Deserialize, Serialize};

use parsley::Join;
use parsley::{App, CompositionError, Json, Parsley, Stage, Topic, Utf8};

use crate::*;

/// The topics of the credit example (J8, J9).
#[derive(Clone, Debug)]
pub struct CreditTopics {
    /// Each account's balance, keyed by account; a tombstone closes it.
    pub balances: Topic<String, i64>,
    /// Each account's credit limit; a tombstone withdraws it.
    pub limits: Topic<String, i64>,
    /// Each account with both a balance and a limit: its headroom, the
    /// limit less the balance (an inner join), a tombstone once it loses
    /// either.
    pub headroom: Topic<String, i64>,
    /// Each account with a balance or a limit: both, as far as known (an
    /// outer join), a tombstone once it has neither.
    pub accounts: Topic<String, Account>,
}

impl CreditTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        CreditTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        CreditTopics {
            balances: long_topic(format!("{prefix}balances")),
            limits: long_topic(format!("{prefix}credit-limits")),
            headroom: long_topic(format!("{prefix}headroom")),
            accounts: Topic::with_codecs(format!("{prefix}accounts"), Utf8, Json),
        }
    }
}

impl Default for CreditTopics {
    fn default() -> Self {
        CreditTopics::new()
    }
}

/// An account's balance and credit limit, as far as known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// The latest balance, when the account has one.
    pub balance: Option<i64>,
    /// The latest credit limit, when the account has one.
    pub limit: Option<i64>,
}

/// Table–table joins (J8) of balances and credit limits: `headroom` keeps
/// each account's limit less its balance while it has both (an inner
/// join), `accounts` each account's balance and limit while it has either
/// (an outer join); each writes a tombstone when an account loses its
/// result.
pub fn credit(topics: &CreditTopics) -> Result<App, CompositionError> {
    credit_named("credit", topics)
}

/// [`credit`] under another application id.
pub fn credit_named(app_id: &str, topics: &CreditTopics) -> Result<App, CompositionError> {
    let headroom = Stage::named("headroom")
        .join(Join::table_table(&topics.balances, &topics.limits))
        .inner(|_, balance: &i64, limit: &i64| limit - balance)
        .into(&topics.headroom)
        .build();
    let accounts = Stage::named("accounts")
        .join(Join::table_table(&topics.balances, &topics.limits))
        .outer(|_, balance: Option<&i64>, limit: Option<&i64>| Account {
            balance: balance.copied(),
            limit: limit.copied(),
        })
        .into(&topics.accounts)
        .build();
    Parsley::named(app_id)
        .stage(headroom)
        .stage(accounts)
        .build()
}
