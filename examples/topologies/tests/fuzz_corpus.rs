//! The fuzz targets' bodies over their checked-in corpora, on the stable
//! toolchain: CI exercises exactly what `cargo +nightly fuzz run`
//! checks, through the same files (`fuzz/bodies/*.rs`), without libFuzzer.
//!
//! Corpora live in `fuzz/corpus/<target>/`, one input per file. Crashes the
//! fuzzers find are added there and pinned below as named tests with a
//! paragraph on the bug. `write_corpus` (ignored) regenerates the seed files.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

#[path = "../../../fuzz/bodies/stamp_decode.rs"]
mod stamp_decode_body;

// The causal-order body is shared with `properties.rs`: one module of the
// test binary (tests/main.rs).
use crate::causal_order_body;

#[path = "../../../fuzz/bodies/diamond.rs"]
mod diamond_body;

use causal_order_body::causal_order;
use stamp_decode_body::stamp_decode;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Every file of a target's corpus, sorted by name, with its bytes.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let entries = fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("cannot read the corpus {}: {error}", dir.display()));
    let mut files: Vec<(String, Vec<u8>)> = entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path
                .file_name()
                .expect("a file has a name")
                .to_string_lossy()
                .into_owned();
            let bytes = fs::read(&path)
                .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Runs `body` over every file of `target`'s corpus and reports every file
/// that panics, by name, with its panic message.
fn run_corpus(target: &str, body: fn(&[u8])) -> usize {
    let files = corpus(target);
    assert!(
        !files.is_empty(),
        "the {target} corpus in {} is empty",
        corpus_dir(target).display()
    );
    let failures: Vec<String> = files
        .iter()
        .filter_map(|(name, bytes)| {
            panic::catch_unwind(AssertUnwindSafe(|| body(bytes)))
                .err()
                .map(|payload| {
                    let message = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "a non-string panic".to_string());
                    format!("{target}/{name}: {message}")
                })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} corpus files fail:\n{}\nreplay one: cargo +nightly fuzz run {target} fuzz/corpus/{target}/<file>",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    files.len()
}

/// The stamp header decoder never panics on its corpus, and re-encodes what it
/// accepts byte for byte.
#[test]
fn stamp_decode_corpus_passes() {
    run_corpus("stamp_decode", stamp_decode);
}

/// The corpus holds both accepted and refused headers, so both halves of the
/// body run in CI.
#[test]
fn stamp_decode_corpus_has_valid_and_malformed_headers() {
    let files = corpus("stamp_decode");
    let accepted = files
        .iter()
        .filter(|(_, bytes)| parsley::header::decode(bytes).is_ok())
        .count();
    assert!(accepted >= 4, "only {accepted} valid headers in the corpus");
    assert!(
        files.len() - accepted >= 4,
        "only {} malformed headers in the corpus",
        files.len() - accepted
    );
}

/// Every tape of the causal-order corpus gives a run with no violation.
#[test]
fn causal_order_corpus_passes() {
    run_corpus("causal_order", causal_order);
}

fn diamond(data: &[u8]) {
    diamond_body::simulation().fuzz(data);
}

/// Every tape of the diamond's corpus gives a run with no violation.
#[test]
fn diamond_corpus_passes() {
    run_corpus("diamond", diamond);
}

/// The fuzz target's body does fail when the run breaks a rule: the same
/// tape with the gate ignoring claims.
#[test]
fn the_diamond_body_panics_on_a_broken_rule() {
    let broken = parsley_examples::registry()
        .simulation_with("diamond", diamond_body::simulation().settings())
        .unwrap()
        .planted(Some(parsley::mutation::Mutation::SharedGroup))
        .build()
        .unwrap();
    let found = (0..40u64).any(|seed| {
        let tape = broken.run_seed(seed).tape;
        panic::catch_unwind(AssertUnwindSafe(|| broken.fuzz(&tape))).is_err()
    });
    assert!(
        found,
        "no tape of 40 seeds broke a rule with the shared group planted"
    );
}

/// The corpus picks every scenario at least once (the first byte, mod 5).
#[test]
fn causal_order_corpus_covers_every_scenario() {
    let files = corpus("causal_order");
    for (index, name) in causal_order_body::SCENARIOS.iter().enumerate() {
        assert!(
            files.iter().any(
                |(_, bytes)| bytes.first().is_some_and(|pick| usize::from(*pick)
                    % causal_order_body::SCENARIOS.len()
                    == index)
            ),
            "no corpus file runs the {name} scenario"
        );
    }
}

// ----- the seed corpus -----

/// The seed inputs of the `stamp_decode` corpus, by name: headers of several
/// shapes, and malformed headers of every kind docs/RULES.md#bad-input names.
fn stamp_decode_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use parsley::header::{encode, OFFSET_MAX};
    use parsley::{Claim, Stamp, Tp};

    let stamp = |claims: &[(&str, u32, u64)]| -> Vec<u8> {
        let stamp: Stamp = claims
            .iter()
            .map(|&(topic, partition, offset)| Claim::new(Tp::new(topic, partition), offset))
            .collect();
        encode(&stamp).to_vec()
    };
    let long_name = "t".repeat(249);
    let multi = stamp(&[
        ("audits", 1, 0),
        ("orders", 0, 4),
        ("orders", 3, 300),
        ("payments-balances-ticks", 2, 70_000),
    ]);
    let mut trailing = multi.clone();
    trailing.push(0);
    let mut offset_too_big = vec![1, 1, 1, b'a', 1, 0];
    offset_too_big.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    vec![
        ("valid-empty", stamp(&[])),
        ("valid-one-claim", stamp(&[("orders", 0, 0)])),
        (
            "valid-one-topic-three-partitions",
            stamp(&[("orders", 0, 1), ("orders", 1, 127), ("orders", 2, 128)]),
        ),
        ("valid-several-topics", multi.clone()),
        (
            "valid-extremes",
            stamp(&[("o", u32::MAX, OFFSET_MAX), ("p", 0, 0)]),
        ),
        ("valid-longest-topic-name", stamp(&[(&long_name, 7, 9)])),
        ("bad-empty", Vec::new()),
        ("bad-unknown-version", vec![2, 0]),
        ("bad-truncated", multi[..multi.len() / 2].to_vec()),
        ("bad-trailing-byte", trailing),
        ("bad-non-minimal-varint", vec![1, 0x80, 0x00]),
        (
            "bad-varint-overflow",
            vec![
                1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
        ("bad-absurd-name-length", vec![1, 1, 0xc8, 0x01, b'a', b'b']),
        (
            "bad-topics-out-of-order",
            vec![1, 2, 1, b'b', 1, 0, 0, 1, b'a', 1, 0, 0],
        ),
        ("bad-repeated-partition", vec![1, 1, 1, b'a', 2, 1, 0, 1, 0]),
        ("bad-invalid-utf8", vec![1, 1, 1, 0xff, 1, 0, 0]),
        ("bad-empty-topic-name", vec![1, 1, 0, 1, 0, 0]),
        ("bad-topic-without-claims", vec![1, 1, 1, b'a', 0]),
        ("bad-offset-beyond-kafka", offset_too_big),
    ]
}

/// Bytes kept from the start of each seeded tape.
const SEEDED_TAPE_BYTES: usize = 2_000;

/// The seed inputs of the `causal_order` corpus, by name: the first bytes of
/// seeded runs' tapes (one per scenario), all-zero tapes (the simplest run:
/// no fault ever fires), and short and empty inputs.
fn causal_order_seeds() -> Vec<(String, Vec<u8>)> {
    let simulations = causal_order_body::simulations();
    let mut seeds = Vec::new();
    for (index, simulation) in simulations.iter().enumerate() {
        let seed = index as u64;
        let outcome = simulation.run_seed(seed);
        let mut input = vec![index as u8];
        input.extend_from_slice(&outcome.tape[..SEEDED_TAPE_BYTES.min(outcome.tape.len())]);
        seeds.push((format!("{}-seed-{seed}-2000b", simulation.name()), input));
    }
    for (index, name) in [(0, "balances"), (4, "fan-in")] {
        let mut input = vec![index];
        input.extend([0u8; 1_000]);
        seeds.push((format!("{name}-zeros-1000b"), input));
    }
    seeds.push(("empty".to_string(), Vec::new()));
    seeds.push(("timers-no-tape".to_string(), vec![2]));
    // A few words of all-ones: the first draws take the last option and fire
    // every fault they ask about, then the tape runs out.
    let mut ones = vec![3];
    ones.extend([0xff; 64]);
    seeds.push(("chain-ones-64b".to_string(), ones));
    let mut ramp = vec![1];
    ramp.extend((0..=255u8).cycle().take(512));
    seeds.push(("audit-cut-ramp-512b".to_string(), ramp));
    seeds
}

/// Rewrites the seed files of both corpora (files the fuzzers added, and
/// crash files, are left alone):
///
/// ```text
/// cargo test -p parsley-examples --test main -- --ignored fuzz_corpus::write_corpus
/// ```
#[test]
#[ignore = "writes the seed corpus into fuzz/corpus"]
fn write_corpus() {
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus_dir(target);
        fs::create_dir_all(&dir).expect("the corpus directory can be created");
        fs::write(dir.join(name), bytes).expect("the corpus file can be written");
    };
    for (name, bytes) in stamp_decode_seeds() {
        write("stamp_decode", name, &bytes);
    }
    for (name, bytes) in causal_order_seeds() {
        write("causal_order", &name, &bytes);
    }
    for seed in 0..3u64 {
        let tape = diamond_body::simulation().run_seed(seed).tape;
        let kept = &tape[..SEEDED_TAPE_BYTES.min(tape.len())];
        write("diamond", &format!("seed-{seed}-2000b"), kept);
    }
    write("diamond", "empty", &[]);
}
