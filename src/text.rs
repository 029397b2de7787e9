//! Record bytes in reports: as text when they are printable UTF-8 (JSON, the
//! examples' keys), as hex otherwise (a state in Kafka's long format), so a
//! violation never prints raw control bytes.

use std::fmt::Write;

/// `bytes` for a human: the text itself, or `0x` and two hex digits a byte.
pub fn bytes_for_humans(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.chars().any(char::is_control) => text.to_string(),
        _ => {
            let mut hex = String::with_capacity(2 + 2 * bytes.len());
            hex.push_str("0x");
            for byte in bytes {
                write!(hex, "{byte:02x}").expect("writing to a String cannot fail");
            }
            hex
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_stays_text_and_binary_becomes_hex() {
        assert_eq!(bytes_for_humans(b"{\"total\":3}"), "{\"total\":3}");
        assert_eq!(
            bytes_for_humans(&(-2i64).to_be_bytes()),
            "0xfffffffffffffffe"
        );
        assert_eq!(bytes_for_humans(b"a\nb"), "0x610a62");
        assert_eq!(bytes_for_humans(b""), "");
    }
}
