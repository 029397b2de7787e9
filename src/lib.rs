//! Parsley core.
pub mod record;
pub mod tp;

pub use record::{ConsumedRecord, Header, ProducedRecord, RecordData};
pub use tp::{TopicName, Tp};
pub mod header;
pub mod stamp;
pub use stamp::{Claim, Stamp};
pub mod codec;
pub mod emission;
pub mod partitioner;
pub mod topic;
pub use codec::{Codec, CodecError, Json, RawBytes, Utf8, I64};
pub use emission::{Emission, Record, Step, Tick};
pub use topic::{RecordCodecError, RecordPart, Sinks, Topic, TopicRef};
pub mod stage;
pub use stage::Stage;
pub mod app;
pub use app::{App, CompositionError, Parsley};
pub mod assembly;
pub mod probe;
pub use assembly::{assemble, Assembly, AssemblyError, TopicMetadata};
pub use probe::ContractProbes;
pub mod task;
pub use task::{Task, TaskConfig, TaskError};
pub mod clock;
pub use clock::CausalClock;
#[cfg(feature = "live")]
pub mod live;
pub mod mutation;
