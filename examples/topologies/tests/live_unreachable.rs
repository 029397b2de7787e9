//! An unreachable cluster is said at once, by address and cause: the
//! `parsley-live` commands exit 4 within the 10 s connect bound, naming the
//! bootstrap address and why it failed, instead of a metadata timeout that
//! names neither. No broker is needed: nothing listens on the addresses.

#![cfg(feature = "live")]

use std::process::Command;
use std::time::{Duration, Instant};

use parsley_live::{LiveClient, LiveConfig, LiveError};

/// A loopback port nothing listens on: port 1 (tcpmux) is privileged and
/// outside the ephemeral range. A freed ephemeral port would do on most
/// runs, but a connection to one can meet itself (TCP self-connect, the
/// source port picked equal to the destination) and succeed.
fn closed_port() -> u16 {
    1
}

#[test]
fn a_refused_address_fails_the_client_at_once_naming_it() {
    let address = format!("127.0.0.1:{}", closed_port());
    let started = Instant::now();
    let error = match LiveClient::new(LiveConfig::new(address.clone())) {
        Ok(_) => panic!("nothing listens on {address}"),
        Err(error) => error,
    };
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(matches!(error, LiveError::Unreachable { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(&format!("`{address}`")), "{message}");
    assert!(message.contains("connection refused"), "{message}");
}

#[test]
fn parsley_live_exits_4_naming_the_address_and_the_cause() {
    for (address, cause) in [
        (format!("127.0.0.1:{}", closed_port()), "connection refused"),
        (
            "no-such-broker.invalid:9092".to_string(),
            "does not resolve",
        ),
    ] {
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_parsley-live"))
            .args(["setup", "balances", "--bootstrap", &address])
            .output()
            .expect("parsley-live runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(4), "{address}: {stderr}");
        assert!(stderr.contains(&address), "{stderr}");
        assert!(stderr.contains(cause), "{stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(12),
            "{address}: took {:?}",
            started.elapsed()
        );
    }
}
