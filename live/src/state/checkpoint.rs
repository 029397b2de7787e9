//! A task's checkpoint: which prefix of its changelog partition the local
//! store reflects, and whose changelog that is.
//!
//! The file is small text, written whole to a temporary file, synced,
//! renamed over the old one and the directory synced (KIP-1035's idea): a
//! crash at any point leaves the old checkpoint or the new one, never a
//! mix. A checksum on the last line tells a torn or edited file from a
//! valid one.
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
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::Path;

/// The file's name in a task's state directory.
pub const FILE: &str = "checkpoint";
const TEMP: &str = "checkpoint.tmp";
const HEADER: &str = "parsley-state-checkpoint 1";

/// The last changelog record a local store applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastApplied {
    /// Its changelog offset.
    pub offset: u64,
    /// [`fingerprint`] of its key and value.
    pub fingerprint: u64,
}

/// What a task's checkpoint says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
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

/// Why a checkpoint file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No file: the store was never checkpointed (or was wiped).
    #[error("no checkpoint file")]
    Missing,
    /// The file could not be read.
    #[error("the checkpoint file could not be read: {0}")]
    Io(#[source] io::Error),
    /// The file is not a checkpoint this version wrote whole.
    #[error("the checkpoint file is corrupt: {0}")]
    Corrupt(String),
}

impl Checkpoint {
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
    pub fn from_text(text: &str) -> Result<Checkpoint, ReadError> {
        let corrupt = |why: &str| ReadError::Corrupt(why.to_owned());
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
        let mut field = |name: &str| -> Result<&str, ReadError> {
            lines
                .next()
                .and_then(|line| line.strip_prefix(name))
                .and_then(|rest| rest.strip_prefix(' '))
                .ok_or_else(|| ReadError::Corrupt(format!("its `{name}` line is missing")))
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
        Ok(Checkpoint {
            app,
            changelog,
            partition,
            offset,
            last,
        })
    }

    /// Reads the checkpoint in directory `dir`.
    pub fn read(dir: &Path) -> Result<Checkpoint, ReadError> {
        match fs::read_to_string(dir.join(FILE)) {
            Ok(text) => Checkpoint::from_text(&text),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Err(ReadError::Missing),
            Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                Err(ReadError::Corrupt("it is not text".to_owned()))
            }
            Err(error) => Err(ReadError::Io(error)),
        }
    }

    /// Writes the checkpoint in directory `dir` so that a crash at any
    /// point leaves the old file or this one: the text goes to a temporary
    /// file, which is synced, renamed over the old one, and the directory
    /// synced so the rename itself is durable.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let temp = dir.join(TEMP);
        {
            let mut file = File::create(&temp)?;
            file.write_all(self.to_text().as_bytes())?;
            file.sync_all()?;
        }
        fs::rename(&temp, dir.join(FILE))?;
        File::open(dir)?.sync_all()
    }

    /// Removes the checkpoint in `dir`, if there is one, durably: what the
    /// store holds next is claimed by no checkpoint until the next write.
    pub fn remove(dir: &Path) -> io::Result<()> {
        match fs::remove_file(dir.join(FILE)) {
            Ok(()) => File::open(dir)?.sync_all(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// A fingerprint of a changelog record's key and value (FNV-1a, 64 bits),
/// to tell the record a store last applied from another one at the same
/// offset.
pub fn fingerprint(key: &[u8], value: Option<&[u8]>) -> u64 {
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
fn crc32(bytes: &[u8]) -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            app: "orders".into(),
            changelog: "orders-count-state-changelog".into(),
            partition: 3,
            offset: 1042,
            last: Some(LastApplied {
                offset: 1041,
                fingerprint: fingerprint(b"\x01k", Some(b"v")),
            }),
        }
    }

    #[test]
    fn crc32_is_the_ieee_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn text_round_trips() {
        let checkpoint = sample();
        assert_eq!(
            Checkpoint::from_text(&checkpoint.to_text()).unwrap(),
            checkpoint
        );
        let empty = Checkpoint {
            offset: 0,
            last: None,
            ..sample()
        };
        assert_eq!(Checkpoint::from_text(&empty.to_text()).unwrap(), empty);
    }

    #[test]
    fn any_changed_or_missing_byte_is_refused() {
        let text = sample().to_text();
        for at in 0..text.len() {
            let mut torn = text.clone();
            torn.truncate(at);
            assert!(
                Checkpoint::from_text(&torn).is_err(),
                "a file cut at byte {at} was taken"
            );
            let mut bytes = text.clone().into_bytes();
            bytes[at] ^= 0x04;
            if let Ok(edited) = String::from_utf8(bytes) {
                assert!(
                    Checkpoint::from_text(&edited).is_err(),
                    "a file with byte {at} changed was taken"
                );
            }
        }
    }

    #[test]
    fn a_last_record_at_or_after_the_offset_is_refused() {
        let mut checkpoint = sample();
        checkpoint.last = Some(LastApplied {
            offset: checkpoint.offset,
            fingerprint: 7,
        });
        assert!(matches!(
            Checkpoint::from_text(&checkpoint.to_text()),
            Err(ReadError::Corrupt(_))
        ));
    }

    #[test]
    fn write_replaces_and_read_finds_it() {
        let dir = crate::state::tests::scratch_dir("checkpoint-write");
        assert!(matches!(Checkpoint::read(&dir), Err(ReadError::Missing)));
        let first = sample();
        first.write(&dir).unwrap();
        assert_eq!(Checkpoint::read(&dir).unwrap(), first);
        let second = Checkpoint {
            offset: 2000,
            ..sample()
        };
        second.write(&dir).unwrap();
        assert_eq!(Checkpoint::read(&dir).unwrap(), second);
        assert!(!dir.join(TEMP).exists(), "the temporary file was renamed");
        // A temporary file left by a crash before the rename changes nothing.
        fs::write(dir.join(TEMP), "parsley-state-checkpoint 1\napp x\n").unwrap();
        assert_eq!(Checkpoint::read(&dir).unwrap(), second);
        Checkpoint::remove(&dir).unwrap();
        assert!(matches!(Checkpoint::read(&dir), Err(ReadError::Missing)));
        Checkpoint::remove(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fingerprints_tell_keys_values_and_tombstones_apart() {
        let all = [
            fingerprint(b"ab", Some(b"c")),
            fingerprint(b"a", Some(b"bc")),
            fingerprint(b"ab", None),
            fingerprint(b"ab", Some(b"")),
            fingerprint(b"ab", Some(b"d")),
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
