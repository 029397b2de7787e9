//! Encoded bytes (keys, values, stamp headers) cut from shared chunks.
//!
//! A record's bytes then cost no allocation of their own, and a copy of the
//! record (a fetch, a redelivery, a read in a test) counts a reference
//! instead of allocating. Each thread keeps one chunk to write into; a chunk
//! is freed when the last record cut from it is dropped, so a long-lived
//! record keeps at most one chunk alive.

use std::cell::Cell;
use std::convert::Infallible;

use bytes::{Bytes, BytesMut};

/// A fresh chunk's size: a few hundred small records.
const CHUNK_BYTES: usize = 16 * 1024;

thread_local! {
    static CHUNK: Cell<BytesMut> = Cell::new(BytesMut::new());
}

/// Runs `write` on the thread's chunk, which has at least `hint` bytes free
/// (it grows if `write` needs more), and cuts off what it wrote. On an error
/// nothing is cut and the written part is discarded.
pub(crate) fn write<E>(
    hint: usize,
    write: impl FnOnce(&mut BytesMut) -> Result<(), E>,
) -> Result<Bytes, E> {
    CHUNK.with(|cell| {
        // Taken out while `write` runs: a codec that encodes something else
        // inside its own encoding gets an empty chunk of its own, not a
        // second borrow.
        let mut chunk = cell.take();
        if chunk.capacity() < hint {
            chunk = BytesMut::with_capacity(CHUNK_BYTES.max(hint));
        }
        let written = write(&mut chunk);
        let cut = match written {
            Ok(()) => Ok(chunk.split().freeze()),
            Err(error) => {
                chunk.clear();
                Err(error)
            }
        };
        cell.set(chunk);
        cut
    })
}

/// [`write`] for a `fill` that cannot fail.
pub(crate) fn fill(hint: usize, fill: impl FnOnce(&mut BytesMut)) -> Bytes {
    let written = write(hint, |chunk| {
        fill(chunk);
        Ok::<(), Infallible>(())
    });
    match written {
        Ok(bytes) => bytes,
        Err(never) => match never {},
    }
}

/// A copy of `bytes` cut from the thread's chunk.
pub(crate) fn copy(bytes: &[u8]) -> Bytes {
    fill(bytes.len(), |chunk| chunk.extend_from_slice(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_hold_what_was_written_and_share_a_chunk() {
        let a = copy(b"account-1");
        let b = copy(b"42");
        assert_eq!(&a[..], b"account-1");
        assert_eq!(&b[..], b"42");
        // Cut from one chunk, back to back.
        assert_eq!(a.as_ptr().wrapping_add(a.len()), b.as_ptr());
    }

    #[test]
    fn a_failed_write_cuts_nothing_and_leaves_no_bytes_behind() {
        let failed: Result<Bytes, &str> = write(8, |chunk| {
            chunk.extend_from_slice(b"partial");
            Err("refused")
        });
        assert_eq!(failed, Err("refused"));
        assert_eq!(&copy(b"next")[..], b"next");
    }

    #[test]
    fn a_write_larger_than_a_chunk_gets_its_own() {
        let big = vec![7u8; CHUNK_BYTES * 3];
        assert_eq!(&copy(&big)[..], &big[..]);
        assert_eq!(&copy(b"small")[..], b"small");
    }

    #[test]
    fn a_write_inside_a_write_does_not_borrow_the_chunk_twice() {
        let outer = write(4, |chunk| {
            let inner = copy(b"inner");
            chunk.extend_from_slice(&inner);
            Ok::<(), Infallible>(())
        })
        .unwrap();
        assert_eq!(&outer[..], b"inner");
    }
}
