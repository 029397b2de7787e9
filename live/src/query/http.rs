//! The query path's text in a URL, and the plain HTTP/1.1 GET the `query`
//! command asks an instance's endpoint with (one request a connection: no
//! client library for it).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `text` with every byte but RFC 3986's unreserved ones percent-encoded,
/// for one path segment (a `/` in a key is encoded too).
pub fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// A path segment's text: each `%XX` decoded; `None` for a `%` without
/// two hex digits or bytes that are not UTF-8.
pub fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = segment.get(index + 1..index + 3)?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

/// What an endpoint answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The `Location` header, on a redirect.
    pub location: Option<String>,
    /// The body.
    pub body: String,
}

/// `GET path` from the endpoint at `address` (`host:port`), within
/// `timeout` for the connection and again for each read.
pub fn http_get(address: &str, path: &str, timeout: Duration) -> std::io::Result<HttpAnswer> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let target = address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| invalid("the address resolves to nothing"))?;
    let mut stream = TcpStream::connect_timeout(&target, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| invalid("no end of the response's head"))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("no status line"))?;
    let mut location = None;
    let mut chunked = false;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "location" => location = Some(value.trim().to_owned()),
                "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
    }
    let body = if chunked {
        dechunk(body).ok_or_else(|| invalid("a malformed chunked body"))?
    } else {
        body.to_owned()
    };
    Ok(HttpAnswer {
        status,
        location,
        body,
    })
}

/// A chunked body's content.
fn dechunk(mut body: &str) -> Option<String> {
    let mut content = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(content);
        }
        content.push_str(rest.get(..size)?);
        body = rest.get(size + 2..)?;
    }
}
