//! A thin wrapper over rust-rdkafka with the operations of the in-memory
//! model (`parsley_sim::model::Cluster`) where the two overlap: topics,
//! transactional and plain producers, `read_committed` and
//! `read_uncommitted` fetches from an offset, watermarks, and committed group
//! offsets with their metadata. The model-fidelity tests run the table of
//! transactional cases the model runs too (`fidelity/cases.rs`) through it
//! against a real broker.
//!
//! Every call is `async`. librdkafka's transactional calls, metadata
//! requests, offset look-ups and consumer polls block, so they run on tokio's
//! blocking pool ([`tokio::task::spawn_blocking`]); each is bounded by
//! [`LiveConfig::timeout`]. The runtime must therefore be tokio's.
//!
//! | model (`Cluster`) | here |
//! |---|---|
//! | `create_topic`, `partitions` | [`LiveClient::create_topic`], [`LiveClient::partitions`] |
//! | `init_producer` | [`LiveClient::producer`] (creates the producer and runs `init_transactions`) |
//! | `begin`, `send`, `send_offsets`, `commit`, `abort` | [`TxnProducer`]'s methods of the same names |
//! | `append` | [`PlainProducer::append`] (idempotent, no transaction) |
//! | `fetch(tp, from, usize::MAX, isolation)` | [`LiveConsumer::fetch`] |
//! | `high_watermark`, `last_stable_offset` | [`LiveClient::watermarks`] |
//! | `committed(group, tp)` | [`LiveConsumer::committed`] |
//!
//! Its files follow rust-rdkafka's modules: `config` (how to reach the
//! cluster, [`LiveConfig`]), `log` (the client contexts and librdkafka's
//! log, [`LogContext`]), `admin` (topics and groups), `offsets` (Kafka's
//! offsets, [`Watermarks`] and the log-end readers), `producer`
//! ([`TxnProducer`], [`PlainProducer`]), `consumer` ([`LiveConsumer`]) and
//! `util` (blocking calls, bounded by a deadline). This file holds
//! [`LiveClient`], the entry point, and re-exports each file's public items,
//! so every path is `crate::client::…`.

use std::sync::Arc;

use rdkafka::admin::AdminClient;

mod admin;
mod config;
mod consumer;
mod log;
mod offsets;
mod producer;
pub mod properties;
mod pump;
mod util;
mod wake;

pub use admin::{Assigned, AssignmentError, GroupMember};
pub use config::{test_broker, Isolation, LiveConfig, BOOTSTRAP_ENV, DEFAULT_TIMEOUT};
pub(crate) use consumer::{
    committed_offsets, consumed, fetch_visible, is_group_refusal, SharedRefusal,
};
pub use consumer::{LiveConsumer, LiveFetch};
pub use log::LogContext;
pub(crate) use log::{error_librdkafka, log_librdkafka};
pub use offsets::Watermarks;
pub(crate) use offsets::{kafka_offset, kafka_partition, LogEnds};
pub use producer::{Delivery, PlainProducer, TxnProducer};
pub(crate) use producer::{PreviousOwner, TASK_LINGER};
pub(crate) use util::bounded;
pub(crate) use wake::Wake;

use crate::error::LiveError;

/// The entry point: an admin client and log-end readers for one cluster, and
/// the factory of producers and consumers. A clone shares the admin client
/// and the log-end readers.
#[derive(Clone)]
pub struct LiveClient {
    config: LiveConfig,
    admin: Arc<AdminClient<LogContext>>,
    log_ends: Arc<LogEnds>,
}

impl LiveClient {
    /// Reaches the cluster `config` names, then creates the admin client and
    /// the log-end readers. A cluster none of whose bootstrap addresses accepts
    /// a connection and answers Kafka's `ApiVersions` within
    /// [`LiveConfig::connect_timeout`] is an [`LiveError::Unreachable`]
    /// naming each address and its cause.
    pub fn new(config: LiveConfig) -> Result<LiveClient, LiveError> {
        let started = std::time::Instant::now();
        config
            .check_properties()
            .map_err(|source| LiveError::Properties {
                source: Box::new(source),
            })?;
        let protocol = config.security_protocol();
        let depth = crate::reach::Depth::for_protocol(Some(&protocol));
        crate::reach::probe(&config.bootstrap_servers, config.connect_timeout, depth).map_err(
            |failures| LiveError::Unreachable {
                bootstrap: config.bootstrap_servers.clone(),
                within: config.connect_timeout,
                failures,
            },
        )?;
        let left = config.connect_timeout.saturating_sub(started.elapsed());
        crate::reach::secure_probe(&config, left).map_err(|failure| LiveError::Secure {
            bootstrap: config.bootstrap_servers.clone(),
            failure,
        })?;
        let admin = config
            .client_config(&[])
            .create_with_context::<_, AdminClient<LogContext>>(LogContext)
            .map_err(|source| LiveError::Client {
                client: "admin",
                source: Box::new(source),
            })?;
        let log_ends = LogEnds::new(&config)?;
        Ok(LiveClient {
            config,
            admin: Arc::new(admin),
            log_ends: Arc::new(log_ends),
        })
    }

    /// The configuration every client it makes is created with.
    pub fn config(&self) -> &LiveConfig {
        &self.config
    }

    /// A transactional producer for `transactional_id`, initialised: like the
    /// model's `init_producer`, this fences every older producer with the
    /// same id and aborts its open transaction (X4).
    pub async fn producer(&self, transactional_id: &str) -> Result<TxnProducer, LiveError> {
        let producer = TxnProducer::new(&self.config, transactional_id)?;
        producer.init().await?;
        Ok(producer)
    }

    /// An idempotent producer outside any transaction.
    pub fn plain_producer(&self) -> Result<PlainProducer, LiveError> {
        PlainProducer::new(&self.config)
    }

    /// A consumer of `group` (whose committed offsets it reads) at
    /// `isolation`, assigned by hand: no subscription, no rebalances, no
    /// automatic commits.
    pub fn consumer(&self, group: &str, isolation: Isolation) -> Result<LiveConsumer, LiveError> {
        LiveConsumer::new(&self.config, Arc::clone(&self.log_ends), group, isolation)
    }
}
