# The steps the Kafka Streams comparisons share, sourced by compare.sh,
# compare-operators.sh, compare-live.sh and
# ../kafka-streams-transfers/run.sh. Each sets `me`, its name for messages,
# before sourcing this; the comparing ones define `measure SIDE ITEM`, which
# prints SIDE's records/s for ITEM (SIDE: parsley or kafka-streams).

# say WORDS: WORDS on stderr, after the script's name.
say() {
    echo "$me: $*" >&2
}

# check_rounds VALUE: fails (exit 2) unless VALUE is a positive integer.
check_rounds() {
    if ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
        say "ROUNDS must be a positive integer, not '$1'"
        exit 2
    fi
}

# java_classpath POM JAR: builds the Maven project POM and prints the
# classpath of its JAR (a name under its target/) and JAR's dependencies.
java_classpath() {
    local dir
    dir="$(dirname "$1")"
    say "building the Kafka Streams side"
    # Offline first, so a machine with a filled local repository needs no
    # network; online only if that fails (first run, or a compile error
    # shown again).
    local mvn_args=(-B -q -Dstyle.color=never -f "$1" package)
    mvn -o "${mvn_args[@]}" >/dev/null 2>&1 || mvn "${mvn_args[@]}" >&2 || return 1
    echo "$dir/target/$2:$(cat "$dir/target/classpath.txt")"
}

# bench_binary NAME CARGO_ARGS...: builds the bench NAME once, without
# running it, and prints its executable's path (or fails saying so). Each
# run is then of that file, with no cargo in it, so a later edit to the tree
# cannot rebuild it half-way through a comparison.
bench_binary() {
    local name=$1 bin
    shift
    bin="$(
        cargo bench "$@" --bench "$name" --no-run --message-format=json-render-diagnostics |
            grep "\"name\":\"$name\"" |
            grep -o '"executable":"[^"]*"' |
            tail -n 1 | cut -d '"' -f 4
    )" || true
    if [[ -z $bin || ! -x $bin ]]; then
        say "could not find the $name bench binary"
        return 1
    fi
    echo "$bin"
}

# median: the median of the numbers on stdin, one a line.
median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# field ITEM N: column N of ITEM's lines in $results, one a line.
field() {
    awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$results"
}

# compare_rounds ROUNDS WIDTH ITEM...: ROUNDS rounds, each measuring both
# sides once per ITEM, Parsley first in odd rounds and Kafka Streams first
# in even ones, so a drift in the machine's speed falls on both sides
# alike. Each measure is a line "ITEM ROUND PARSLEY KAFKA RATIO" in
# $results (a file the caller made) and a progress line on stderr, ITEM
# padded to WIDTH.
compare_rounds() {
    local rounds=$1 width=$2 round item side ratio order
    shift 2
    for ((round = 1; round <= rounds; round++)); do
        if ((round % 2)); then order=(parsley kafka-streams); else order=(kafka-streams parsley); fi
        for item in "$@"; do
            declare -A rate=()
            for side in "${order[@]}"; do
                rate[$side]="$(measure "$side" "$item")"
            done
            ratio="$(awk -v p="${rate[parsley]}" -v k="${rate[kafka-streams]}" 'BEGIN { printf "%.4f", p / k }')"
            echo "$item $round ${rate[parsley]} ${rate[kafka-streams]} $ratio" >>"$results"
            printf "%s: round %d/%d %-${width}s parsley %8.0f  kafka-streams %8.0f  ratio %.2f\n" \
                "$me" "$round" "$rounds" "$item" "${rate[parsley]}" "${rate[kafka-streams]}" "$ratio" >&2
            unset rate
        done
    done
}

# ratio_table WORD RECORDS ROUNDS TARGET ITEM...: the comparison's table
# from $results: per ITEM (a WORD), each side's median records/s and the
# median, lowest and highest per-round ratio; with a TARGET (not empty), a
# last column saying it.
ratio_table() {
    local word=$1 records=$2 rounds=$3 target=$4 item parsley kafka ratio low high
    shift 4
    echo "records per $word: $records, rounds: $rounds (medians over rounds; ratio is the median of the per-round ratios)"
    echo
    if [[ -n $target ]]; then
        echo "| $word | Parsley records/s | Kafka Streams records/s | ratio | ratio min | ratio max | target |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
    else
        echo "| $word | Parsley records/s | Kafka Streams records/s | ratio | ratio min | ratio max |"
        echo "|---|---:|---:|---:|---:|---:|"
    fi
    for item in "$@"; do
        parsley="$(field "$item" 3 | median)"
        kafka="$(field "$item" 4 | median)"
        ratio="$(field "$item" 5 | median)"
        low="$(field "$item" 5 | sort -g | head -n 1)"
        high="$(field "$item" 5 | sort -g | tail -n 1)"
        printf '| %s | %.0f | %.0f | %.2f | %.2f | %.2f |' "$item" "$parsley" "$kafka" "$ratio" "$low" "$high"
        if [[ -n $target ]]; then printf ' %s |' "$target"; fi
        echo
    done
}
