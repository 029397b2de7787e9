//! Whether the cluster can be reached at all, asked before any Kafka client
//! is made: librdkafka retries an unreachable bootstrap address quietly and
//! the first call that needs the cluster fails only at its own timeout, with
//! a message about metadata that never names the address. Here each
//! bootstrap address is resolved and connected to over TCP, and asked
//! Kafka's `ApiVersions` (the first request every client sends, answered
//! before any authentication), all addresses at once within one deadline;
//! the error names each address with its cause. An address that accepts
//! connections but never answers (a process that is no broker, a broker
//! frozen) fails as [`UnreachableCause::Silent`] within the deadline.
//!
//! The Kafka-level question is asked over a plaintext connection only: with
//! `security.protocol` `ssl` or `sasl_ssl` the TCP probe stops at TCP. Then,
//! on a secured listener (`ssl`, `sasl_plaintext`, `sasl_ssl`),
//! [`secure_probe`] completes the TLS handshake itself (naming an untrusted
//! or expired certificate, or one for another host) and has librdkafka
//! authenticate and answer a Metadata request, all within the same bound,
//! naming the SASL mechanism or the credentials the broker refused at once
//! rather than letting librdkafka retry them for ever
//! ([`SecureFailure`]).

use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Kafka's port when a bootstrap address names none (librdkafka's default).
const DEFAULT_PORT: u16 = 9092;

/// Why one bootstrap address could not be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnreachableCause {
    /// The address is not `host:port` (or `host`).
    BadAddress(String),
    /// The host name does not resolve.
    Dns(String),
    /// Nothing listens there: the connection was refused.
    Refused,
    /// No answer within the deadline.
    Timeout,
    /// The connection was accepted, but no Kafka answer to `ApiVersions`
    /// came within the deadline.
    Silent,
    /// The connection was accepted, but what came back is not Kafka's
    /// answer (a closed connection, another protocol).
    NotKafka(String),
    /// The listener speaks TLS: it answered the plaintext `ApiVersions`
    /// with a TLS alert. `security.protocol` is `plaintext` or
    /// `sasl_plaintext` where the listener wants `ssl` or `sasl_ssl`.
    SpeaksTls,
    /// Any other network error (no route to the host, say).
    Network(String),
}

impl fmt::Display for UnreachableCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnreachableCause::BadAddress(why) => write!(f, "not a host:port address ({why})"),
            UnreachableCause::Dns(why) => write!(f, "the host name does not resolve (DNS: {why})"),
            UnreachableCause::Refused => f.write_str("connection refused: nothing listens there"),
            UnreachableCause::Timeout => f.write_str("no answer: the connection timed out"),
            UnreachableCause::Silent => f.write_str(
                "the connection was accepted but no Kafka answer came (ApiVersions went unanswered): is a Kafka broker listening there, and is it alive?",
            ),
            UnreachableCause::NotKafka(why) => write!(f, "not a Kafka broker: {why}"),
            UnreachableCause::SpeaksTls => f.write_str(
                "the listener speaks TLS (it answered Kafka's plaintext ApiVersions with a TLS \
                 alert): set security.protocol to SSL, or SASL_SSL for SASL, for this listener",
            ),
            UnreachableCause::Network(why) => write!(f, "network error: {why}"),
        }
    }
}

/// One bootstrap address, why it could not be reached, and when that was
/// known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// The address as `bootstrap.servers` gives it.
    pub address: String,
    /// Why.
    pub cause: UnreachableCause,
    /// How long after the probe started the address failed: a refused
    /// connection fails in milliseconds, a timeout at the deadline.
    pub after: Duration,
}

impl fmt::Display for Unreachable {
    /// The address, the cause and how long it took to know it, worded for
    /// each cause: "refused after 3 ms", "timed out after 10.0 s".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let after = Elapsed(self.after);
        match &self.cause {
            UnreachableCause::Refused => write!(
                f,
                "{}: connection refused after {after}: nothing listens there",
                self.address
            ),
            UnreachableCause::Timeout => write!(
                f,
                "{}: no answer: the connection timed out after {after} (a host that drops \
                 the connection attempts: a firewall, a wrong address, a broker too busy to accept)",
                self.address
            ),
            UnreachableCause::Silent => write!(
                f,
                "{}: the connection was accepted but no Kafka answer came within {after} \
                 (ApiVersions went unanswered): is a Kafka broker listening there, and is it alive?",
                self.address
            ),
            cause => write!(f, "{}: {cause} (after {after})", self.address),
        }
    }
}

/// A duration as an operator reads it: milliseconds below a second, else
/// seconds with one decimal.
struct Elapsed(Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < Duration::from_secs(1) {
            write!(f, "{} ms", self.0.as_millis())
        } else {
            write!(f, "{:.1} s", self.0.as_secs_f64())
        }
    }
}

/// How far [`probe`] goes with each address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// A TCP connection is enough (TLS listeners, where a plaintext request
    /// would not be understood).
    Tcp,
    /// A TCP connection and an answer to Kafka's `ApiVersions` request.
    Kafka,
}

impl Depth {
    /// How far to go given librdkafka's `security.protocol` (`None`:
    /// plaintext): Kafka over plaintext and SASL over plaintext, TCP over
    /// TLS.
    pub fn for_protocol(protocol: Option<&str>) -> Depth {
        match protocol.map(str::to_ascii_lowercase).as_deref() {
            Some("ssl") | Some("sasl_ssl") => Depth::Tcp,
            _ => Depth::Kafka,
        }
    }
}

/// Why a secured connection to the cluster failed, after a bootstrap
/// address accepted TCP (`secure_probe`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecureFailure {
    /// The TLS handshake failed.
    Tls {
        /// The bootstrap address.
        address: String,
        /// Why.
        cause: TlsCause,
    },
    /// The broker does not enable the client's SASL mechanism
    /// (`sasl.mechanism`).
    Mechanism {
        /// The mechanism asked for.
        mechanism: String,
        /// librdkafka's words, naming the broker's mechanisms.
        detail: String,
    },
    /// The broker refused the credentials (`sasl.username`,
    /// `sasl.password`): a wrong password, an unknown user, or a user
    /// without credentials for the mechanism.
    Credentials {
        /// `User:<sasl.username>`, when set.
        principal: Option<String>,
        /// The mechanism.
        mechanism: String,
        /// librdkafka's words.
        detail: String,
    },
    /// The client's own TLS identity cannot be used: its key or
    /// certificate cannot be read, is not PEM, or cannot be decrypted with
    /// `ssl.key.password`. Found before any connection.
    ClientIdentity {
        /// The property naming the file or the PEM (with the file).
        what: String,
        /// Why, with the property to look at.
        why: String,
    },
    /// The handshake and authentication did not complete within the
    /// bound.
    NoAnswer {
        /// The bound.
        within: Duration,
        /// The last thing librdkafka said, if anything.
        detail: Option<String>,
    },
}

impl fmt::Display for SecureFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecureFailure::Tls { address, cause } => {
                write!(f, "{address}: the TLS handshake failed: {cause}")
            }
            SecureFailure::Mechanism { mechanism, detail } => write!(
                f,
                "SASL mechanism {mechanism} is not enabled on the broker (sasl.mechanism): {detail}"
            ),
            SecureFailure::Credentials {
                principal,
                mechanism,
                detail,
            } => write!(
                f,
                "authentication of {} with SASL {mechanism} failed: the credentials were refused \
                 (sasl.username, sasl.password): {detail}",
                principal.as_deref().unwrap_or("the client")
            ),
            SecureFailure::ClientIdentity { what, why } => write!(
                f,
                "the client's TLS key or certificate cannot be used: {what}: {why}"
            ),
            SecureFailure::NoAnswer { within, detail } => {
                write!(
                    f,
                    "the TLS handshake and SASL authentication did not complete within {}",
                    Elapsed(*within)
                )?;
                match detail {
                    Some(detail) => write!(f, ": {detail}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Why a TLS handshake failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsCause {
    /// The broker's certificate is not signed by a trusted CA
    /// (`ssl.ca.location`, `ssl.ca.pem`).
    Untrusted(String),
    /// The broker's certificate has expired, or is not valid yet.
    Expired(String),
    /// The broker's certificate is for another host name or address
    /// (`ssl.endpoint.identification.algorithm`).
    HostName(String),
    /// The listener does not speak TLS.
    NotTls(String),
    /// Anything else: the broker wants a client certificate, a file that
    /// cannot be read, a protocol mismatch.
    Other(String),
}

impl fmt::Display for TlsCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsCause::Untrusted(why) => write!(
                f,
                "the broker's certificate is not trusted ({why}): is ssl.ca.location the CA that signed it?"
            ),
            TlsCause::Expired(why) => write!(f, "the broker's certificate is out of date ({why})"),
            TlsCause::HostName(why) => write!(
                f,
                "the broker's certificate is for another host ({why}): connect by a name it holds, \
                 or set ssl.endpoint.identification.algorithm=none"
            ),
            TlsCause::NotTls(why) => write!(
                f,
                "the listener does not speak TLS ({why}): is security.protocol right for this port?"
            ),
            TlsCause::Other(why) => f.write_str(why),
        }
    }
}

/// Completes the TLS handshake (for `ssl` and `sasl_ssl`) and an
/// authenticated Metadata request (for every secured protocol) against
/// the cluster `config` names, within `within`. A refusal fails at once,
/// named; a cluster that does not finish in time fails as
/// [`SecureFailure::NoAnswer`]. Plaintext is not probed here.
pub fn secure_probe(
    config: &crate::client::LiveConfig,
    within: Duration,
) -> Result<(), SecureFailure> {
    let deadline = Instant::now() + within;
    let protocol = config.security_protocol();
    let verify = config
        .property("enable.ssl.certificate.verification")
        .is_none_or(|value| value != "false");
    if matches!(protocol.as_str(), "ssl" | "sasl_ssl") {
        client_identity_check(config)?;
        if verify {
            tls_check(config, deadline)?;
        }
    }
    if protocol == "plaintext" {
        return Ok(());
    }
    kafka_check(config, within, deadline)
}

/// The client's key and certificate, read and decrypted as librdkafka
/// will: a file that cannot be read, a key that is not PEM, or one that
/// `ssl.key.password` does not decrypt is named at once. librdkafka itself
/// would fail every connection with "PEM lib" and retry for ever.
fn client_identity_check(config: &crate::client::LiveConfig) -> Result<(), SecureFailure> {
    use openssl::pkey::PKey;
    let password = config.property("ssl.key.password");
    let failed = |what: String, why: String| SecureFailure::ClientIdentity { what, why };
    let key = match (
        config.property("ssl.key.location"),
        config.property("ssl.key.pem"),
    ) {
        (Some(location), _) => {
            let what = format!("ssl.key.location {location}");
            let bytes = std::fs::read(location)
                .map_err(|error| failed(what.clone(), format!("cannot be read: {error}")))?;
            Some((what, bytes))
        }
        (None, Some(pem)) => Some(("ssl.key.pem".to_string(), pem.as_bytes().to_vec())),
        (None, None) => None,
    };
    if let Some((what, bytes)) = key {
        let encrypted = bytes
            .windows(b"ENCRYPTED".len())
            .any(|window| window == b"ENCRYPTED");
        let loaded = match password {
            Some(password) => PKey::private_key_from_pem_passphrase(&bytes, password.as_bytes()),
            // Without a password OpenSSL would ask on the terminal.
            None => PKey::private_key_from_pem_callback(&bytes, |_| Ok(0)),
        };
        if let Err(error) = loaded {
            let why = match (encrypted, password.is_some()) {
                (true, true) => format!(
                    "the key is encrypted and ssl.key.password does not decrypt it (OpenSSL: {})",
                    first_reason(&error)
                ),
                (true, false) => {
                    "the key is encrypted: give its password as ssl.key.password".to_string()
                }
                (false, _) => format!("not a PEM private key (OpenSSL: {})", first_reason(&error)),
            };
            return Err(failed(what, why));
        }
    }
    if let Some(location) = config.property("ssl.keystore.location") {
        let what = format!("ssl.keystore.location {location}");
        let bytes = std::fs::read(location)
            .map_err(|error| failed(what.clone(), format!("cannot be read: {error}")))?;
        let store = openssl::pkcs12::Pkcs12::from_der(&bytes).map_err(|error| {
            failed(
                what.clone(),
                format!(
                    "not a PKCS#12 key store (OpenSSL: {})",
                    first_reason(&error)
                ),
            )
        })?;
        store
            .parse2(config.property("ssl.keystore.password").unwrap_or(""))
            .map_err(|error| {
                failed(
                    what,
                    format!(
                        "ssl.keystore.password does not open it (OpenSSL: {})",
                        first_reason(&error)
                    ),
                )
            })?;
    }
    if let Some(location) = config.property("ssl.certificate.location") {
        let what = format!("ssl.certificate.location {location}");
        let bytes = std::fs::read(location)
            .map_err(|error| failed(what.clone(), format!("cannot be read: {error}")))?;
        openssl::x509::X509::stack_from_pem(&bytes)
            .ok()
            .filter(|chain| !chain.is_empty())
            .ok_or_else(|| failed(what, "not a PEM certificate".into()))?;
    }
    Ok(())
}

/// OpenSSL's first reason, without its library's codes.
fn first_reason(error: &openssl::error::ErrorStack) -> String {
    error
        .errors()
        .first()
        .and_then(|error| error.reason())
        .unwrap_or("no reason given")
        .to_string()
}

/// The TLS handshake with the first bootstrap address that accepts TCP.
fn tls_check(config: &crate::client::LiveConfig, deadline: Instant) -> Result<(), SecureFailure> {
    use openssl::ssl::{HandshakeError, SslConnector, SslFiletype, SslMethod};
    let other = |address: &str, why: String| SecureFailure::Tls {
        address: address.to_owned(),
        cause: TlsCause::Other(why),
    };
    for address in config.bootstrap_servers.split(',').map(str::trim) {
        let bare = address.rsplit("://").next().unwrap_or(address);
        let Ok(sockets) = resolve(bare) else { continue };
        let host = match bare.rsplit_once(':') {
            Some((host, port)) if !port.ends_with(']') => host,
            _ => bare,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let Some(stream) = sockets
            .iter()
            .find_map(|socket| TcpStream::connect_timeout(socket, left).ok())
        else {
            continue;
        };
        let _ = stream.set_read_timeout(Some(left));
        let _ = stream.set_write_timeout(Some(left));
        let mut builder = SslConnector::builder(SslMethod::tls_client())
            .map_err(|error| other(address, format!("OpenSSL: {error}")))?;
        match config.property("ssl.ca.location") {
            Some(location) if location != "probe" => {
                let path = std::path::Path::new(location);
                if path.is_dir() {
                    // A directory of hashed certificates: librdkafka's own
                    // handshake judges it.
                    return Ok(());
                }
                builder.set_ca_file(path).map_err(|error| {
                    other(address, format!("ssl.ca.location {location}: {error}"))
                })?;
            }
            _ => {}
        }
        if let Some(pem) = config.property("ssl.ca.pem") {
            let certificates = openssl::x509::X509::stack_from_pem(pem.as_bytes())
                .map_err(|error| other(address, format!("ssl.ca.pem: {error}")))?;
            for certificate in certificates {
                builder
                    .cert_store_mut()
                    .add_cert(certificate)
                    .map_err(|error| other(address, format!("ssl.ca.pem: {error}")))?;
            }
        }
        if config.property("ssl.keystore.location").is_some()
            || config.property("ssl.key.password").is_some()
        {
            // A client identity this probe does not load: librdkafka's own
            // handshake judges it.
            return Ok(());
        }
        if let (Some(certificate), Some(key)) = (
            config.property("ssl.certificate.location"),
            config.property("ssl.key.location"),
        ) {
            builder
                .set_certificate_chain_file(certificate)
                .map_err(|error| {
                    other(
                        address,
                        format!("ssl.certificate.location {certificate}: {error}"),
                    )
                })?;
            builder
                .set_private_key_file(key, SslFiletype::PEM)
                .map_err(|error| other(address, format!("ssl.key.location {key}: {error}")))?;
        }
        let connector = builder.build();
        let mut session = connector
            .configure()
            .map_err(|error| other(address, format!("OpenSSL: {error}")))?;
        let check_host = config
            .property("ssl.endpoint.identification.algorithm")
            .is_none_or(|algorithm| algorithm.eq_ignore_ascii_case("https"));
        session.set_verify_hostname(check_host);
        return match session.connect(host, stream) {
            Ok(_) => Ok(()),
            Err(HandshakeError::Failure(failed)) => {
                let result = failed.ssl().verify_result();
                let why = result.error_string().to_string();
                let cause = match result.as_raw() {
                    0 => {
                        let text = failed.error().to_string();
                        if text.contains("wrong version number")
                            || text.contains("packet length too long")
                            || text.contains("record layer failure")
                        {
                            TlsCause::NotTls(text)
                        } else {
                            TlsCause::Other(text)
                        }
                    }
                    // X509_V_ERR_CERT_NOT_YET_VALID, _HAS_EXPIRED
                    9 | 10 => TlsCause::Expired(why),
                    // X509_V_ERR_HOSTNAME_MISMATCH, _IP_ADDRESS_MISMATCH
                    62 | 64 => TlsCause::HostName(why),
                    _ => TlsCause::Untrusted(why),
                };
                Err(SecureFailure::Tls {
                    address: address.to_owned(),
                    cause,
                })
            }
            Err(HandshakeError::WouldBlock(_)) => Err(SecureFailure::NoAnswer {
                within: deadline.saturating_duration_since(Instant::now()),
                detail: Some(format!("{address}: the TLS handshake went unanswered")),
            }),
            Err(HandshakeError::SetupFailure(error)) => {
                Err(other(address, format!("OpenSSL: {error}")))
            }
        };
    }
    Ok(())
}

/// What librdkafka's error callback said: its code, if any, and its words.
type Said = (Option<rdkafka::types::RDKafkaErrorCode>, String);

/// What librdkafka's error callback said while the probe waited.
#[derive(Clone, Default)]
struct Heard(std::sync::Arc<std::sync::Mutex<Vec<Said>>>);

impl rdkafka::ClientContext for Heard {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _log_message: &str) {}

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        if let Ok(mut heard) = self.0.lock() {
            heard.push((error.rdkafka_error_code(), reason.to_owned()));
        }
    }
}

impl rdkafka::producer::ProducerContext for Heard {
    type DeliveryOpaque = ();

    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
}

/// An authenticated Metadata request through librdkafka, failing at the
/// first TLS or SASL refusal its error callback reports.
fn kafka_check(
    config: &crate::client::LiveConfig,
    within: Duration,
    deadline: Instant,
) -> Result<(), SecureFailure> {
    use rdkafka::producer::{BaseProducer, Producer};
    use rdkafka::types::RDKafkaErrorCode as Code;
    let heard = Heard::default();
    let consumer: BaseProducer<Heard> = config
        .client_config(&[("client.id", "parsley-reach".into())])
        .create_with_context(heard.clone())
        .map_err(|error| SecureFailure::NoAnswer {
            within,
            detail: Some(format!("the probe's client could not be made: {error}")),
        })?;
    let mechanism = config
        .property("sasl.mechanism")
        .or_else(|| config.property("sasl.mechanisms"))
        .unwrap_or("GSSAPI")
        .to_owned();
    let mut last = None;
    loop {
        consumer.poll(Duration::from_millis(20));
        for (code, reason) in heard
            .0
            .lock()
            .map(|mut heard| std::mem::take(&mut *heard))
            .unwrap_or_default()
        {
            if reason.contains("mechanism handshake failed")
                || reason.contains("Unsupported SASL mechanism")
            {
                return Err(SecureFailure::Mechanism {
                    mechanism,
                    detail: reason,
                });
            }
            match code {
                Some(Code::Authentication | Code::SaslAuthenticationFailed) => {
                    return Err(SecureFailure::Credentials {
                        principal: config.principal(),
                        mechanism,
                        detail: reason,
                    })
                }
                Some(Code::SSL) => {
                    return Err(SecureFailure::Tls {
                        address: config.bootstrap_servers.clone(),
                        cause: if reason.contains("certificate verify failed")
                            || reason.contains("verify broker certificate")
                        {
                            TlsCause::Untrusted(reason)
                        } else {
                            TlsCause::Other(reason)
                        },
                    })
                }
                _ => last = Some(reason),
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SecureFailure::NoAnswer {
                within,
                detail: last,
            });
        }
        if consumer
            .client()
            .fetch_metadata(None, left.min(Duration::from_millis(250)))
            .is_ok()
        {
            return Ok(());
        }
    }
}

/// Resolves and connects to every address of `bootstrap` (comma-separated)
/// at once, and with [`Depth::Kafka`] asks each for its API versions; `Ok`
/// as soon as one answers, all within `within`. Returns every address's
/// failure, in the order given, when none does.
pub fn probe(bootstrap: &str, within: Duration, depth: Depth) -> Result<(), Vec<Unreachable>> {
    let started = Instant::now();
    let deadline = started + within;
    let addresses: Vec<String> = bootstrap
        .split(',')
        .map(str::trim)
        .filter(|address| !address.is_empty())
        .map(str::to_owned)
        .collect();
    if addresses.is_empty() {
        return Err(vec![Unreachable {
            address: bootstrap.to_string(),
            cause: UnreachableCause::BadAddress("no address given".to_string()),
            after: Duration::ZERO,
        }]);
    }
    // One thread per address, so a silent one does not use up the others'
    // time; a thread still waiting when another address answered finishes
    // by itself at the deadline.
    let (report, reports) = mpsc::channel();
    for (index, address) in addresses.iter().enumerate() {
        let (sender, address) = (report.clone(), address.clone());
        let spawned = std::thread::Builder::new()
            .name("parsley reach".into())
            .spawn(move || {
                let outcome = reach(&address, deadline, depth);
                let _ = sender.send((index, outcome, started.elapsed()));
            });
        if let Err(error) = spawned {
            let _ = report.send((
                index,
                Err(UnreachableCause::Network(error.to_string())),
                started.elapsed(),
            ));
        }
    }
    drop(report);
    let mut failures: Vec<Option<(UnreachableCause, Duration)>> = vec![None; addresses.len()];
    for (index, outcome, after) in reports {
        match outcome {
            Ok(()) => return Ok(()),
            Err(cause) => failures[index] = Some((cause, after)),
        }
    }
    Err(addresses
        .into_iter()
        .zip(failures)
        .map(|(address, failure)| {
            let (cause, after) = failure.unwrap_or((UnreachableCause::Timeout, within));
            Unreachable {
                address,
                cause,
                after,
            }
        })
        .collect())
}

/// One address: resolve it, connect to each resolved socket address until
/// one accepts, and with [`Depth::Kafka`] ask it for its API versions, all
/// before the deadline.
fn reach(address: &str, deadline: Instant, depth: Depth) -> Result<(), UnreachableCause> {
    // librdkafka accepts a protocol prefix (`PLAINTEXT://host:9092`).
    let bare = address.rsplit("://").next().unwrap_or(address);
    let sockets: Vec<SocketAddr> = resolve(bare)?;
    let mut last = UnreachableCause::Timeout;
    for socket in sockets {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(UnreachableCause::Timeout);
        }
        match TcpStream::connect_timeout(&socket, left) {
            Ok(stream) => {
                return match depth {
                    Depth::Tcp => Ok(()),
                    Depth::Kafka => api_versions(stream, deadline),
                }
            }
            Err(error) => {
                last = match error.kind() {
                    ErrorKind::ConnectionRefused => UnreachableCause::Refused,
                    ErrorKind::TimedOut | ErrorKind::WouldBlock => UnreachableCause::Timeout,
                    _ => UnreachableCause::Network(error.to_string()),
                }
            }
        }
    }
    Err(last)
}

/// The correlation id of the probe's request.
const CORRELATION_ID: i32 = 0x7061_7273; // "pars"

/// Kafka's `ApiVersions` request, version 0, with request header v1:
/// size, api key 18, api version 0, correlation id, client id; no body.
fn api_versions_request() -> Vec<u8> {
    let client_id = b"parsley-reach";
    let mut body = Vec::new();
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    let mut request = (body.len() as i32).to_be_bytes().to_vec();
    request.extend_from_slice(&body);
    request
}

/// Sends `ApiVersions` and waits, until the deadline, for the first eight
/// bytes of the answer: its size and the request's correlation id. Any
/// answer will do (a broker that does not support version 0 still answers,
/// with an error code): it is a Kafka broker, alive.
fn api_versions(mut stream: TcpStream, deadline: Instant) -> Result<(), UnreachableCause> {
    let left = |now: Instant| {
        let left = deadline.saturating_duration_since(now);
        (!left.is_zero())
            .then_some(left)
            .ok_or(UnreachableCause::Silent)
    };
    let io = |error: std::io::Error| match error.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => UnreachableCause::Silent,
        _ => UnreachableCause::NotKafka(format!("the connection failed: {error}")),
    };
    stream
        .set_write_timeout(Some(left(Instant::now())?))
        .map_err(io)?;
    stream.write_all(&api_versions_request()).map_err(io)?;
    let mut answer = [0u8; 8];
    let mut got = 0;
    while got < answer.len() {
        stream
            .set_read_timeout(Some(left(Instant::now())?))
            .map_err(io)?;
        match stream.read(&mut answer[got..]) {
            Ok(0) if is_tls_alert(&answer[..got]) => return Err(UnreachableCause::SpeaksTls),
            Ok(0) => {
                return Err(UnreachableCause::NotKafka(format!(
                    "the connection was closed after {got} byte(s) of an answer to ApiVersions"
                )))
            }
            Ok(read) => got += read,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(_) if is_tls_alert(&answer[..got]) => return Err(UnreachableCause::SpeaksTls),
            Err(error) => return Err(io(error)),
        }
    }
    if is_tls_alert(&answer) {
        return Err(UnreachableCause::SpeaksTls);
    }
    let correlation = i32::from_be_bytes([answer[4], answer[5], answer[6], answer[7]]);
    if correlation != CORRELATION_ID {
        return Err(UnreachableCause::NotKafka(format!(
            "the answer to ApiVersions carries correlation id {correlation}, not {CORRELATION_ID}"
        )));
    }
    Ok(())
}

/// True when `bytes` start a TLS alert record: content type 21, then a
/// TLS version 3.x (what a TLS listener sends back to bytes that are not
/// a TLS handshake; a Kafka answer starts with its size, whose first byte
/// is 0 for any answer under 16 MiB).
fn is_tls_alert(bytes: &[u8]) -> bool {
    bytes.len() >= 3 && bytes[0] == 0x15 && bytes[1] == 0x03 && bytes[2] <= 0x04
}

fn resolve(address: &str) -> Result<Vec<SocketAddr>, UnreachableCause> {
    let with_port = match address.rsplit_once(':') {
        // An IPv6 literal without a port is `[::1]`: its last colon is
        // inside the brackets.
        Some((_, port)) if !port.ends_with(']') => {
            port.parse::<u16>().map_err(|_| {
                UnreachableCause::BadAddress(format!("{port:?} is not a port number"))
            })?;
            address.to_string()
        }
        _ => format!("{address}:{DEFAULT_PORT}"),
    };
    let sockets: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|error| UnreachableCause::Dns(error.to_string()))?
        .collect();
    if sockets.is_empty() {
        return Err(UnreachableCause::Dns("no address for the host".to_string()));
    }
    Ok(sockets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    const SECOND: Duration = Duration::from_secs(1);

    /// A listener that answers the first eight bytes of an ApiVersions
    /// response (size, correlation id) to whatever it is sent, as a broker
    /// does.
    /// A plaintext client at a TLS listener: the listener answers the
    /// ApiVersions bytes with a TLS alert and closes, which is named as a
    /// TLS listener and points at security.protocol.
    #[test]
    fn a_tls_listener_answering_plaintext_is_named_as_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                // The whole request, as a TLS listener reads it, so its
                // close is a FIN, not a reset over unread bytes.
                let mut size = [0u8; 4];
                let _ = stream.read_exact(&mut size);
                let mut request = vec![0u8; i32::from_be_bytes(size) as usize];
                let _ = stream.read_exact(&mut request);
                // An alert record: fatal (2), protocol_version (70).
                let _ = stream.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]);
            }
        });
        let failures = probe(&address, SECOND * 5, Depth::Kafka).unwrap_err();
        assert_eq!(failures[0].cause, UnreachableCause::SpeaksTls);
        let text = failures[0].to_string();
        assert!(
            text.contains("speaks TLS") && text.contains("security.protocol"),
            "{text}"
        );
        assert!(!is_tls_alert(&[0, 0, 0, 6]));
    }

    /// A client key that cannot be read or decrypted fails before any
    /// connection, naming the file and ssl.key.password, never the
    /// password; the right password passes.
    #[test]
    fn an_undecryptable_client_key_is_named_with_its_file() {
        use openssl::{ec, nid::Nid, pkey::PKey, symm::Cipher};
        let group = ec::EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(ec::EcKey::generate(&group).unwrap()).unwrap();
        let pem = key
            .private_key_to_pem_pkcs8_passphrase(Cipher::aes_256_cbc(), b"right-pw-4711")
            .unwrap();
        let dir = std::env::temp_dir().join(format!("parsley-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("client.key");
        std::fs::write(&path, pem).unwrap();
        let location = path.display().to_string();
        let config = |password: Option<&str>, location: &str| {
            let config = crate::client::LiveConfig::new("127.0.0.1:1")
                .with_property("security.protocol", "ssl")
                .with_property("ssl.key.location", location);
            match password {
                Some(password) => config.with_property("ssl.key.password", password),
                None => config,
            }
        };
        let wrong = client_identity_check(&config(Some("wrong-pw-0815"), &location)).unwrap_err();
        let text = wrong.to_string();
        assert!(
            text.contains(&location) && text.contains("ssl.key.password does not decrypt"),
            "{text}"
        );
        assert!(!text.contains("wrong-pw-0815"), "{text}");
        let none = client_identity_check(&config(None, &location))
            .unwrap_err()
            .to_string();
        assert!(
            none.contains("give its password as ssl.key.password"),
            "{none}"
        );
        let missing = dir.join("absent.key").display().to_string();
        let absent = client_identity_check(&config(None, &missing))
            .unwrap_err()
            .to_string();
        assert!(
            absent.contains(&missing) && absent.contains("cannot be read"),
            "{absent}"
        );
        client_identity_check(&config(Some("right-pw-4711"), &location)).unwrap();
        // Before any connection: secure_probe fails at once, as TLS.
        let started = Instant::now();
        let failure =
            secure_probe(&config(Some("wrong-pw-0815"), &location), SECOND * 5).unwrap_err();
        assert!(
            matches!(failure, SecureFailure::ClientIdentity { .. }),
            "{failure}"
        );
        assert!(started.elapsed() < SECOND);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn fake_broker() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut size = [0u8; 4];
                    stream.read_exact(&mut size).unwrap();
                    let mut request = vec![0u8; i32::from_be_bytes(size) as usize];
                    stream.read_exact(&mut request).unwrap();
                    assert_eq!(&request[..4], &[0, 18, 0, 0], "ApiVersions v0");
                    let mut answer = 6i32.to_be_bytes().to_vec();
                    answer.extend_from_slice(&request[4..8]);
                    answer.extend_from_slice(&[0, 0]);
                    stream.write_all(&answer).unwrap();
                });
            }
        });
        address
    }

    #[test]
    fn a_listening_address_is_reached() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        assert_eq!(probe(&address, SECOND, Depth::Tcp), Ok(()));
        let broker = fake_broker();
        assert_eq!(probe(&broker, SECOND, Depth::Kafka), Ok(()));
        // One reachable address of several is enough.
        let free = free_port();
        assert_eq!(
            probe(&format!("127.0.0.1:{free},{broker}"), SECOND, Depth::Kafka),
            Ok(())
        );
    }

    /// Issue 21: an address that accepts connections and never answers
    /// fails within the deadline as silent, naming it; a silent address
    /// does not keep a live one from being reached.
    #[test]
    fn a_silent_listener_is_unreachable_within_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let started = Instant::now();
        let failures = probe(&address, SECOND, Depth::Kafka).unwrap_err();
        assert!(started.elapsed() < SECOND * 3, "{:?}", started.elapsed());
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0].address, address);
        assert_eq!(failures[0].cause, UnreachableCause::Silent);
        assert!(failures[0].after >= SECOND, "{failures:?}");
        assert!(
            failures[0].to_string().contains("no Kafka answer"),
            "{}",
            failures[0]
        );
        let broker = fake_broker();
        let started = Instant::now();
        assert_eq!(
            probe(&format!("{address},{broker}"), SECOND * 5, Depth::Kafka),
            Ok(())
        );
        assert!(started.elapsed() < SECOND, "{:?}", started.elapsed());
        drop(listener);
    }

    /// A listener that closes each connection at once is no broker.
    #[test]
    fn a_closing_listener_is_not_kafka() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                drop(stream);
            }
        });
        let failures = probe(&address, SECOND, Depth::Kafka).unwrap_err();
        assert!(
            matches!(failures[0].cause, UnreachableCause::NotKafka(_)),
            "{failures:?}"
        );
    }

    /// The real broker answers the probe (when one is configured).
    #[test]
    fn a_real_broker_answers_api_versions() {
        let Some(config) = crate::client::LiveConfig::from_env() else {
            return;
        };
        assert_eq!(
            probe(&config.bootstrap_servers, SECOND * 5, Depth::Kafka),
            Ok(())
        );
    }

    #[test]
    fn tls_is_probed_over_tcp_only() {
        assert_eq!(Depth::for_protocol(None), Depth::Kafka);
        assert_eq!(Depth::for_protocol(Some("SASL_PLAINTEXT")), Depth::Kafka);
        assert_eq!(Depth::for_protocol(Some("SSL")), Depth::Tcp);
        assert_eq!(Depth::for_protocol(Some("sasl_ssl")), Depth::Tcp);
    }

    /// A loopback port nothing listens on: port 1 is privileged and outside
    /// the ephemeral range, where a freed port could be met by a TCP
    /// self-connect (source port equal to the destination) and answer.
    fn free_port() -> u16 {
        1
    }

    #[test]
    fn a_closed_port_is_refused() {
        let address = format!("127.0.0.1:{}", free_port());
        let started = Instant::now();
        let failures = probe(&address, SECOND * 10, Depth::Kafka).unwrap_err();
        assert!(started.elapsed() < SECOND, "{:?}", started.elapsed());
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0].address, address);
        assert_eq!(failures[0].cause, UnreachableCause::Refused);
        assert!(failures[0].after < SECOND, "{failures:?}");
        // Issue 29: a refusal says it was refused, after how long, and not
        // that it was tried for the whole connect bound.
        let text = failures[0].to_string();
        assert!(
            text.starts_with(&format!("{address}: connection refused after ")),
            "{text}"
        );
        assert!(text.contains(" ms: nothing listens there"), "{text}");
        assert!(!text.contains("timed out"), "{text}");
    }

    /// A listener whose accept queue is full (backlog 0, one connection
    /// waiting): Linux drops further connection attempts, as a firewall
    /// does, and the attempt times out.
    fn blackhole() -> (tokio::net::TcpListener, TcpStream, String) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(0).unwrap();
        let address = listener.local_addr().unwrap();
        let filler = TcpStream::connect(address).unwrap();
        (listener, filler, address.to_string())
    }

    /// Issue 29: an address that drops connection attempts times out at
    /// the deadline, and says so with the time it waited; a refused one of
    /// the same bootstrap list says it was refused at once.
    #[tokio::test]
    async fn a_dropped_connection_times_out_and_a_refused_one_is_refused() {
        let (_listener, _filler, address) = blackhole();
        let refused = format!("127.0.0.1:{}", free_port());
        let started = Instant::now();
        let failures =
            probe(&format!("{refused},{address}"), SECOND * 2, Depth::Kafka).unwrap_err();
        let took = started.elapsed();
        assert!(took >= SECOND * 2 && took < SECOND * 4, "{took:?}");
        assert_eq!(failures[0].cause, UnreachableCause::Refused, "{failures:?}");
        assert!(failures[0].after < SECOND, "{failures:?}");
        assert_eq!(failures[1].cause, UnreachableCause::Timeout, "{failures:?}");
        assert!(failures[1].after >= SECOND * 2, "{failures:?}");
        let text = failures[1].to_string();
        assert!(
            text.starts_with(&format!(
                "{address}: no answer: the connection timed out after 2."
            )),
            "{text}"
        );
    }

    #[test]
    fn an_unknown_host_is_a_dns_failure() {
        let failures = probe("no-such-broker.invalid:9092", SECOND, Depth::Kafka).unwrap_err();
        assert!(
            matches!(failures[0].cause, UnreachableCause::Dns(_)),
            "{failures:?}"
        );
    }

    #[test]
    fn bad_addresses_are_named() {
        let failures = probe("localhost:nine", SECOND, Depth::Kafka).unwrap_err();
        assert_eq!(
            failures[0].cause,
            UnreachableCause::BadAddress("\"nine\" is not a port number".into())
        );
        let failures = probe(" , ", SECOND, Depth::Kafka).unwrap_err();
        assert!(matches!(failures[0].cause, UnreachableCause::BadAddress(_)));
    }

    #[test]
    fn a_host_without_a_port_gets_kafkas() {
        assert_eq!(
            resolve("127.0.0.1").unwrap(),
            ["127.0.0.1:9092".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(
            resolve("PLAINTEXT://127.0.0.1:1".rsplit("://").next().unwrap()).unwrap()[0].port(),
            1
        );
    }

    /// A certificate authority and a TLS listener on loopback whose
    /// certificate it signs, made on the spot: real OpenSSL handshakes,
    /// with no broker behind them.
    mod tls {
        use std::net::TcpListener;

        use openssl::asn1::Asn1Time;
        use openssl::bn::{BigNum, MsbOption};
        use openssl::ec::{EcGroup, EcKey};
        use openssl::hash::MessageDigest;
        use openssl::nid::Nid;
        use openssl::pkey::{PKey, Private};
        use openssl::ssl::{SslAcceptor, SslMethod};
        use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
        use openssl::x509::{X509NameBuilder, X509};

        const DAY: i64 = 86_400;

        fn key() -> PKey<Private> {
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
            PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
        }

        /// A certificate for `name` valid from `from` to `until` (Unix
        /// seconds), with the subject alternative names `san` (`ip` or
        /// `dns` entries), signed by `issuer` (itself when `None`: a CA).
        fn certificate(
            name: &str,
            key: &PKey<Private>,
            (from, until): (i64, i64),
            san: &[(&str, &str)],
            issuer: Option<(&X509, &PKey<Private>)>,
        ) -> X509 {
            let mut subject = X509NameBuilder::new().unwrap();
            subject.append_entry_by_text("CN", name).unwrap();
            let subject = subject.build();
            let mut builder = X509::builder().unwrap();
            builder.set_version(2).unwrap();
            let mut serial = BigNum::new().unwrap();
            serial.rand(64, MsbOption::MAYBE_ZERO, false).unwrap();
            builder
                .set_serial_number(&serial.to_asn1_integer().unwrap())
                .unwrap();
            builder.set_subject_name(&subject).unwrap();
            builder.set_pubkey(key).unwrap();
            builder
                .set_not_before(&Asn1Time::from_unix(from).unwrap())
                .unwrap();
            builder
                .set_not_after(&Asn1Time::from_unix(until).unwrap())
                .unwrap();
            match issuer {
                None => {
                    builder.set_issuer_name(&subject).unwrap();
                    builder
                        .append_extension(BasicConstraints::new().critical().ca().build().unwrap())
                        .unwrap();
                }
                Some((ca, _)) => builder.set_issuer_name(ca.subject_name()).unwrap(),
            }
            if !san.is_empty() {
                let mut names = SubjectAlternativeName::new();
                for (kind, value) in san {
                    match *kind {
                        "ip" => names.ip(value),
                        _ => names.dns(value),
                    };
                }
                let extension =
                    names.build(&builder.x509v3_context(issuer.map(|(ca, _)| &**ca), None));
                builder.append_extension(extension.unwrap()).unwrap();
            }
            let signer = issuer.map_or(key, |(_, key)| key);
            builder.sign(signer, MessageDigest::sha256()).unwrap();
            builder.build()
        }

        /// Now, in Unix seconds.
        fn now() -> i64 {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64
        }

        /// A TLS listener on loopback serving a certificate for `san`,
        /// valid from `from` to `until` days from now, signed by a fresh
        /// CA: its address and the CA's PEM. It answers handshakes until
        /// the test ends.
        pub(super) fn listener(
            san: &[(&str, &str)],
            (from, until): (i64, i64),
        ) -> (String, String) {
            let (ca_key, server_key) = (key(), key());
            let ca = certificate(
                "parsley test CA",
                &ca_key,
                (now() - DAY, now() + DAY),
                &[],
                None,
            );
            let server = certificate(
                "broker",
                &server_key,
                (now() + from * DAY, now() + until * DAY),
                san,
                Some((&ca, &ca_key)),
            );
            let mut acceptor = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).unwrap();
            acceptor.set_private_key(&server_key).unwrap();
            acceptor.set_certificate(&server).unwrap();
            let acceptor = acceptor.build();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap().to_string();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { return };
                    let _ = acceptor.accept(stream);
                }
            });
            let pem = String::from_utf8(ca.to_pem().unwrap()).unwrap();
            (address, pem)
        }
    }

    /// The TLS cause a probe failed with, if it failed in the handshake.
    fn tls_cause(failure: &SecureFailure) -> Option<&TlsCause> {
        match failure {
            SecureFailure::Tls { cause, .. } => Some(cause),
            _ => None,
        }
    }

    /// The TLS part of the probe against `address`, trusting `ca_pem`.
    fn tls_probe(address: &str, ca_pem: &str) -> Result<(), SecureFailure> {
        let config = crate::client::LiveConfig::new(address)
            .with_property("security.protocol", "ssl")
            .with_property("ssl.ca.pem", ca_pem);
        tls_check(&config, Instant::now() + 5 * SECOND)
    }

    /// A certificate the CA signed for the address dialled, in date: the
    /// handshake completes.
    #[test]
    fn a_valid_certificate_passes_the_tls_check() {
        let (address, ca) = tls::listener(&[("ip", "127.0.0.1")], (-1, 30));
        tls_probe(&address, &ca).unwrap();
    }

    /// An expired certificate, and one not valid yet, are named as out of
    /// date, not as untrusted.
    #[test]
    fn an_expired_certificate_is_named_as_out_of_date() {
        for dates in [(-30, -1), (1, 30)] {
            let (address, ca) = tls::listener(&[("ip", "127.0.0.1")], dates);
            let failure = tls_probe(&address, &ca).unwrap_err();
            assert!(
                matches!(&failure, SecureFailure::Tls { cause: TlsCause::Expired(_), address: named } if *named == address),
                "{dates:?}: {failure:?}"
            );
            assert!(failure.to_string().contains("out of date"), "{failure}");
        }
    }

    /// A certificate for another host, dialled by address or by name, is
    /// named as such, with the setting that turns the check off.
    #[test]
    fn a_certificate_for_another_host_is_named() {
        let (address, ca) = tls::listener(&[("dns", "broker.elsewhere.example")], (-1, 30));
        let failure = tls_probe(&address, &ca).unwrap_err();
        assert!(
            matches!(tls_cause(&failure), Some(TlsCause::HostName(_))),
            "{failure:?}"
        );
        assert!(
            failure
                .to_string()
                .contains("ssl.endpoint.identification.algorithm=none"),
            "{failure}"
        );
        let by_name = address.replace("127.0.0.1", "localhost");
        let failure = tls_probe(&by_name, &ca).unwrap_err();
        assert!(
            matches!(tls_cause(&failure), Some(TlsCause::HostName(_))),
            "{failure:?}"
        );
    }

    /// A certificate no trusted CA signed is named as untrusted.
    #[test]
    fn a_certificate_of_another_ca_is_untrusted() {
        let (address, _) = tls::listener(&[("ip", "127.0.0.1")], (-1, 30));
        let (_, other_ca) = tls::listener(&[("ip", "127.0.0.1")], (-1, 30));
        let failure = tls_probe(&address, &other_ca).unwrap_err();
        assert!(
            matches!(tls_cause(&failure), Some(TlsCause::Untrusted(_))),
            "{failure:?}"
        );
    }
}
