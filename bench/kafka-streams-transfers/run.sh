#!/usr/bin/env bash
# The transfers test of internal consistency on Kafka Streams'
# TopologyTestDriver (Transfers.java beside this script).
#
#   bash bench/kafka-streams-transfers/run.sh FILE.csv
#       run the topology on the transfers in FILE.csv, one at a time and in
#       batches of 1,000, and print a line per mode:
#       mode=<mode> transfers=<n> totals=<n> impossible=<n> max_abs=<n>
#   bash bench/kafka-streams-transfers/run.sh generate N SEED FILE.csv
#       write N transfers drawn from SEED to FILE.csv (README.md, "Input")
#
# It works from any directory and builds the Java side first (`mvn package`;
# offline after the first run). JAVA_OPTS: extra JVM flags.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
me=run.sh
# shellcheck source=bench/kafka-streams/compare-lib.sh
source "$here/../kafka-streams/compare-lib.sh"

usage() {
    echo "usage: run.sh FILE.csv | run.sh generate N SEED FILE.csv" >&2
    exit 2
}
case "${1:-}" in
    generate) [[ $# == 4 ]] || usage; main=parsley.transfers.Generate; shift ;;
    '' | -*) usage ;;
    *) [[ $# == 1 ]] || usage; main=parsley.transfers.Transfers ;;
esac
read -r -a java_opts <<<"${JAVA_OPTS:-}"

java_cp="$(java_classpath "$here/pom.xml" kafka-streams-transfers-1.0.jar)"

exec java ${java_opts[@]+"${java_opts[@]}"} -cp "$java_cp" "$main" "$@"
