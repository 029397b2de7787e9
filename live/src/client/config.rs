//! How to reach the cluster: [`LiveConfig`], the client id every client
//! carries, and the isolation level of a fetch.

use std::fmt;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;

use super::properties::{self, Origin, PropertiesError, Property};

/// The environment variable the live tests read the broker address from;
/// `scripts/kafka/broker.sh start` prints it.
pub const BOOTSTRAP_ENV: &str = "KAFKA_BOOTSTRAP_SERVERS";

/// How long a blocking call may take unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`LiveClient::new`](crate::LiveClient::new) tries to reach the cluster before it says
/// which bootstrap address failed and why.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Kafka's and librdkafka's default `transaction.timeout.ms`.
pub const DEFAULT_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach the cluster and how long to wait for it. Its `Debug` shows
/// a secret property's value as `[redacted]` ([`properties::is_secret`]).
#[derive(Clone, PartialEq, Eq)]
pub struct LiveConfig {
    /// librdkafka's `bootstrap.servers`: `host:port` pairs, comma-separated.
    pub bootstrap_servers: String,
    /// The bound on every blocking call: transactional calls, metadata and
    /// offset requests, a whole [`LiveConsumer::fetch`](crate::LiveConsumer::fetch).
    pub timeout: Duration,
    /// The producers' `transaction.timeout.ms`: the broker aborts (and
    /// fences) a transaction open longer than this.
    pub transaction_timeout: Duration,
    /// How long [`LiveClient::new`](crate::LiveClient::new) tries to reach a bootstrap address, and
    /// how long `Runtime::start` retries what Kafka says to retry (a
    /// coordinator loading or moving, a leader not elected yet).
    pub connect_timeout: Duration,
    /// Extra librdkafka properties for every client, applied last, so they
    /// override the adapter's own settings: `security.protocol`, `sasl.*`,
    /// `ssl.*` for a secured cluster ([`properties`]), each with where it
    /// was given.
    pub properties: Vec<Property>,
}

impl fmt::Debug for LiveConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("timeout", &self.timeout)
            .field("transaction_timeout", &self.transaction_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("properties", &self.properties)
            .finish()
    }
}

impl LiveConfig {
    /// The cluster at `bootstrap_servers`, with the default timeout and
    /// transaction timeout and no extra properties.
    pub fn new(bootstrap_servers: impl Into<String>) -> LiveConfig {
        LiveConfig {
            bootstrap_servers: bootstrap_servers.into(),
            timeout: DEFAULT_TIMEOUT,
            transaction_timeout: DEFAULT_TRANSACTION_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            properties: Vec::new(),
        }
    }

    /// The broker named by `KAFKA_BOOTSTRAP_SERVERS`, if it is set and not
    /// blank, with the client properties of the environment
    /// (`PARSLEY_COMMAND_CONFIG`'s file, then `PARSLEY_CLIENT_*`,
    /// [`properties`]).
    ///
    /// # Panics
    ///
    /// When those properties cannot be read (the error names the file and
    /// line or the variable, never a secret's value).
    pub fn from_env() -> Option<LiveConfig> {
        let servers = std::env::var(BOOTSTRAP_ENV)
            .ok()
            .filter(|servers| !servers.trim().is_empty())?;
        match properties::gather(None, &[]) {
            Ok(found) => Some(LiveConfig::new(servers).with_properties(found)),
            Err(error) => panic!("{error}"),
        }
    }

    /// The same with `found` added to its properties (later ones win).
    pub fn with_properties(mut self, found: impl IntoIterator<Item = Property>) -> LiveConfig {
        self.properties.extend(found);
        self
    }

    /// The last value given for `key`, if any.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties
            .iter()
            .rev()
            .find(|property| property.key == key)
            .map(|property| property.value.as_str())
    }

    /// `security.protocol`, lower-cased (`plaintext` when not set).
    pub fn security_protocol(&self) -> String {
        self.property("security.protocol")
            .unwrap_or("plaintext")
            .to_ascii_lowercase()
    }

    /// The principal this configuration authenticates as, when its
    /// properties say: `User:<sasl.username>` for SASL PLAIN and SCRAM
    /// (Kafka's default principal builder).
    pub fn principal(&self) -> Option<String> {
        let protocol = self.security_protocol();
        if !protocol.starts_with("sasl") {
            return None;
        }
        self.property("sasl.username")
            .map(|user| format!("User:{user}"))
    }

    /// Checks every property with librdkafka (a known name, a valid
    /// value), naming the first it refuses, where it was given and why;
    /// the refused value is never shown (a misspelt secret's key is unknown
    /// to librdkafka, but its value is still a secret), nor any secret's.
    pub fn check_properties(&self) -> Result<(), PropertiesError> {
        let mut config = ClientConfig::new();
        for property in &self.properties {
            config.set(&property.key, &property.value);
            if let Err(error) = config.create_native_config() {
                let why = match &error {
                    KafkaError::ClientConfig(_, description, _, _) => description.clone(),
                    other => other.to_string(),
                };
                let secrets = self
                    .properties
                    .iter()
                    .map(|p| (p.key.as_str(), p.value.as_str()));
                return Err(PropertiesError::Refused {
                    key: property.key.clone(),
                    origin: property.origin.clone(),
                    why: properties::redact_refused(&why, &property.value, secrets),
                });
            }
        }
        Ok(())
    }

    /// The same with another bound on every blocking call.
    pub fn with_timeout(mut self, timeout: Duration) -> LiveConfig {
        self.timeout = timeout;
        self
    }

    /// The same with another `transaction.timeout.ms` for the producers.
    pub fn with_transaction_timeout(mut self, timeout: Duration) -> LiveConfig {
        self.transaction_timeout = timeout;
        self
    }

    /// The same with one more librdkafka property for every client.
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> LiveConfig {
        self.properties.push(Property {
            key: key.into(),
            value: value.into(),
            origin: Origin::Code,
        });
        self
    }

    /// The runtime's own bound on a blocking librdkafka call: one and a half
    /// times [`LiveConfig::timeout`] plus a second. librdkafka is given
    /// `timeout` and usually keeps it, but a transactional call can block
    /// past it when the coordinator goes away (librdkafka issue 5456); a call
    /// still running at the deadline is abandoned ([`LiveError::Overran`](crate::LiveError::Overran)).
    pub fn deadline(&self) -> Duration {
        self.timeout + self.timeout / 2 + Duration::from_secs(1)
    }

    /// `settings` on top of the bootstrap servers and this instance's client
    /// id, then the user's properties. Every client the process makes
    /// carries `client.id` = `parsley-<instance>` ([`instance_name`]:
    /// `<host>-<pid>`), so the broker's logs, quotas and Kafka's own tools
    /// tell the processes apart, unless a setting or a property
    /// ([`LiveConfig::with_property`]) names another.
    ///
    /// [`instance_name`]: crate::instance::instance_name
    pub(crate) fn client_config(&self, settings: &[(&str, String)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        config.set("client.id", client_id());
        for (key, value) in settings {
            config.set(*key, value);
        }
        for property in &self.properties {
            config.set(&property.key, &property.value);
        }
        config
    }
}

/// The `client.id` of every client this process makes unless configured
/// otherwise: `parsley-<host>-<pid>`.
pub fn client_id() -> String {
    format!("parsley-{}", crate::instance::instance_name())
}

/// For tests against a broker: the one `KAFKA_BOOTSTRAP_SERVERS` names.
/// Without it, `None` after a note on stderr, so a test can return early;
/// but when `CI` is set, a panic, so CI never skips a live test silently.
pub fn test_broker() -> Option<LiveConfig> {
    if let Some(config) = LiveConfig::from_env() {
        return Some(config);
    }
    let in_ci = std::env::var_os("CI").is_some_and(|value| !value.is_empty());
    assert!(
        !in_ci,
        "{BOOTSTRAP_ENV} is not set, but CI is: start the broker first with \
         `export \"$(bash scripts/kafka/broker.sh start)\"`"
    );
    eprintln!(
        "note: live test skipped: {BOOTSTRAP_ENV} is not set \
         (`export \"$(bash scripts/kafka/broker.sh start)\"` starts a broker)"
    );
    None
}

/// Which records a fetch may return: Kafka's `isolation.level` (the
/// core's, shared with the harness's Kafka model).
pub use parsley::Isolation;

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21: every client carries the instance's client id, unless a
    /// setting or the user's property names another.
    #[test]
    fn every_client_carries_the_instance_client_id_unless_set() {
        let config = LiveConfig::new("localhost:9092");
        let expected = format!("parsley-{}", crate::instance::instance_name());
        assert_eq!(
            config.client_config(&[]).get("client.id"),
            Some(expected.as_str())
        );
        assert_eq!(client_id(), expected);
        let mine = config.client_config(&[("client.id", "membership".into())]);
        assert_eq!(mine.get("client.id"), Some("membership"));
        let user = LiveConfig::new("localhost:9092").with_property("client.id", "billing-7");
        assert_eq!(
            user.client_config(&[("client.id", "membership".into())])
                .get("client.id"),
            Some("billing-7")
        );
    }

    #[test]
    fn the_deadline_is_past_librdkafkas_own_timeout() {
        let config = LiveConfig::new("localhost:9092").with_timeout(Duration::from_secs(10));
        assert_eq!(config.deadline(), Duration::from_secs(16));
        assert!(LiveConfig::new("x:1").deadline() > DEFAULT_TIMEOUT);
    }
}
