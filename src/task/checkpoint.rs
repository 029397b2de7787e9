//! What a task commits beside its positions (G7, T3): its history stamp and
//! the time of its last tick, carried in the metadata string of the offsets it
//! sends to the transaction, so that both commit atomically with them (X1).
//!
//! Format: `parsley1:` followed by the hex of
//! `[has_tick:u8][last_tick_ms:i64 BE if has_tick][stamp header]`.

use crate::header;
use crate::stamp::Stamp;

use super::aligned::EpochCheckpoint;

const PREFIX: &str = "parsley1:";

/// What a task commits beside its positions (G7): its history and its last tick time, carried in the offsets' metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The task's history stamp (G4).
    pub history: Stamp,
    /// When the task last ticked, milliseconds since the epoch (T3).
    pub last_tick_at: Option<i64>,
    /// On a path to a consistent view, its epochs (V5): after the hex,
    /// `;` and [`EpochCheckpoint::encode_into`]'s text.
    pub epochs: Option<EpochCheckpoint>,
}

/// Committed offset metadata that is not a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("committed offset metadata is not a Parsley checkpoint: {reason}")]
pub struct CheckpointError {
    /// What is wrong with the metadata.
    pub reason: String,
}

impl Checkpoint {
    /// The metadata string: `parsley1:` and the hex of the encoding.
    pub fn encode(&self) -> String {
        let mut scratch = (Vec::new(), Vec::new());
        Self::encode_parts_into(
            &self.history,
            self.last_tick_at,
            self.epochs.as_ref(),
            &mut scratch,
        )
        .to_string()
    }

    /// [`Checkpoint::encode`] of a borrowed history: a task commits often and
    /// need not copy its history to write it.
    pub fn encode_parts(history: &Stamp, last_tick_at: Option<i64>) -> String {
        let mut scratch = (Vec::new(), Vec::new());
        Self::encode_parts_into(history, last_tick_at, None, &mut scratch).to_string()
    }

    /// [`Checkpoint::encode_parts`] written into `scratch` (the binary
    /// encoding, then its text), whose buffers the caller keeps from one
    /// commit to the next.
    pub fn encode_parts_into<'s>(
        history: &Stamp,
        last_tick_at: Option<i64>,
        epochs: Option<&EpochCheckpoint>,
        scratch: &'s mut (Vec<u8>, Vec<u8>),
    ) -> &'s str {
        let (bytes, text) = scratch;
        bytes.clear();
        match last_tick_at {
            Some(at) => {
                bytes.push(1);
                bytes.extend_from_slice(&at.to_be_bytes());
            }
            None => bytes.push(0),
        }
        let kept;
        let history = match crate::mutation::active(crate::mutation::Mutation::CheckpointKeeps16Tps)
        {
            true if history.len() > 16 => {
                kept = Stamp::from_claims(history.claims().iter().take(16).cloned());
                &kept
            }
            _ => history,
        };
        header::encode_into(history, bytes);
        const HEX: &[u8; 16] = b"0123456789abcdef";
        text.clear();
        text.resize(PREFIX.len() + bytes.len() * 2, 0);
        let (prefix, digits) = text.split_at_mut(PREFIX.len());
        prefix.copy_from_slice(PREFIX.as_bytes());
        for (pair, &byte) in digits.chunks_exact_mut(2).zip(bytes.iter()) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0xf)];
        }
        if let Some(epochs) = epochs {
            let mut tail = String::from(";");
            epochs.encode_into(&mut tail);
            text.extend_from_slice(tail.as_bytes());
        }
        std::str::from_utf8(text).expect("a prefix and hex digits are ASCII")
    }

    /// Reads a metadata string written by [`Checkpoint::encode`].
    pub fn decode(text: &str) -> Result<Checkpoint, CheckpointError> {
        let fail = |reason: String| CheckpointError { reason };
        let hex = text
            .strip_prefix(PREFIX)
            .ok_or_else(|| fail(format!("it does not start with {PREFIX:?}")))?;
        let (hex, epochs) = match hex.split_once(';') {
            Some((hex, epochs)) => (hex, Some(EpochCheckpoint::decode(epochs).map_err(fail)?)),
            None => (hex, None),
        };
        if hex.len() % 2 != 0 {
            return Err(fail("odd number of hex digits".into()));
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|at| {
                u8::from_str_radix(&hex[at..at + 2], 16)
                    .map_err(|_| fail(format!("bad hex at {at}")))
            })
            .collect::<Result<Vec<u8>, _>>()?;
        let (last_tick_at, rest) = match bytes.split_first() {
            Some((0, rest)) => (None, rest),
            Some((1, rest)) if rest.len() >= 8 => {
                let (at, rest) = rest.split_at(8);
                (
                    Some(i64::from_be_bytes(at.try_into().expect("8 bytes"))),
                    rest,
                )
            }
            _ => return Err(fail("missing or malformed tick time".into())),
        };
        let history = header::decode(rest).map_err(|error| fail(format!("history: {error}")))?;
        Ok(Checkpoint {
            history,
            last_tick_at,
            epochs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Claim, Tp};

    /// G7, T3: history and tick time survive the trip through offset metadata.
    #[test]
    fn g7_checkpoint_round_trips() {
        let checkpoint = Checkpoint {
            history: Stamp::from_claims([Claim::new(Tp::new("orders", 1), 41)]),
            last_tick_at: Some(1_700_000_060_000),
            epochs: Some(EpochCheckpoint {
                frontier: 1_700_000_061,
                lanes: vec![
                    (1_700_000_060, 42, vec![1_700_000_062]),
                    (i64::MIN, 0, vec![i64::MIN, 7]),
                ],
            }),
        };
        assert_eq!(
            Checkpoint::decode(&checkpoint.encode()).unwrap(),
            checkpoint
        );
        let empty = Checkpoint {
            history: Stamp::empty(),
            last_tick_at: None,
            epochs: None,
        };
        assert_eq!(Checkpoint::decode(&empty.encode()).unwrap(), empty);
        assert!(Checkpoint::decode(&format!("{};e1/x", empty.encode())).is_err());
        assert!(Checkpoint::decode("hello").is_err());
        assert!(Checkpoint::decode("parsley1:01ff").is_err());
    }
}
