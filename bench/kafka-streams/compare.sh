#!/usr/bin/env bash
# Runs the driver-patterns benchmark on both sides, Parsley's TestDriver
# (sim/benches/driver_patterns.rs) and Kafka Streams' TopologyTestDriver
# (PatternBench.java beside this script), alternately, and prints per pattern
# the median records/s of each side and the Parsley / Kafka Streams ratio.
#
#   bash bench/kafka-streams/compare.sh
#
# ROUNDS (default 5): rounds; each runs both sides once per pattern, Rust
#   first in odd rounds and Java first in even ones, so a drift in the
#   machine's speed falls on both sides alike.
# PARSLEY_PATTERN_RECORDS (default 100000): records per pattern, both sides.
# PARSLEY_PATTERN: compare that pattern only.
# PARSLEY_PATTERN_ROUNDS, PARSLEY_PATTERN_WARMUP: passed on to the benches.
# JAVA_OPTS: extra JVM flags.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
me=compare.sh
# shellcheck source=bench/kafka-streams/compare-lib.sh
source "$here/compare-lib.sh"

rounds="${ROUNDS:-5}"
check_rounds "$rounds"
export PARSLEY_PATTERN_RECORDS="${PARSLEY_PATTERN_RECORDS:-100000}"
patterns=(pipe-one pipe-list pipe-list-read-all pipe-one-read-each)
if [[ -n ${PARSLEY_PATTERN:-} ]]; then
    patterns=("$PARSLEY_PATTERN")
fi
read -r -a java_opts <<<"${JAVA_OPTS:-}"

java_cp="$(java_classpath "$here/pom.xml" kafka-streams-bench-1.0.jar)"
say "building the Parsley side"
rust_bin="$(bench_binary driver_patterns -p parsley-sim)"

# measure SIDE PATTERN: prints that side's records/s for PATTERN, or fails.
measure() {
    local side=$1 pattern=$2 out rate
    if [[ $side == parsley ]]; then
        # `cargo bench` runs it from the package root with `--bench`; so do we.
        out="$(cd "$root/sim" && PARSLEY_PATTERN="$pattern" "$rust_bin" --bench)"
    else
        out="$(PARSLEY_PATTERN="$pattern" java ${java_opts[@]+"${java_opts[@]}"} \
            -cp "$java_cp" parsley.bench.PatternBench)"
    fi
    rate="$(sed -n "s/^pattern=$pattern records=$PARSLEY_PATTERN_RECORDS .* records_per_s=\([0-9.]*\)\$/\1/p" <<<"$out")"
    if [[ -z $rate ]]; then
        say "$side printed no figure for $pattern:"
        echo "$out" >&2
        return 1
    fi
    echo "$rate"
}

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

compare_rounds "$rounds" 18 "${patterns[@]}"
ratio_table pattern "$PARSLEY_PATTERN_RECORDS" "$rounds" "" "${patterns[@]}"
