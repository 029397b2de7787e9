#!/usr/bin/env bash
# Runs the operators benchmark on both sides, Parsley's TestDriver
# (sim/benches/operators.rs) and Kafka Streams' TopologyTestDriver
# (OperatorBench.java beside this script), alternately, and prints per
# operator (a windowed aggregation, a stream–table join) the median records/s
# of each side and the Parsley / Kafka Streams ratio, then the heap per open
# window and per table row of each side.
#
#   bash bench/kafka-streams/compare-operators.sh
#
# ROUNDS (default 3): rounds; each runs both sides once per operator, Rust
#   first in odd rounds and Java first in even ones, so a drift in the
#   machine's speed falls on both sides alike.
# PARSLEY_OPERATOR_RECORDS (default 100000): records per operator, both sides.
# PARSLEY_OPERATOR: compare that operator only (windows or join).
# PARSLEY_OPERATOR_ROUNDS, PARSLEY_OPERATOR_WARMUP, PARSLEY_OPERATOR_CACHE:
#   passed on to the benches.
# MEMORY (default 1): 0 skips the memory figures.
# JAVA_OPTS: extra JVM flags.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
me=compare-operators.sh
# shellcheck source=bench/kafka-streams/compare-lib.sh
source "$here/compare-lib.sh"

rounds="${ROUNDS:-3}"
check_rounds "$rounds"
export PARSLEY_OPERATOR_RECORDS="${PARSLEY_OPERATOR_RECORDS:-100000}"
operators=(windows join)
if [[ -n ${PARSLEY_OPERATOR:-} ]]; then
    case $PARSLEY_OPERATOR in
        windows | join) operators=("$PARSLEY_OPERATOR") ;;
        *)
            say "PARSLEY_OPERATOR must be windows or join, not '$PARSLEY_OPERATOR'"
            exit 2
            ;;
    esac
fi
read -r -a java_opts <<<"${JAVA_OPTS:-}"

java_cp="$(java_classpath "$here/pom.xml" kafka-streams-bench-1.0.jar)"
say "building the Parsley side"
rust_bin="$(bench_binary operators -p parsley-sim)"

# run SIDE OPERATOR: that side's output for OPERATOR (windows, join or memory).
run() {
    local side=$1 operator=$2
    if [[ $side == parsley ]]; then
        # `cargo bench` runs it from the package root with `--bench`; so do we.
        (cd "$root/sim" && PARSLEY_OPERATOR="$operator" "$rust_bin" --bench)
    else
        PARSLEY_OPERATOR="$operator" java ${java_opts[@]+"${java_opts[@]}"} \
            -cp "$java_cp" parsley.bench.OperatorBench
    fi
}

# measure SIDE OPERATOR: prints that side's records/s for OPERATOR, or fails.
measure() {
    local side=$1 operator=$2 out rate
    out="$(run "$side" "$operator")"
    rate="$(sed -n "s/^operator=$operator records=$PARSLEY_OPERATOR_RECORDS outputs=[0-9]* .* records_per_s=\([0-9.]*\)\$/\1/p" <<<"$out")"
    if [[ -z $rate ]]; then
        say "$side printed no figure for $operator:"
        echo "$out" >&2
        return 1
    fi
    # The Rust side's allocation counts, for the record.
    grep '^allocations ' <<<"$out" | sed "s/^/$me: /" >&2 || true
    echo "$rate"
}

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

compare_rounds "$rounds" 8 "${operators[@]}"
ratio_table operator "$PARSLEY_OPERATOR_RECORDS" "$rounds" "≥ 5" "${operators[@]}"

if [[ ${MEMORY:-1} == 0 ]]; then
    exit 0
fi

# Memory is counted, not timed: one run of each side, the JVM without its
# warm-up rounds (they would only leave garbage behind).
say "measuring memory"
parsley_memory="$(run parsley memory)"
kafka_memory="$(PARSLEY_OPERATOR_WARMUP=0 run kafka-streams memory)"

# bytes OUTPUT WHAT SCOPE ENTRIES: bytes_per_entry of that line, or "–".
bytes() {
    local figure
    figure="$(sed -n "s/^memory=$2 scope=$3 entries=$4 bytes_per_entry=\([0-9.-]*\)\$/\1/p" <<<"$1")"
    echo "${figure:-–}"
}

echo
echo "| heap bytes per | entries | Parsley, whole driver | Parsley, the task alone | Kafka Streams, whole driver |"
echo "|---|---:|---:|---:|---:|"
for what in open-window table-row; do
    for entries in 10000 100000; do
        printf '| %s | %d | %s | %s | %s |\n' "$what" "$entries" \
            "$(bytes "$parsley_memory" "$what" driver "$entries")" \
            "$(bytes "$parsley_memory" "$what" task "$entries")" \
            "$(bytes "$kafka_memory" "$what" driver "$entries")"
    done
done
