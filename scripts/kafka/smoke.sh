#!/usr/bin/env bash
# Smoke test for the loopback Kafka broker of scripts/kafka/broker.sh.
#
#   smoke.sh [--port N] [--keep]
#
# 1. starts the broker if none answers on the port,
# 2. creates two topics with 2 partitions each,
# 3. produces 3 keyed records with the console producer and reads them back
#    with the console consumer (read_committed),
# 4. runs TxnSmoke.java: one aborted transaction (2 records), then one
#    committed transaction (3 records); read_uncommitted must see all 5,
#    read_committed exactly the 3 committed ones,
# 5. stops the broker again if this script started it (--keep leaves it up;
#    a broker that was already running is never stopped).
#
# Every step is bounded in time; exit status 0 means everything checked out.
set -euo pipefail

DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BROKER="$DIR/broker.sh"
PORT="${PARSLEY_KAFKA_PORT:-19092}"
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        --port) PORT="$2"; shift 2 ;;
        --port=*) PORT="${1#*=}"; shift ;;
        --keep) KEEP=1; shift ;;
        *) echo "usage: smoke.sh [--port N] [--keep]" >&2; exit 2 ;;
    esac
done
BOOTSTRAP="127.0.0.1:$PORT"
STEP_TIMEOUT=90

say() { printf '[smoke] %s\n' "$*"; }
fail() { printf '[smoke] FAILED: %s\n' "$*" >&2; exit 1; }

tool() {  # tool MAIN ARGS... : a Kafka main class, bounded in time
    timeout -k 5 "$STEP_TIMEOUT" bash "$BROKER" tool "$@"
}

STARTED=0
WORK="$(mktemp -d)"
cleanup() {
    local rc=$?
    rm -rf "$WORK"
    if [ "$STARTED" = 1 ] && [ "$KEEP" = 0 ]; then
        bash "$BROKER" stop --port "$PORT" || rc=1
    fi
    if [ "$rc" = 0 ]; then say "SMOKE OK"; else say "SMOKE FAILED (exit $rc)"; fi
    exit "$rc"
}
trap cleanup EXIT

t0=$SECONDS
if bash "$BROKER" status --port "$PORT" >/dev/null 2>&1; then
    say "broker already running on $BOOTSTRAP; will leave it running"
else
    say "starting broker on $BOOTSTRAP"
    STARTED=1
    bash "$BROKER" start --port "$PORT" >/dev/null
fi

suffix="$(date +%s)-$$"
PLAIN="smoke-plain-$suffix"
TXN="smoke-txn-$suffix"

for t in "$PLAIN" "$TXN"; do
    tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
        --create --topic "$t" --partitions 2 --replication-factor 1
done
tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --describe --topic "$PLAIN" \
    | sed 's/^/  /'

# -- plain produce / consume -------------------------------------------------
say "producing 3 records to $PLAIN with ConsoleProducer"
printf 'k0:plain-0\nk1:plain-1\nk2:plain-2\n' |
    tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$BOOTSTRAP" --topic "$PLAIN" \
        --property parse.key=true --property key.separator=: \
        --producer-property acks=all --producer-property enable.idempotence=true

consume() {  # consume TOPIC ISOLATION [CONSOLE_CONSUMER_ARGS...] -> "partition key value" lines
    local topic="$1" iso="$2"
    shift 2
    # --timeout-ms makes the consumer exit once the topic is idle; it then
    # exits non-zero, so the record count on stderr is what we check.
    tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$BOOTSTRAP" \
        --topic "$topic" --from-beginning --isolation-level "$iso" \
        --property print.partition=true --property print.key=true \
        --property key.separator=' ' \
        --consumer-property group.id="smoke-$iso-$suffix" "$@" >"$WORK/consumer.out" 2>"$WORK/consumer.err" || true
    grep -E "^Processed a total of [0-9]+ messages" "$WORK/consumer.err" >&2 || {
        cat "$WORK/consumer.err" >&2
        fail "console consumer on $topic did not finish"
    }
    # Records only: newer versions also print deprecation notices on stdout.
    grep '^Partition:' "$WORK/consumer.out" || true
}
check() {  # check LABEL FILE EXPECTED_VALUES...
    local label="$1" file="$2"
    shift 2
    local got want
    got="$(awk '{print $NF}' "$file" | sort | tr '\n' ' ')"
    want="$(printf '%s\n' "$@" | sort | tr '\n' ' ')"
    sed 's/^/  /' "$file"
    [ "$got" = "$want" ] || fail "$label: expected [$want] got [$got]"
    say "$label: OK ($# records)"
}

say "consuming $PLAIN with ConsoleConsumer (read_committed)"
consume "$PLAIN" read_committed --timeout-ms 6000 >"$WORK/plain.txt"
check "plain read_committed" "$WORK/plain.txt" plain-0 plain-1 plain-2

# -- transactions: abort then commit ----------------------------------------
say "TxnSmoke: aborted transaction (2 records), then committed transaction (3 records) to $TXN"
CP="$(cat "$(bash "$BROKER" classpath)")"
timeout -k 5 "$STEP_TIMEOUT" java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="${PARSLEY_KAFKA_HOME:-$HOME/.cache/parsley-kafka}/log4j2-tools.properties" \
    -cp "$CP" "$DIR/TxnSmoke.java" "$BOOTSTRAP" "$TXN" | sed 's/^/  /'

say "consuming $TXN (read_uncommitted): expect all 5 records"
consume "$TXN" read_uncommitted --timeout-ms 6000 >"$WORK/uncommitted.txt"
check "txn read_uncommitted" "$WORK/uncommitted.txt" aborted-0 aborted-1 committed-0 committed-1 committed-2

say "consuming $TXN (read_committed): expect only the 3 committed records"
consume "$TXN" read_committed --timeout-ms 6000 >"$WORK/committed.txt"
check "txn read_committed" "$WORK/committed.txt" committed-0 committed-1 committed-2

say "all checks passed in $((SECONDS - t0))s"
