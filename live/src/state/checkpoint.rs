//! A task's checkpoint file: which prefix of its changelog partition the
//! local store reflects, and whose changelog that is. What it says and its
//! text are the core's ([`parsley::StoreCheckpoint`], S6); this module
//! reads and writes the file.
//!
//! The file is written whole to a temporary file, synced, renamed over the
//! old one and the directory synced (KIP-1035's idea): a crash at any
//! point leaves the old checkpoint or the new one, never a mix. A checksum
//! on the last line tells a torn or edited file from a valid one.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::Path;

pub use parsley::StoreCheckpoint as Checkpoint;

/// The file's name in a task's state directory.
pub const FILE: &str = "checkpoint";
const TEMP: &str = "checkpoint.tmp";

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
    #[error(transparent)]
    Corrupt(#[from] parsley::CheckpointCorrupt),
}

/// A checkpoint as a file in a task's directory.
pub trait CheckpointFile: Sized {
    /// Reads the checkpoint in directory `dir`.
    fn read(dir: &Path) -> Result<Self, ReadError>;
    /// Writes the checkpoint in directory `dir` so that a crash at any
    /// point leaves the old file or this one.
    fn write(&self, dir: &Path) -> io::Result<()>;
    /// Removes the checkpoint in `dir`, if there is one, durably.
    fn remove(dir: &Path) -> io::Result<()>;
}

impl CheckpointFile for Checkpoint {
    /// Reads the checkpoint in directory `dir`.
    fn read(dir: &Path) -> Result<Checkpoint, ReadError> {
        match fs::read_to_string(dir.join(FILE)) {
            Ok(text) => Ok(Checkpoint::from_text(&text)?),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Err(ReadError::Missing),
            Err(error) if error.kind() == io::ErrorKind::InvalidData => Err(ReadError::Corrupt(
                parsley::CheckpointCorrupt("it is not text".to_owned()),
            )),
            Err(error) => Err(ReadError::Io(error)),
        }
    }

    /// Writes the checkpoint in directory `dir` so that a crash at any
    /// point leaves the old file or this one: the text goes to a temporary
    /// file, which is synced, renamed over the old one, and the directory
    /// synced so the rename itself is durable.
    fn write(&self, dir: &Path) -> io::Result<()> {
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
    fn remove(dir: &Path) -> io::Result<()> {
        match fs::remove_file(dir.join(FILE)) {
            Ok(()) => File::open(dir)?.sync_all(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parsley::{record_fingerprint as fingerprint, LastApplied};

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
}
