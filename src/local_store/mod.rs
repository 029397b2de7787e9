//! A task's local state store, as every driver keeps one (S6): which
//! prefix of its changelog partition the store reflects (its checkpoint),
//! when to checkpoint and in which order, and what a start does with what
//! it finds on disk: restore the changelog after the checkpoint, or clear
//! the store and rebuild it from the whole changelog, saying why.
//!
//! Sans-IO, as the rest of the core: a driver reads its store, its
//! checkpoint and its changelog and hands the facts here; the decision and
//! the order of a checkpoint's writes come back. The live runtime does the
//! I/O with fjall and files, the simulator with its model of a local disk
//! under crashes, so both drivers run the one rule. What an interactive
//! query of a slot answers (Q1) is decided here too: the store's committed
//! state, or a typed refusal.

mod checkpoint;
mod decision;
mod ledger;
mod query;
#[cfg(test)]
mod tests;

pub use checkpoint::{record_fingerprint, CheckpointCorrupt, LastApplied, StoreCheckpoint};
pub use decision::{
    check_last_applied, judge_opened, restore_start, CheckpointFound, Opened, RestoreStart,
};
pub use ledger::{CheckpointStep, StoreLedger};
pub use query::{
    answer_query, query_task, queryable_stage, QueryRefusal, QueryStanding, QueryStore,
    QueryTargetError, StoreBeside,
};
