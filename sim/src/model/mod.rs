//! A deterministic in-memory model of what a Parsley task can observe of Kafka:
//! partitioned append-only logs, idempotent and transactional
//! producers, `read_committed` and `read_uncommitted` fetches, and committed
//! consumer-group offsets.
//!
//! # Logs and offsets
//!
//! Each partition is a log of [`Entry`]s at consecutive offsets. An entry is
//! either a data record or a transaction **control marker** (commit or abort).
//! As in Kafka, markers are written into the log and **take an offset** like
//! any record: they are how a consumer reading the log learns that the
//! records of a producer before it are committed or aborted. So offsets are
//! dense over entries but not over visible records: after one aborted record
//! (offset 0) and its abort marker (offset 1), the next committed record lands
//! at offset 2, and its commit marker at 3. Code that assumes "next offset =
//! last record + 1" breaks on a real transactional topic, and this model makes
//! such code break too.
//!
//! # Transactions and the last stable offset
//!
//! A transactional producer is registered with
//! [`init_producer`](Cluster::init_producer) under a transactional id and gets
//! a [`ProducerId`] (id and epoch). Re-initialising the same id bumps the
//! epoch, **fences** the older handle (its every call then fails with
//! [`ModelError::Fenced`]) and aborts its open transaction. A transaction is
//! `begin` … `send`/`send_offsets` … `commit` or `abort`; ending it writes one
//! marker on every partition it wrote to.
//!
//! The **last stable offset** (LSO) of a partition is the first offset of the
//! earliest transaction still open on it, or the high watermark (log end) if
//! none is. A `read_committed` consumer reads only below the LSO, because
//! above it lie records whose fate is not yet known — including records of
//! *other* producers, plain ones too, written after the open transaction
//! began: Kafka delivers in offset order, so nothing passes an undecided
//! record. Hence a producer that crashes with a transaction open leaves a
//! **hanging transaction** that stalls every `read_committed` consumer of the
//! partitions it touched, until the transaction is aborted by fencing (a new
//! `init_producer` with the same id) or by the coordinator's timeout
//! ([`expire_transactions`](Cluster::expire_transactions)). The model
//! reproduces the stall, so the simulator can exercise it.
//!
//! Below the LSO, a `read_committed` fetch returns plain records and records of
//! committed transactions, skipping aborted records and markers;
//! [`Fetch::next_offset`] moves past what was skipped. `read_uncommitted`
//! returns every data record up to the high watermark.
//!
//! # Group offsets
//!
//! Consumer-group offsets are written only through transactions
//! ([`send_offsets`](Cluster::send_offsets)), as Parsley does: they are staged
//! in the transaction and become visible through
//! [`committed`](Cluster::committed) only when it commits.
//!
//! # Determinism
//!
//! The model has no clock and no hashing-order dependence: callers pass
//! `now_ms` where time matters, producer ids are handed out in order, and
//! markers are written in tp order. The same calls in the same order give the
//! same logs, which is what lets a simulation be replayed from its tape.

mod cluster;
mod error;
mod log;

pub use cluster::{Cluster, CommittedOffset, LogId, ProducerId, DEFAULT_TRANSACTION_TIMEOUT_MS};
pub use error::ModelError;
pub use log::{AbortedTxn, ControlKind, Entry, EntryStatus, Fetch, FetchEnd, Isolation, LogView};

#[cfg(test)]
mod tests;
