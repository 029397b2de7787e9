//! What a task's checkpoint says, and its text.
//!
//! The text is small and checksummed; a driver writes it whole or not at
//! all (the live runtime through a temporary file renamed over the old
//! one, KIP-1035's idea). A checksum on the last line tells a torn or
//! edited file from a valid one.
//!
//! ```text
//! parsley-state-checkpoint 1
//! app orders
//! changelog orders-count-state-changelog
//! partition 3
//! offset 1042
//! last 1041 5a1b0c2d3e4f6071
//! crc32 0c1d2e3f
//! ```
//!
//! `offset` is the first changelog offset the store does not reflect:
//! a start restores the changelog from there. `last` is the offset of the
//! last changelog record the store applied and a fingerprint of its key
//! and value (`last none` when it applied none): a start reads that record
//! back to check the changelog is the one the store was built from.

use std::fmt::Write as _;

const HEADER: &str = "parsley-state-checkpoint 1";

/// The last changelog record a local store applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastApplied {
    /// Its changelog offset.
    pub offset: u64,
    /// [`record_fingerprint`] of its key and value.
    pub fingerprint: u64,
}

/// What a task's local-store checkpoint says (S6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreCheckpoint {
    /// The application whose task wrote it.
    pub app: String,
    /// The changelog topic the store was built from.
    pub changelog: String,
    /// Its partition.
    pub partition: u32,
    /// The first changelog offset the store does not reflect.
    pub offset: u64,
    /// The last changelog record the store applied, if any.
    pub last: Option<LastApplied>,
}

/// Why a checkpoint's text is not one this version wrote whole.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the checkpoint file is corrupt: {0}")]
pub struct CheckpointCorrupt(pub String);

impl StoreCheckpoint {
    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut body = String::new();
        let _ = writeln!(body, "{HEADER}");
        let _ = writeln!(body, "app {}", self.app);
        let _ = writeln!(body, "changelog {}", self.changelog);
        let _ = writeln!(body, "partition {}", self.partition);
        let _ = writeln!(body, "offset {}", self.offset);
        match self.last {
            Some(last) => {
                let _ = writeln!(body, "last {} {:016x}", last.offset, last.fingerprint);
            }
            None => body.push_str("last none\n"),
        }
        let crc = crc32(body.as_bytes());
        let _ = writeln!(body, "crc32 {crc:08x}");
        body
    }

    /// Reads a checkpoint back from its text.
    pub fn from_text(text: &str) -> Result<StoreCheckpoint, CheckpointCorrupt> {
        let corrupt = |why: &str| CheckpointCorrupt(why.to_owned());
        let at = text
            .rfind("crc32 ")
            .ok_or_else(|| corrupt("it has no checksum"))?;
        let (body, tail) = text.split_at(at);
        let stored = tail
            .strip_prefix("crc32 ")
            .and_then(|rest| rest.strip_suffix('\n'))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .ok_or_else(|| corrupt("its checksum line is malformed"))?;
        if crc32(body.as_bytes()) != stored {
            return Err(corrupt("its checksum does not match its contents"));
        }
        let mut lines = body.lines();
        if lines.next() != Some(HEADER) {
            return Err(corrupt("it is not a version-1 Parsley checkpoint"));
        }
        let mut field = |name: &str| -> Result<&str, CheckpointCorrupt> {
            lines
                .next()
                .and_then(|line| line.strip_prefix(name))
                .and_then(|rest| rest.strip_prefix(' '))
                .ok_or_else(|| CheckpointCorrupt(format!("its `{name}` line is missing")))
        };
        let app = field("app")?.to_owned();
        let changelog = field("changelog")?.to_owned();
        let partition = field("partition")?
            .parse()
            .map_err(|_| corrupt("its partition is not a number"))?;
        let offset = field("offset")?
            .parse()
            .map_err(|_| corrupt("its offset is not a number"))?;
        let last = match field("last")? {
            "none" => None,
            last => {
                let (offset, fingerprint) = last
                    .split_once(' ')
                    .ok_or_else(|| corrupt("its `last` line is malformed"))?;
                Some(LastApplied {
                    offset: offset
                        .parse()
                        .map_err(|_| corrupt("its last offset is not a number"))?,
                    fingerprint: u64::from_str_radix(fingerprint, 16)
                        .map_err(|_| corrupt("its fingerprint is not hexadecimal"))?,
                })
            }
        };
        if last.is_some_and(|last| last.offset >= offset) {
            return Err(corrupt("its last applied record is not before its offset"));
        }
        Ok(StoreCheckpoint {
            app,
            changelog,
            partition,
            offset,
            last,
        })
    }
}

/// A fingerprint of a changelog record's key and value (FNV-1a, 64 bits),
/// to tell the record a store last applied from another one at the same
/// offset.
pub fn record_fingerprint(key: &[u8], value: Option<&[u8]>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    feed(&(key.len() as u64).to_be_bytes());
    feed(key);
    match value {
        Some(value) => {
            feed(&[1]);
            feed(value);
        }
        None => feed(&[0]),
    }
    hash
}

/// CRC-32 (IEEE 802.3), bit by bit: the checkpoint is a few lines long.
pub(super) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
