//! A windowed aggregation's slots and their changelog encoding: each key's
//! slot holds its open windows with their aggregates; the task's tick slot
//! holds its clock (the close frontier, and the earliest close of an open
//! window, so that a delivery looks for windows to close only when one is
//! due).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};

use super::assign::Span;

/// One open window of a key and its aggregate.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Open<A> {
    pub span: Span,
    pub aggregate: A,
    /// The highest timestamp of a record folded in: the timestamp of the
    /// window's emissions (W4), as Kafka Streams gives its aggregates. A
    /// session's is its end.
    pub latest: i64,
}

/// The task's window clock (in its tick slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Clock {
    /// The close frontier (W2): the highest record timestamp delivered
    /// (stream time), or the last tick's time (wall clock). `i64::MIN`
    /// before the first.
    pub frontier: i64,
    /// The earliest frontier at which an open window of any key closes.
    pub next_close: Option<i64>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            frontier: i64::MIN,
            next_close: None,
        }
    }
}

/// What a slot of a windowed aggregation holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum WindowSlot<A> {
    /// The tick slot: the task's clock.
    Clock(Clock),
    /// A key's slot: its open windows, earliest start first.
    Windows(Vec<Open<A>>),
}

const TAG_CLOCK: u8 = 0;
const TAG_WINDOWS: u8 = 1;

/// The slots on the changelog: a tag byte; a clock is its frontier (8
/// bytes, big-endian) and, when a window is open, its next close (8
/// bytes); windows are, each, start, end and latest record timestamp (8
/// bytes each), the aggregate's length (4 bytes) and the aggregate in the
/// user's codec.
pub(crate) struct WindowSlotCodec<A> {
    pub aggregate: Arc<dyn Codec<A>>,
}

fn refused(message: String) -> CodecError {
    CodecError {
        codec: "window-slot",
        direction: Direction::Decode,
        type_name: "windowed aggregation slot",
        message,
    }
}

/// Reads big-endian numbers off a slice, naming what ran short.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CodecError> {
        if self.bytes.len() < n {
            return Err(refused(format!(
                "{what} needs {n} bytes, {} left",
                self.bytes.len()
            )));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    fn i64(&mut self, what: &str) -> Result<i64, CodecError> {
        let bytes = self.take(8, what)?;
        Ok(i64::from_be_bytes(bytes.try_into().expect("8 bytes")))
    }

    fn u32(&mut self, what: &str) -> Result<u32, CodecError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_be_bytes(bytes.try_into().expect("4 bytes")))
    }
}

impl<A: Send + Sync + 'static> Codec<WindowSlot<A>> for WindowSlotCodec<A> {
    fn encode(&self, value: &WindowSlot<A>) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &WindowSlot<A>, out: &mut BytesMut) -> Result<(), CodecError> {
        match value {
            WindowSlot::Clock(clock) => {
                out.put_u8(TAG_CLOCK);
                out.put_i64(clock.frontier);
                if let Some(next) = clock.next_close {
                    out.put_i64(next);
                }
            }
            WindowSlot::Windows(windows) => {
                out.put_u8(TAG_WINDOWS);
                for open in windows {
                    out.put_i64(open.span.start);
                    out.put_i64(open.span.end);
                    out.put_i64(open.latest);
                    let aggregate = self.aggregate.encode(&open.aggregate)?;
                    let length = u32::try_from(aggregate.len()).map_err(|_| CodecError {
                        codec: "window-slot",
                        direction: Direction::Encode,
                        type_name: "windowed aggregation slot",
                        message: format!("an aggregate of {} bytes", aggregate.len()),
                    })?;
                    out.put_u32(length);
                    out.extend_from_slice(&aggregate);
                }
            }
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<WindowSlot<A>, CodecError> {
        let Some((&tag, rest)) = bytes.split_first() else {
            return Err(refused("an empty slot".into()));
        };
        let mut reader = Reader { bytes: rest };
        match tag {
            TAG_CLOCK => {
                let frontier = reader.i64("the frontier")?;
                let next_close = match reader.bytes.is_empty() {
                    true => None,
                    false => Some(reader.i64("the next close")?),
                };
                if !reader.bytes.is_empty() {
                    return Err(refused(format!(
                        "{} bytes after the clock",
                        reader.bytes.len()
                    )));
                }
                Ok(WindowSlot::Clock(Clock {
                    frontier,
                    next_close,
                }))
            }
            TAG_WINDOWS => {
                let mut windows: Vec<Open<A>> = Vec::new();
                while !reader.bytes.is_empty() {
                    let start = reader.i64("a window's start")?;
                    let end = reader.i64("a window's end")?;
                    let latest = reader.i64("a window's latest record timestamp")?;
                    let length = reader.u32("an aggregate's length")? as usize;
                    let aggregate = self
                        .aggregate
                        .decode(reader.take(length, "an aggregate")?)?;
                    if windows.last().is_some_and(|last| last.span.start >= start) {
                        return Err(refused("windows are not in start order".into()));
                    }
                    windows.push(Open {
                        span: Span { start, end },
                        aggregate,
                        latest,
                    });
                }
                Ok(WindowSlot::Windows(windows))
            }
            other => Err(refused(format!(
                "tag byte {other} (expected 0 = clock, 1 = windows)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::I64;

    fn codec() -> WindowSlotCodec<i64> {
        WindowSlotCodec {
            aggregate: Arc::new(I64),
        }
    }

    /// Slots read back as they were written; bytes that are not a slot are
    /// refused, naming what was wrong (§8).
    #[test]
    fn slots_round_trip_and_bad_bytes_are_refused() {
        let codec = codec();
        for slot in [
            WindowSlot::Clock(Clock::default()),
            WindowSlot::Clock(Clock {
                frontier: 7,
                next_close: Some(60),
            }),
            WindowSlot::Windows(vec![
                Open {
                    span: Span { start: 0, end: 60 },
                    aggregate: 5,
                    latest: 41,
                },
                Open {
                    span: Span { start: 30, end: 90 },
                    aggregate: -2,
                    latest: 30,
                },
            ]),
        ] {
            let bytes = codec.encode(&slot).unwrap();
            assert_eq!(codec.decode(&bytes).unwrap(), slot);
        }
        let unordered = codec
            .encode(&WindowSlot::Windows(vec![
                Open {
                    span: Span { start: 30, end: 90 },
                    aggregate: 1,
                    latest: 30,
                },
                Open {
                    span: Span { start: 0, end: 60 },
                    aggregate: 1,
                    latest: 0,
                },
            ]))
            .unwrap();
        let error = codec.decode(&unordered).unwrap_err();
        assert!(error.message.contains("start order"), "{error}");
        assert!(codec.decode(&[]).is_err());
        assert!(codec
            .decode(&[9])
            .unwrap_err()
            .message
            .contains("tag byte 9"));
        assert!(codec
            .decode(&[0, 1, 2])
            .unwrap_err()
            .message
            .contains("frontier"));
    }
}
