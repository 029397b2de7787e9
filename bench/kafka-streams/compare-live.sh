#!/usr/bin/env bash
# Runs the order pipeline live on the local broker, Parsley's operators
# (examples/topologies/benches/live_shop.rs) against a Kafka Streams 4.4
# application doing the same with exactly_once_v2 (ShopPipeline.java beside
# this script), on the same input, alternately, and prints each side's
# records/s and CPU per record and the ratios; then, for reference, the live
# bench's raw rdkafka loop on the same broker (examples/topologies/benches/live.rs).
#
#   export "$(bash scripts/kafka/broker.sh start)"
#   bash bench/kafka-streams/compare-live.sh
#
# PARSLEY_SHOP_ORDERS (default 160000: 200,000 order records),
# PARSLEY_SHOP_ROUNDS (default 3), PARSLEY_SHOP_STORES (memory or rocksdb,
# the Java side's stores), PARSLEY_SHOP_THREADS (its num.stream.threads),
# PARSLEY_SHOP_JAVA_OPTS (its JVM flags): passed on to the bench.
# RAW (default 1): 0 skips the raw loop's reference run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

if [[ -z ${KAFKA_BOOTSTRAP_SERVERS:-} ]]; then
    echo "compare-live.sh: KAFKA_BOOTSTRAP_SERVERS is not set; start a broker first: export \"\$(bash scripts/kafka/broker.sh start)\"" >&2
    exit 2
fi

echo "compare-live.sh: building the Kafka Streams side" >&2
mvn_args=(-B -q -Dstyle.color=never -f "$here/pom.xml" package)
mvn -o "${mvn_args[@]}" >/dev/null 2>&1 || mvn "${mvn_args[@]}" >&2
export PARSLEY_SHOP_JAVA_CP="$here/target/kafka-streams-bench-1.0.jar:$(cat "$here/target/classpath.txt")"

# bench_binary NAME: builds the live bench NAME once (the dev profile reuses
# the live tests' librdkafka build) and prints its path.
bench_binary() {
    cargo bench -p parsley-examples --features live --bench "$1" --profile dev --no-run \
        --message-format=json-render-diagnostics |
        grep "\"name\":\"$1\"" |
        grep -o '"executable":"[^"]*"' |
        tail -n 1 | cut -d '"' -f 4
}

echo "compare-live.sh: building the Parsley side" >&2
shop_bin="$(bench_binary live_shop)" || true
if [[ -z $shop_bin || ! -x $shop_bin ]]; then
    echo "compare-live.sh: could not find the live_shop bench binary" >&2
    exit 1
fi
raw_bin=""
if [[ ${RAW:-1} != 0 ]]; then
    raw_bin="$(bench_binary live)" || true
fi

(cd "$root/examples/topologies" && "$shop_bin" --bench)

if [[ -n $raw_bin && -x $raw_bin ]]; then
    echo
    echo "reference: the raw rdkafka loop and Parsley balances (benches/live.rs), one round of the same record count"
    orders="${PARSLEY_SHOP_ORDERS:-160000}"
    (cd "$root/examples/topologies" &&
        PARSLEY_BENCH_RECORDS="$((orders + orders / 4))" PARSLEY_BENCH_ROUNDS=1 "$raw_bin" --bench)
fi
