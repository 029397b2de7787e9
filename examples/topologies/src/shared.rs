//! The types and topic helpers the topologies share: the order, the
//! amounts the examples refuse, and topics by codec.

use serde::{Deserialize, Serialize};

use parsley::{Json, Topic, Utf8, I64};

/// An order against an account; the key is the account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The amount.
    pub total: i64,
}

impl Order {
    /// The amount.
    pub fn total(&self) -> i64 {
        self.total
    }
}

/// The examples refuse negative amounts: their logic fails (X5), which is how
/// the simulator plants a logic error on a chosen record.
pub fn checked(amount: i64) -> Result<i64, String> {
    if amount < 0 {
        Err(format!("amount {amount} is negative"))
    } else {
        Ok(amount)
    }
}

// The examples' wire formats are the serdes a Kafka Streams user would pick:
// keys and text values as UTF-8 (`Serdes.String()`), longs as 8 big-endian
// bytes (`Serdes.Long()`), and JSON for the order struct.

/// A topic of text keyed by text.
pub(crate) fn text_topic(name: String) -> Topic<String, String> {
    Topic::with_codecs(name, Utf8, Utf8)
}

/// A topic of longs keyed by text.
pub(crate) fn long_topic(name: String) -> Topic<String, i64> {
    Topic::with_codecs(name, Utf8, I64)
}

/// A topic of JSON orders keyed by account.
pub(crate) fn order_topic(name: String) -> Topic<String, Order> {
    Topic::with_codecs(name, Utf8, Json)
}
