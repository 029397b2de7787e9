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

me=compare-live.sh
# shellcheck source=bench/kafka-streams/compare-lib.sh
source "$here/compare-lib.sh"

if [[ -z ${KAFKA_BOOTSTRAP_SERVERS:-} ]]; then
    say "KAFKA_BOOTSTRAP_SERVERS is not set; start a broker first: export \"\$(bash scripts/kafka/broker.sh start)\""
    exit 2
fi

PARSLEY_SHOP_JAVA_CP="$(java_classpath "$here/pom.xml" kafka-streams-bench-1.0.jar)"
export PARSLEY_SHOP_JAVA_CP

# The live benches build in the dev profile, which reuses the live tests'
# librdkafka build.
live_bench=(-p parsley-examples --features live --profile dev)
say "building the Parsley side"
shop_bin="$(bench_binary live_shop "${live_bench[@]}")"
raw_bin=""
if [[ ${RAW:-1} != 0 ]]; then
    raw_bin="$(bench_binary live "${live_bench[@]}")" || true
fi

(cd "$root/examples/topologies" && "$shop_bin" --bench)

if [[ -n $raw_bin && -x $raw_bin ]]; then
    echo
    echo "reference: the raw rdkafka loop and Parsley balances (benches/live.rs), one round of the same record count"
    orders="${PARSLEY_SHOP_ORDERS:-160000}"
    (cd "$root/examples/topologies" &&
        PARSLEY_BENCH_RECORDS="$((orders + orders / 4))" PARSLEY_BENCH_ROUNDS=1 "$raw_bin" --bench)
fi
