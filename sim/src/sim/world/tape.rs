//! Choice tapes as text: two hex digits a byte, as `shrink --tape-out`
//! writes them and regression files keep them.

use std::fmt::Write;

/// Why a text is not a hex tape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TapeError {
    /// The digits do not pair up into bytes.
    #[error("an odd number of hex digits")]
    OddDigits,
    /// Two characters that are not a hex byte.
    #[error("{0:?} is not a hex byte")]
    NotAByte(String),
}

/// `tape` as lowercase hex.
pub(crate) fn to_hex(tape: &[u8]) -> String {
    let mut hex = String::with_capacity(tape.len() * 2);
    for byte in tape {
        write!(hex, "{byte:02x}").expect("writing to a String cannot fail");
    }
    hex
}

/// `tape` without its trailing zero bytes: a tape reads zeros past its end,
/// so they replay the same run.
pub(crate) fn trimmed(tape: &[u8]) -> &[u8] {
    &tape[..tape
        .iter()
        .rposition(|byte| *byte != 0)
        .map_or(0, |last| last + 1)]
}

/// A hex tape back to bytes; whitespace and `#` comment lines are ignored.
/// The error says what is wrong with the text.
pub(crate) fn from_hex(text: &str) -> Result<Vec<u8>, TapeError> {
    let digits: Vec<u8> = text
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| line.bytes().filter(|byte| !byte.is_ascii_whitespace()))
        .collect();
    if digits.len() % 2 != 0 {
        return Err(TapeError::OddDigits);
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| TapeError::NotAByte(String::from_utf8_lossy(pair).into_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tape_round_trips_through_hex() {
        let tape = vec![0, 1, 0xab, 0xff];
        assert_eq!(to_hex(&tape), "0001abff");
        assert_eq!(from_hex("# a comment\n0001 ab\nff\n"), Ok(tape));
    }

    #[test]
    fn trailing_zeros_are_trimmed() {
        assert_eq!(trimmed(&[0, 3, 0, 0]), &[0, 3]);
        assert_eq!(trimmed(&[0, 0]), &[] as &[u8]);
    }

    #[test]
    fn bad_hex_is_named() {
        assert_eq!(from_hex("abc"), Err(TapeError::OddDigits));
        assert_eq!(
            from_hex("zz").map_err(|error| error.to_string()),
            Err("\"zz\" is not a hex byte".to_string())
        );
    }
}
