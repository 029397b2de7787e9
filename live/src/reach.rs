//! Whether the cluster can be reached at all, asked before any Kafka client
//! is made: librdkafka retries an unreachable bootstrap address quietly and
//! the first call that needs the cluster fails only at its own timeout, with
//! a message about metadata that never names the address. Here each
//! bootstrap address is resolved and connected to over TCP, within one
//! deadline, and the error names each address with its cause.

use std::fmt;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
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
            UnreachableCause::Network(why) => write!(f, "network error: {why}"),
        }
    }
}

/// One bootstrap address and why it could not be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// The address as `bootstrap.servers` gives it.
    pub address: String,
    /// Why.
    pub cause: UnreachableCause,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.address, self.cause)
    }
}

/// Resolves and connects to each address of `bootstrap` (comma-separated)
/// until one accepts a TCP connection, all within `within`. Returns every
/// address's failure when none does.
pub fn probe(bootstrap: &str, within: Duration) -> Result<(), Vec<Unreachable>> {
    let deadline = Instant::now() + within;
    let addresses: Vec<&str> = bootstrap
        .split(',')
        .map(str::trim)
        .filter(|address| !address.is_empty())
        .collect();
    if addresses.is_empty() {
        return Err(vec![Unreachable {
            address: bootstrap.to_string(),
            cause: UnreachableCause::BadAddress("no address given".to_string()),
        }]);
    }
    let mut failures = Vec::new();
    for address in addresses {
        match reach(address, deadline) {
            Ok(()) => return Ok(()),
            Err(cause) => failures.push(Unreachable {
                address: address.to_string(),
                cause,
            }),
        }
    }
    Err(failures)
}

/// One address: resolve it, then connect to each resolved socket address
/// until one answers or the deadline passes.
fn reach(address: &str, deadline: Instant) -> Result<(), UnreachableCause> {
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
            Ok(_) => return Ok(()),
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

    #[test]
    fn a_listening_address_is_reached() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        assert_eq!(probe(&address, SECOND), Ok(()));
        // One reachable address of several is enough.
        let free = free_port();
        assert_eq!(
            probe(&format!("127.0.0.1:{free},{address}"), SECOND),
            Ok(())
        );
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
        let failures = probe(&address, SECOND).unwrap_err();
        assert_eq!(
            failures,
            [Unreachable {
                address: address.clone(),
                cause: UnreachableCause::Refused
            }]
        );
        assert!(failures[0]
            .to_string()
            .starts_with(&format!("{address}: connection refused")));
    }

    #[test]
    fn an_unknown_host_is_a_dns_failure() {
        let failures = probe("no-such-broker.invalid:9092", SECOND).unwrap_err();
        assert!(
            matches!(failures[0].cause, UnreachableCause::Dns(_)),
            "{failures:?}"
        );
    }

    #[test]
    fn bad_addresses_are_named() {
        let failures = probe("localhost:nine", SECOND).unwrap_err();
        assert_eq!(
            failures[0].cause,
            UnreachableCause::BadAddress("\"nine\" is not a port number".into())
        );
        let failures = probe(" , ", SECOND).unwrap_err();
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
}
