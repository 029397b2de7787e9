//! Parsley core.
pub mod record;
pub mod tp;

pub use record::{ConsumedRecord, Header, ProducedRecord, RecordData};
pub use tp::{TopicName, Tp};
pub mod header;
pub mod stamp;
pub use stamp::{Claim, Stamp};
