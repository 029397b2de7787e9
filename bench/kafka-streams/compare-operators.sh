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

rounds="${ROUNDS:-3}"
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
    echo "compare-operators.sh: ROUNDS must be a positive integer, not '$rounds'" >&2
    exit 2
fi
export PARSLEY_OPERATOR_RECORDS="${PARSLEY_OPERATOR_RECORDS:-100000}"
operators=(windows join)
if [[ -n ${PARSLEY_OPERATOR:-} ]]; then
    case $PARSLEY_OPERATOR in
        windows | join) operators=("$PARSLEY_OPERATOR") ;;
        *)
            echo "compare-operators.sh: PARSLEY_OPERATOR must be windows or join, not '$PARSLEY_OPERATOR'" >&2
            exit 2
            ;;
    esac
fi
read -r -a java_opts <<<"${JAVA_OPTS:-}"

echo "compare-operators.sh: building the Kafka Streams side" >&2
# Offline first, so a machine with a filled local repository needs no network;
# online only if that fails (first run, or a compile error shown again).
mvn_args=(-B -q -Dstyle.color=never -f "$here/pom.xml" package)
mvn -o "${mvn_args[@]}" >/dev/null 2>&1 || mvn "${mvn_args[@]}" >&2
java_cp="$here/target/kafka-streams-bench-1.0.jar:$(cat "$here/target/classpath.txt")"

echo "compare-operators.sh: building the Parsley side" >&2
# Built once and run directly, so each run has no cargo in it and a later
# edit to the tree cannot rebuild it half-way through the comparison.
rust_bin="$(
    cargo bench -p parsley-sim --bench operators --no-run \
        --message-format=json-render-diagnostics |
        grep '"name":"operators"' |
        grep -o '"executable":"[^"]*"' |
        tail -n 1 | cut -d '"' -f 4
)" || true
if [[ -z $rust_bin || ! -x $rust_bin ]]; then
    echo "compare-operators.sh: could not find the operators bench binary" >&2
    exit 1
fi

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
        echo "compare-operators.sh: $side printed no figure for $operator:" >&2
        echo "$out" >&2
        return 1
    fi
    # The Rust side's allocation counts, for the record.
    grep '^allocations ' <<<"$out" | sed 's/^/compare-operators.sh: /' >&2 || true
    echo "$rate"
}

# median: the median of the numbers on stdin, one a line.
median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# field OPERATOR N: column N of OPERATOR's result lines, one a line.
field() {
    awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$results"
}

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

for ((round = 1; round <= rounds; round++)); do
    if ((round % 2)); then order=(parsley kafka-streams); else order=(kafka-streams parsley); fi
    for operator in "${operators[@]}"; do
        declare -A rate=()
        for side in "${order[@]}"; do
            rate[$side]="$(measure "$side" "$operator")"
        done
        ratio="$(awk -v p="${rate[parsley]}" -v k="${rate[kafka-streams]}" 'BEGIN { printf "%.4f", p / k }')"
        echo "$operator $round ${rate[parsley]} ${rate[kafka-streams]} $ratio" >>"$results"
        printf 'compare-operators.sh: round %d/%d %-8s parsley %8.0f  kafka-streams %8.0f  ratio %.2f\n' \
            "$round" "$rounds" "$operator" "${rate[parsley]}" "${rate[kafka-streams]}" "$ratio" >&2
        unset rate
    done
done

echo "records per operator: $PARSLEY_OPERATOR_RECORDS, rounds: $rounds (medians over rounds; ratio is the median of the per-round ratios)"
echo
echo "| operator | Parsley records/s | Kafka Streams records/s | ratio | ratio min | ratio max | target |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for operator in "${operators[@]}"; do
    parsley="$(field "$operator" 3 | median)"
    kafka="$(field "$operator" 4 | median)"
    ratio="$(field "$operator" 5 | median)"
    low="$(field "$operator" 5 | sort -g | head -n 1)"
    high="$(field "$operator" 5 | sort -g | tail -n 1)"
    printf '| %s | %.0f | %.0f | %.2f | %.2f | %.2f | ≥ 5 |\n' "$operator" "$parsley" "$kafka" "$ratio" "$low" "$high"
done

if [[ ${MEMORY:-1} == 0 ]]; then
    exit 0
fi

# Memory is counted, not timed: one run of each side, the JVM without its
# warm-up rounds (they would only leave garbage behind).
echo "compare-operators.sh: measuring memory" >&2
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
