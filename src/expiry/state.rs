//! Expiring state's slots and their changelog encoding: each key's slot
//! holds its state and the time it expires; the task's tick slot holds its
//! clock (the expiry frontier, and the earliest expiry of a live key, so
//! that a delivery looks for keys to expire only when one is due).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};

/// The task's expiry clock (in its tick slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Clock {
    /// The expiry frontier (E2): the highest record timestamp delivered
    /// (stream time), or the last tick's time (wall clock). `i64::MIN`
    /// before the first.
    pub frontier: i64,
    /// The earliest frontier at which a live key may expire: no later than
    /// the earliest expiry, perhaps earlier (a rewritten key's old time).
    pub next_expiry: Option<i64>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            frontier: i64::MIN,
            next_expiry: None,
        }
    }
}

/// What a slot of expiring state holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExpirySlot<S> {
    /// The tick slot: the task's clock.
    Clock(Clock),
    /// A key's slot: its state and when it expires (E1).
    Entry { state: S, expires_at: i64 },
}

const TAG_CLOCK: u8 = 0;
const TAG_ENTRY: u8 = 1;

/// The slots on the changelog: a tag byte; a clock is its frontier (8
/// bytes, big-endian) and, when a key is live, its next expiry (8 bytes);
/// an entry is its expiry time (8 bytes) and the state in the user's codec.
pub(crate) struct ExpirySlotCodec<S> {
    pub state: Arc<dyn Codec<S>>,
}

fn refused(message: String) -> CodecError {
    CodecError {
        codec: "expiry-slot",
        direction: Direction::Decode,
        type_name: "expiring state slot",
        message,
    }
}

fn i64_at(bytes: &[u8], what: &str) -> Result<(i64, usize), CodecError> {
    let taken = bytes
        .get(..8)
        .ok_or_else(|| refused(format!("{what} needs 8 bytes, {} left", bytes.len())))?;
    Ok((i64::from_be_bytes(taken.try_into().expect("8 bytes")), 8))
}

impl<S: Send + Sync + 'static> Codec<ExpirySlot<S>> for ExpirySlotCodec<S> {
    fn encode(&self, value: &ExpirySlot<S>) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &ExpirySlot<S>, out: &mut BytesMut) -> Result<(), CodecError> {
        match value {
            ExpirySlot::Clock(clock) => {
                out.put_u8(TAG_CLOCK);
                out.put_i64(clock.frontier);
                if let Some(next) = clock.next_expiry {
                    out.put_i64(next);
                }
            }
            ExpirySlot::Entry { state, expires_at } => {
                out.put_u8(TAG_ENTRY);
                out.put_i64(*expires_at);
                self.state.encode_to(state, out)?;
            }
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<ExpirySlot<S>, CodecError> {
        let Some((&tag, rest)) = bytes.split_first() else {
            return Err(refused("an empty slot".into()));
        };
        match tag {
            TAG_CLOCK => {
                let (frontier, used) = i64_at(rest, "the frontier")?;
                let rest = &rest[used..];
                let next_expiry = match rest.is_empty() {
                    true => None,
                    false => Some(i64_at(rest, "the next expiry")?.0),
                };
                if rest.len() > 8 {
                    return Err(refused(format!("{} bytes after the clock", rest.len() - 8)));
                }
                Ok(ExpirySlot::Clock(Clock {
                    frontier,
                    next_expiry,
                }))
            }
            TAG_ENTRY => {
                let (expires_at, used) = i64_at(rest, "the expiry time")?;
                let state = self.state.decode(&rest[used..])?;
                Ok(ExpirySlot::Entry { state, expires_at })
            }
            tag => Err(refused(format!("an unknown tag {tag}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Json;

    fn codec() -> ExpirySlotCodec<Vec<String>> {
        ExpirySlotCodec {
            state: Arc::new(Json),
        }
    }

    #[test]
    fn slots_round_trip_and_bad_bytes_are_refused_naming_what() {
        let codec = codec();
        for slot in [
            ExpirySlot::Clock(Clock::default()),
            ExpirySlot::Clock(Clock {
                frontier: 5,
                next_expiry: Some(9),
            }),
            ExpirySlot::Entry {
                state: vec!["a".to_string()],
                expires_at: -3,
            },
        ] {
            let bytes = codec.encode(&slot).unwrap();
            assert_eq!(codec.decode(&bytes).unwrap(), slot);
        }
        for (bytes, needle) in [
            (&b""[..], "an empty slot"),
            (&b"\x00\x01"[..], "the frontier needs 8 bytes"),
            (&b"\x07"[..], "unknown tag 7"),
            (&b"\x01\x00\x00"[..], "the expiry time needs 8 bytes"),
        ] {
            let error = codec.decode(bytes).unwrap_err().to_string();
            assert!(error.contains(needle), "{error}");
        }
    }
}
