//! `parsley-sim`: the simulator's command-line runner over the example
//! topologies ([`parsley_examples::registry`]). See
//! [`parsley_sim::cli`] for the commands and exit codes.

use std::process::ExitCode;

/// Every record the simulator moves allocates; mimalloc is far cheaper at
/// that than the system allocator (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    parsley_sim::cli::main(parsley_examples::registry())
}
