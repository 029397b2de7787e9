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

rounds="${ROUNDS:-5}"
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
    echo "compare.sh: ROUNDS must be a positive integer, not '$rounds'" >&2
    exit 2
fi
export PARSLEY_PATTERN_RECORDS="${PARSLEY_PATTERN_RECORDS:-100000}"
patterns=(pipe-one pipe-list pipe-list-read-all pipe-one-read-each)
if [[ -n ${PARSLEY_PATTERN:-} ]]; then
    patterns=("$PARSLEY_PATTERN")
fi
read -r -a java_opts <<<"${JAVA_OPTS:-}"

echo "compare.sh: building the Kafka Streams side" >&2
# Offline first, so a machine with a filled local repository needs no network;
# online only if that fails (first run, or a compile error shown again).
mvn_args=(-B -q -Dstyle.color=never -f "$here/pom.xml" package)
mvn -o "${mvn_args[@]}" >/dev/null 2>&1 || mvn "${mvn_args[@]}" >&2
java_cp="$here/target/kafka-streams-bench-1.0.jar:$(cat "$here/target/classpath.txt")"

echo "compare.sh: building the Parsley side" >&2
# Built once and run directly, so each run has no cargo in it and a later
# edit to the tree cannot rebuild it half-way through the comparison.
rust_bin="$(
    cargo bench -p parsley-sim --bench driver_patterns --no-run \
        --message-format=json-render-diagnostics |
        grep '"name":"driver_patterns"' |
        grep -o '"executable":"[^"]*"' |
        tail -n 1 | cut -d '"' -f 4
)" || true
if [[ -z $rust_bin || ! -x $rust_bin ]]; then
    echo "compare.sh: could not find the driver_patterns bench binary" >&2
    exit 1
fi

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
        echo "compare.sh: $side printed no figure for $pattern:" >&2
        echo "$out" >&2
        return 1
    fi
    echo "$rate"
}

# median: the median of the numbers on stdin, one a line.
median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# field PATTERN N: column N of PATTERN's result lines, one a line.
field() {
    awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$results"
}

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

for ((round = 1; round <= rounds; round++)); do
    if ((round % 2)); then order=(parsley kafka-streams); else order=(kafka-streams parsley); fi
    for pattern in "${patterns[@]}"; do
        declare -A rate=()
        for side in "${order[@]}"; do
            rate[$side]="$(measure "$side" "$pattern")"
        done
        ratio="$(awk -v p="${rate[parsley]}" -v k="${rate[kafka-streams]}" 'BEGIN { printf "%.4f", p / k }')"
        echo "$pattern $round ${rate[parsley]} ${rate[kafka-streams]} $ratio" >>"$results"
        printf 'compare.sh: round %d/%d %-18s parsley %8.0f  kafka-streams %8.0f  ratio %.2f\n' \
            "$round" "$rounds" "$pattern" "${rate[parsley]}" "${rate[kafka-streams]}" "$ratio" >&2
        unset rate
    done
done

echo "records per pattern: $PARSLEY_PATTERN_RECORDS, rounds: $rounds (medians over rounds; ratio is the median of the per-round ratios)"
echo
echo "| pattern | Parsley records/s | Kafka Streams records/s | ratio | ratio min | ratio max |"
echo "|---|---:|---:|---:|---:|---:|"
for pattern in "${patterns[@]}"; do
    parsley="$(field "$pattern" 3 | median)"
    kafka="$(field "$pattern" 4 | median)"
    ratio="$(field "$pattern" 5 | median)"
    low="$(field "$pattern" 5 | sort -g | head -n 1)"
    high="$(field "$pattern" 5 | sort -g | tail -n 1)"
    printf '| %s | %.0f | %.0f | %.2f | %.2f | %.2f |\n' "$pattern" "$parsley" "$kafka" "$ratio" "$low" "$high"
done
