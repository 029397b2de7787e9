#!/usr/bin/env bash
# Single-node Apache Kafka 4.x (KRaft) broker on loopback, for the live-adapter
# tests. The jars come from Maven Central through pom.xml next to
# this script; the resolved classpath is cached, so only the first run
# downloads anything.
#
#   broker.sh start   [--port N] [--controller-port N]
#   broker.sh stop    [--port N]
#   broker.sh status  [--port N]
#   broker.sh restart [--port N] [--controller-port N]
#   broker.sh bounce  [--port N]   stop and start the running broker, keeping
#                                  its storage (topics, offsets, transactions)
#   broker.sh down    [--port N]   stop the running broker, keeping its storage
#                                  (an outage; `up` ends it)
#   broker.sh up      [--port N]   start the broker again on the storage `down`
#                                  kept
#   broker.sh pause   [--port N]   freeze the running broker (SIGSTOP): it keeps
#                                  its connections but answers nothing
#   broker.sh resume  [--port N]   thaw it (SIGCONT)
#   broker.sh classpath            print the path of the cached classpath file
#   broker.sh start --secure       a second, secured broker (default port 19095):
#                                  clients on a SASL_SSL listener (SCRAM-SHA-256
#                                  only; a CA and a broker certificate for
#                                  localhost and 127.0.0.1 made on the spot with
#                                  openssl), StandardAuthorizer with
#                                  allow.everyone.if.no.acl.found=false; users
#                                  `admin` (super user) and `parsley-app` (no
#                                  ACLs), each password made afresh on every
#                                  start. Its one line on stdout is
#                                  PARSLEY_SECURE_KAFKA=<dir>, a directory with
#                                  `bootstrap` (127.0.0.1:<port>), `ca.pem`,
#                                  `other-ca.pem` (a CA the broker does not use),
#                                  `admin.properties` and `app.properties`
#                                  (client properties as Kafka's tools and
#                                  parsley_live::cli read them). Its controller
#                                  and broker-to-broker listeners are plaintext
#                                  on loopback (ports +1 and +2), whose anonymous
#                                  principal is a super user.
#   broker.sh stop --secure        (and status, restart, bounce, down, up, pause,
#                                  resume) the same for the secured broker
#   broker.sh tool MAIN [ARGS...]  run a Kafka main class (tools) on that classpath
#
# On a successful `start` (or `status`, or `start` of a broker that already
# runs) the only line on stdout is
#
#   KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:<port>
#
# so `export "$(scripts/kafka/broker.sh start)"` works; progress goes to stderr.
#
# Environment (all optional):
#   PARSLEY_KAFKA_HOME             state dir         (default ~/.cache/parsley-kafka)
#   PARSLEY_KAFKA_PORT             client port       (default 19092)
#   PARSLEY_KAFKA_CONTROLLER_PORT  controller port   (default client port + 1)
#   PARSLEY_KAFKA_VERSION          Kafka version     (default: <kafka.version> in pom.xml)
#   PARSLEY_KAFKA_START_TIMEOUT    seconds to wait for the broker    (default 60)
#   PARSLEY_KAFKA_STOP_TIMEOUT     seconds before SIGKILL on stop    (default 30)
#   PARSLEY_KAFKA_MVN_TIMEOUT      seconds for the Maven resolution  (default 900)
#   PARSLEY_KAFKA_HEAP_OPTS        broker heap       (default "-Xms256m -Xmx768m")
#   PARSLEY_KAFKA_TXN_MAX_TIMEOUT_MS  transaction.max.timeout.ms (default 60000)
#   PARSLEY_KAFKA_EXTRA_PROPS      extra server.properties lines (appended, win)
#   JAVA_HOME                      java is $JAVA_HOME/bin/java when set
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="$SCRIPT_DIR/pom.xml"
KHOME="${PARSLEY_KAFKA_HOME:-$HOME/.cache/parsley-kafka}"
PORT="${PARSLEY_KAFKA_PORT:-19092}"
CPORT="${PARSLEY_KAFKA_CONTROLLER_PORT:-}"
START_TIMEOUT="${PARSLEY_KAFKA_START_TIMEOUT:-60}"
STOP_TIMEOUT="${PARSLEY_KAFKA_STOP_TIMEOUT:-30}"
MVN_TIMEOUT="${PARSLEY_KAFKA_MVN_TIMEOUT:-900}"
HEAP_OPTS="${PARSLEY_KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
TXN_MAX_TIMEOUT_MS="${PARSLEY_KAFKA_TXN_MAX_TIMEOUT_MS:-60000}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
HOST=127.0.0.1   # loopback only, by design

BROKER_MAIN=kafka.Kafka
STORAGE_MAIN=kafka.tools.StorageTool

log() { printf '[kafka-broker] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# ---------------------------------------------------------------- arguments
CMD="${1:-}"
[ -n "$CMD" ] || usage
shift
TOOL_ARGS=()
SECURE=""
PORT_GIVEN=""
if [ "$CMD" = tool ]; then
    TOOL_ARGS=("$@")
    set --
fi
while [ $# -gt 0 ]; do
    case "$1" in
        --port) [ $# -ge 2 ] || usage; PORT="$2"; PORT_GIVEN=1; shift 2 ;;
        --port=*) PORT="${1#*=}"; PORT_GIVEN=1; shift ;;
        --controller-port) [ $# -ge 2 ] || usage; CPORT="$2"; shift 2 ;;
        --controller-port=*) CPORT="${1#*=}"; shift ;;
        --secure) SECURE=1; shift ;;
        -h|--help) usage ;;
        *) log "unknown argument: $1"; usage ;;
    esac
done
if [ -n "$SECURE" ] && [ -z "$PORT_GIVEN" ]; then
    PORT="${PARSLEY_KAFKA_SECURE_PORT:-19095}"
fi
is_uint "$PORT" && [ "$PORT" -gt 0 ] && [ "$PORT" -lt 65535 ] || die "bad port: $PORT"
[ -n "$CPORT" ] || CPORT=$((PORT + 1))
is_uint "$CPORT" && [ "$CPORT" -gt 0 ] && [ "$CPORT" -le 65535 ] || die "bad controller port: $CPORT"
[ "$CPORT" != "$PORT" ] || die "client and controller ports must differ"
for t in "$START_TIMEOUT" "$STOP_TIMEOUT" "$MVN_TIMEOUT"; do
    is_uint "$t" || die "timeouts must be whole seconds, got: $t"
done

# The secured broker's plaintext broker-to-broker listener, which the
# readiness probe asks (the client listener speaks only TLS).
IPORT=$((CPORT + 1))
PROBE_PORT="$PORT"
[ -z "$SECURE" ] || PROBE_PORT="$IPORT"
STATE="$KHOME/broker-$PORT"
SECDIR="$STATE/secure"
PIDFILE="$STATE/broker.pid"
BROKER_LOG="$STATE/broker.log"
PROPS="$STATE/server.properties"
DATA="$STATE/data"
BOOTSTRAP="$HOST:$PORT"
mkdir -p "$KHOME"

# ---------------------------------------------------------------- classpath
pom_version() {
    sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' "$POM" | head -n1
}
KAFKA_VERSION="${PARSLEY_KAFKA_VERSION:-$(pom_version)}"
[ -n "$KAFKA_VERSION" ] || die "cannot read <kafka.version> from $POM"

classpath_file() {
    local key
    key="$( { cat "$POM"; echo "$KAFKA_VERSION"; } | sha256sum | cut -c1-12)"
    echo "$KHOME/classpath-$KAFKA_VERSION-$key.txt"
}

classpath_valid() {  # every entry of the cached classpath still exists
    local f="$1" jar
    [ -s "$f" ] || return 1
    local IFS=:
    for jar in $(cat "$f"); do [ -f "$jar" ] || return 1; done
    return 0
}

# Prints the classpath; resolves it with Maven on first use (or when pom.xml,
# the version or the local repository changed).
classpath() {
    local cpf
    cpf="$(classpath_file)"
    if ! classpath_valid "$cpf"; then
        (
            exec 8>"$KHOME/classpath.lock"
            flock -w "$MVN_TIMEOUT" 8 || die "timed out waiting for $KHOME/classpath.lock"
            if ! classpath_valid "$cpf"; then
                command -v mvn >/dev/null || die "mvn not found (needed once to fetch the Kafka jars)"
                log "resolving Kafka $KAFKA_VERSION jars with Maven (first run downloads; bounded ${MVN_TIMEOUT}s)..."
                local t0=$SECONDS tmp="$cpf.tmp.$$" mlog="$KHOME/mvn.log"
                if ! timeout "$MVN_TIMEOUT" mvn -q -B -f "$POM" \
                        -Dkafka.version="$KAFKA_VERSION" \
                        dependency:build-classpath -Dmdep.outputFile="$tmp" \
                        >"$mlog" 2>&1 </dev/null; then
                    tail -n 40 "$mlog" >&2 || true
                    rm -f "$tmp"
                    die "Maven could not resolve Kafka $KAFKA_VERSION (full log: $mlog)"
                fi
                classpath_valid "$tmp" || { rm -f "$tmp"; die "Maven produced an empty classpath"; }
                mv -f "$tmp" "$cpf"
                log "classpath resolved in $((SECONDS - t0))s, cached in $cpf"
            fi
        ) || exit 1
    fi
    cat "$cpf"
}

tools_log4j() {
    local f="$KHOME/log4j2-tools.properties"
    if [ ! -s "$f" ]; then
        cat >"$f.tmp.$$" <<'EOF'
# Kafka command-line tools: warnings and errors only, on stderr.
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
EOF
        mv -f "$f.tmp.$$" "$f"
    fi
    echo "$f"
}

# Runs a Kafka main class with a small, fast-starting JVM.
run_tool() {
    local cp main="$1"
    shift
    cp="$(classpath)"
    "$JAVA" -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Djava.awt.headless=true -Dlog4j2.configurationFile="$(tools_log4j)" \
        -cp "$cp" "$main" "$@"
}

# ---------------------------------------------------------------- probes
port_open() {  # something accepts TCP connections on 127.0.0.1:$1
    timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null
}

# A Kafka broker on 127.0.0.1:$PORT answers a Metadata request (v4, plain
# Kafka protocol spoken from bash over /dev/tcp, so no JVM is started) and
# lists exactly one broker: node 1 at 127.0.0.1:$PORT. Bounded by 5 s.
broker_answers() {
    port_open "$PROBE_PORT" || return 1
    local got want
    # size=16 | api_key=3 (Metadata) api_version=4 correlation_id=0x504b0001
    # client_id="p" | topics=[] (none) allow_auto_topic_creation=false
    got="$(timeout -k 1 5 bash -c '
        exec 3<>"/dev/tcp/$0/$1" || exit 1
        printf "\x00\x00\x00\x10\x00\x03\x00\x04\x50\x4b\x00\x01\x00\x01p\x00\x00\x00\x00\x00" >&3
        head -c "$2" <&3' "$HOST" "$PROBE_PORT" $((26 + ${#HOST})) 2>/dev/null | od -An -v -tx1 | tr -d ' \n')" || return 1
    # response: size(4) correlation_id(4) throttle_ms(4) brokers=[count(4)
    # node_id(4) host(2+n) port(4) ...]
    want="504b0001"
    [ "${got:8:8}" = "$want" ] || return 1
    want="00000001""00000001""$(printf '%04x' ${#HOST})""$(printf '%s' "$HOST" | od -An -v -tx1 | tr -d ' \n')""$(printf '%08x' "$PROBE_PORT")"
    [ "${got:24}" = "$want" ]
}

# Pid from the pid file, if that process is alive and is our broker.
our_pid() {
    local pid
    [ -s "$PIDFILE" ] || return 1
    pid="$(cat "$PIDFILE")"
    is_uint "$pid" || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$BROKER_MAIN $PROPS" || return 1
    echo "$pid"
}

ready_line() {
    if [ -n "$SECURE" ]; then
        echo "PARSLEY_SECURE_KAFKA=$SECDIR"
    else
        echo "KAFKA_BOOTSTRAP_SERVERS=$BOOTSTRAP"
    fi
}

lock_state() {  # serialise start/stop for this port; fd 9 is never inherited by the broker
    mkdir -p "$STATE"
    exec 9>"$STATE/lock"
    flock -w $((START_TIMEOUT + STOP_TIMEOUT + 60)) 9 || die "timed out waiting for $STATE/lock"
}

# ---------------------------------------------------------------- stop
stop_pid() {
    local pid="$1" i
    log "stopping broker (pid $pid, SIGTERM, up to ${STOP_TIMEOUT}s)..."
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT * 5; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "broker still alive after ${STOP_TIMEOUT}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
    fi
    kill -0 "$pid" 2>/dev/null && die "could not stop pid $pid"
    rm -f "$PIDFILE"
    [ "${KEEP_DATA:-}" = 1 ] || rm -rf "$DATA"
    log "stopped"
}

cmd_stop() {
    lock_state
    local pid
    if pid="$(our_pid)"; then
        stop_pid "$pid"
        return 0
    fi
    rm -f "$PIDFILE"
    if port_open "$PORT"; then
        die "something listens on $BOOTSTRAP but it was not started by this script ($STATE); not touching it"
    fi
    log "no broker running on $BOOTSTRAP (nothing to stop)"
}

# ---------------------------------------------------------------- start
write_config() {
    cat >"$PROPS" <<EOF
# Generated by scripts/kafka/broker.sh on $(date -u +%FT%TZ) -- rewritten on every start.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=$HOST:$CPORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CPORT
advertised.listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CPORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Must stay >= the clients' transaction.timeout.ms (60000 by default in both
# the Java client and librdkafka), or InitProducerId fails.
transaction.max.timeout.ms=$TXN_MAX_TIMEOUT_MS
# Abort expired (zombie) transactions within ~1 s of their timeout.
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
EOF
    if [ -n "$SECURE" ]; then
        secure_config >>"$PROPS"
    fi
    if [ -n "${PARSLEY_KAFKA_EXTRA_PROPS:-}" ]; then
        printf '# PARSLEY_KAFKA_EXTRA_PROPS\n%s\n' "$PARSLEY_KAFKA_EXTRA_PROPS" >>"$PROPS"
    fi
    cat >"$STATE/log4j2-broker.properties" <<'EOF'
status = error
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
EOF
}

# ---------------------------------------------------------------- secured
# A CA, a second CA the broker does not use, and the broker's certificate
# (for localhost and 127.0.0.1) signed by the first, made with openssl;
# passwords for the SCRAM users; client properties for each user.
make_secrets() {
    command -v openssl >/dev/null || die "openssl not found (needed to make the secured broker's certificates)"
    rm -rf "$SECDIR"
    mkdir -p "$SECDIR"
    chmod 700 "$SECDIR"
    (
        cd "$SECDIR"
        days=7
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days $days \
            -subj "/CN=parsley-test-ca" >/dev/null 2>&1
        openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem -days $days \
            -subj "/CN=parsley-other-ca" >/dev/null 2>&1
        openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr \
            -subj "/CN=localhost" >/dev/null 2>&1
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >broker.ext
        openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
            -out broker.crt -days $days -extfile broker.ext >/dev/null 2>&1
        cat broker.key broker.crt >broker-keystore.pem
        rm -f broker.csr broker.ext ca.srl other-ca.key
    ) || die "openssl could not make the certificates in $SECDIR"
    ADMIN_PASSWORD="admin-$(secret)"
    APP_PASSWORD="app-$(secret)"
    echo "$HOST:$PORT" >"$SECDIR/bootstrap"
    client_properties admin "$ADMIN_PASSWORD" >"$SECDIR/admin.properties"
    client_properties parsley-app "$APP_PASSWORD" >"$SECDIR/app.properties"
    chmod 600 "$SECDIR"/*.properties "$SECDIR"/*.key
}

secret() { head -c 30 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20; }

client_properties() {
    cat <<EOF
# User $1 of the secured test broker on $HOST:$PORT (scripts/kafka/broker.sh).
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-256
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$1" password="$2";
ssl.truststore.type=PEM
ssl.truststore.location=$SECDIR/ca.pem
EOF
}

secure_config() {
    cat <<EOF
# The secured broker (--secure): clients on SASL_SSL with SCRAM-SHA-256,
# ACLs enforced, nothing allowed without one.
listeners=SASL_SSL://$HOST:$PORT,INTERNAL://$HOST:$IPORT,CONTROLLER://$HOST:$CPORT
advertised.listeners=SASL_SSL://$HOST:$PORT,INTERNAL://$HOST:$IPORT,CONTROLLER://$HOST:$CPORT
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-256
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$SECDIR/broker-keystore.pem
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:ANONYMOUS;User:admin
EOF
}

new_cluster_id() {  # 16 random bytes, URL-safe base64 without padding (Kafka's Uuid form)
    local id
    while :; do
        id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
        [[ "$id" == -* ]] || break  # a leading '-' would read as an option
    done
    echo "$id"
}

fail_start() {
    local pid="${1:-}"
    log "broker did not come up: $2"
    if [ -s "$BROKER_LOG" ]; then
        log "---- last 60 lines of $BROKER_LOG ----"
        tail -n 60 "$BROKER_LOG" >&2
        log "---- end of log ----"
    fi
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        STOP_TIMEOUT=10 stop_pid "$pid"
    fi
    rm -f "$PIDFILE"
    exit 1
}

cmd_start() {
    local t0=$SECONDS pid cp cid
    lock_state
    if port_open "$PORT"; then
        if broker_answers; then
            log "a Kafka broker already answers on $BOOTSTRAP; leaving it running"
            ready_line
            return 0
        fi
        if pid="$(our_pid)"; then
            log "our broker (pid $pid) holds $BOOTSTRAP but does not answer; restarting it"
            stop_pid "$pid"
        else
            die "port $PORT is in use, but not by a single-node Kafka broker listening on it"
        fi
    elif pid="$(our_pid)"; then
        log "our broker (pid $pid) is alive but not listening on $BOOTSTRAP; restarting it"
        stop_pid "$pid"
    fi
    port_open "$CPORT" && die "controller port $CPORT is already in use (pick another with --controller-port)"

    if [ -n "$SECURE" ] && port_open "$IPORT"; then
        die "port $IPORT (the secured broker's internal listener) is already in use"
    fi

    cp="$(classpath)"
    rm -rf "$DATA"
    mkdir -p "$DATA"
    local scram=()
    if [ -n "$SECURE" ]; then
        make_secrets
        scram=(--add-scram "SCRAM-SHA-256=[name=admin,password=$ADMIN_PASSWORD]"
               --add-scram "SCRAM-SHA-256=[name=parsley-app,password=$APP_PASSWORD]")
    fi
    write_config
    cid="$(new_cluster_id)"
    log "formatting fresh storage in $DATA (cluster id $cid)"
    if ! timeout -k 5 120 "$JAVA" -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
            -Dlog4j2.configurationFile="$(tools_log4j)" -cp "$cp" \
            "$STORAGE_MAIN" format --config "$PROPS" --cluster-id "$cid" --standalone "${scram[@]}" \
            >"$STATE/format.log" 2>&1 </dev/null; then
        cat "$STATE/format.log" >&2
        die "formatting storage failed"
    fi

    launch "$cp" "$t0"
}

# Starts the JVM on the formatted storage in $DATA and waits until it answers.
launch() {
    local cp="$1" t0="$2" pid
    [ -f "$BROKER_LOG" ] && mv -f "$BROKER_LOG" "$BROKER_LOG.prev"
    log "starting Kafka $KAFKA_VERSION broker on $BOOTSTRAP (controller $HOST:$CPORT), log $BROKER_LOG"
    # setsid: own session, so the broker outlives this script and the terminal.
    # shellcheck disable=SC2086
    setsid "$JAVA" $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$STATE/log4j2-broker.properties" \
        -Dkafka.logs.dir="$STATE" \
        -cp "$cp" "$BROKER_MAIN" "$PROPS" \
        >"$BROKER_LOG" 2>&1 </dev/null 9>&- &
    pid=$!
    echo "$pid" >"$PIDFILE"

    local deadline=$((SECONDS + START_TIMEOUT))
    # Cheap wait first: the process is alive and the client port accepts connections.
    while :; do
        kill -0 "$pid" 2>/dev/null || fail_start "" "the broker process exited"
        [ "$SECONDS" -lt "$deadline" ] || fail_start "$pid" "not listening after ${START_TIMEOUT}s"
        if grep -q "Kafka Server started" "$BROKER_LOG" 2>/dev/null && port_open "$PORT"; then
            break
        fi
        sleep 0.3
    done
    # Then a real request: Metadata must list node 1 at $BOOTSTRAP.
    while :; do
        kill -0 "$pid" 2>/dev/null || fail_start "" "the broker process exited"
        [ "$SECONDS" -lt "$deadline" ] || fail_start "$pid" "no Metadata answer after ${START_TIMEOUT}s"
        broker_answers && break
        sleep 0.3
    done
    log "Kafka $KAFKA_VERSION broker ready on $BOOTSTRAP (pid $pid) after $((SECONDS - t0))s"
    ready_line
}

# ---------------------------------------------------------------- bounce
cmd_bounce() {
    local t0=$SECONDS pid
    lock_state
    pid="$(our_pid)" || die "no broker started by this script runs on $BOOTSTRAP"
    KEEP_DATA=1 stop_pid "$pid"
    launch "$(classpath)" "$t0"
}

# ---------------------------------------------------------------- outages
cmd_down() {
    local pid
    lock_state
    pid="$(our_pid)" || die "no broker started by this script runs on $BOOTSTRAP"
    KEEP_DATA=1 stop_pid "$pid"
}

cmd_up() {
    local t0=$SECONDS
    lock_state
    if our_pid >/dev/null; then
        log "our broker already runs on $BOOTSTRAP"
        ready_line
        return 0
    fi
    [ -s "$PROPS" ] && [ -d "$DATA" ] || die "no kept storage in $STATE (run \`start\` first, \`down\` to stop keeping it)"
    port_open "$PORT" && die "port $PORT is in use"
    launch "$(classpath)" "$t0"
}

# SIGSTOP / SIGCONT the whole broker JVM (a frozen machine, a long GC).
cmd_signal() {
    local sig="$1" pid
    lock_state
    pid="$(our_pid)" || die "no broker started by this script runs on $BOOTSTRAP"
    kill "-$sig" "$pid"
    log "sent SIG$sig to the broker (pid $pid)"
}

# ---------------------------------------------------------------- status
cmd_status() {
    local pid
    if broker_answers; then
        if pid="$(our_pid)"; then
            log "up: Kafka $KAFKA_VERSION broker on $BOOTSTRAP (pid $pid, state $STATE)"
        else
            log "up: a Kafka broker answers on $BOOTSTRAP (not started from $STATE)"
        fi
        ready_line
        return 0
    fi
    if pid="$(our_pid)"; then
        log "down: broker process $pid exists but does not answer on $BOOTSTRAP"
    else
        log "down: no broker on $BOOTSTRAP"
    fi
    return 1
}

case "$CMD" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    restart) cmd_stop; exec 9>&-; cmd_start ;;
    bounce) cmd_bounce ;;
    down) cmd_down ;;
    up) cmd_up ;;
    pause) cmd_signal STOP ;;
    resume) cmd_signal CONT ;;
    classpath) classpath >/dev/null; classpath_file ;;
    tool)
        [ ${#TOOL_ARGS[@]} -ge 1 ] || die "usage: broker.sh tool MAIN_CLASS [ARGS...]"
        run_tool "${TOOL_ARGS[@]}" ;;
    -h|--help|help) usage ;;
    *) log "unknown command: $CMD"; usage ;;
esac
