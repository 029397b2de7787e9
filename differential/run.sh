#!/usr/bin/env bash
# The Kafka Streams side of the differential tests.
#
#   differential/run.sh build     build the jar (and target/classpath.txt) if missing
#   differential/run.sh windows   the same, then run the windows program: stdin is cases, each a header
#                               `size_ms advance_ms grace_ms close|update`, lines
#                               `key value timestamp` and `end`; stdout is, per case,
#                               lines `key start end value` and `end`
#   differential/run.sh joins     the same for the stream–table joins program (Joins.java
#                               says its format)
#   differential/run.sh sessions  the same for the session-windows program: stdin is cases,
#                               each a header `gap_ms grace_ms [retention_ms]`, lines
#                               `key value timestamp` and `end`; stdout is, per case,
#                               lines `key start end value` and `end` (Sessions.java)
#   differential/run.sh stream-joins  the same for the stream–stream joins program
#                               (StreamJoins.java says its format)
#   differential/run.sh table-joins   the same for the table–table joins program
#                               (TableJoins.java says its format)
#   differential/run.sh fk-joins      the same for the foreign-key joins program
#                               (ForeignKeyJoins.java says its format)
#   differential/run.sh rekeys        the same for the re-key program (Rekeys.java
#                               says its format)
#   differential/run.sh versioned-joins  the same for the versioned stream–table joins
#                               program (VersionedJoins.java says its format)
#
# The build is cached under differential/kafka-streams/target/; delete that
# folder (or touch the pom/source) to rebuild.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project="$here/kafka-streams"
jar="$project/target/kafka-streams-differential-1.0.jar"
classpath="$project/target/classpath.txt"

command -v java >/dev/null || { echo "differential/run.sh: java not found on PATH (need a JDK 17+)" >&2; exit 127; }

stale=0
if [[ ! -f "$jar" || ! -f "$classpath" ]]; then
  stale=1
elif [[ -n "$(find "$project/pom.xml" "$project/src" -newer "$jar" -type f -print -quit)" ]]; then
  stale=1
else
  # A dependency gone from the local Maven repository (a cleaned ~/.m2).
  IFS=: read -r -a entries < "$classpath" || true  # no final newline
  for entry in "${entries[@]}"; do
    [[ -e "$entry" ]] || { stale=1; break; }
  done
fi
if [[ $stale == 1 ]]; then
  command -v mvn >/dev/null || { echo "differential/run.sh: mvn not found on PATH (need Maven 3.8+)" >&2; exit 127; }
  mvn -q -B -f "$project/pom.xml" package -DskipTests >&2
fi

case "${1:-}" in
  build) exit 0 ;;
  windows) main=parsley.differential.Windows ;;
  joins) main=parsley.differential.Joins ;;
  sessions) main=parsley.differential.Sessions ;;
  stream-joins) main=parsley.differential.StreamJoins ;;
  table-joins) main=parsley.differential.TableJoins ;;
  fk-joins) main=parsley.differential.ForeignKeyJoins ;;
  rekeys) main=parsley.differential.Rekeys ;;
  versioned-joins) main=parsley.differential.VersionedJoins ;;
  *) echo "differential/run.sh: say build, windows, joins, sessions, stream-joins, table-joins, fk-joins, rekeys or versioned-joins (got ${1:-nothing})" >&2; exit 2 ;;
esac
exec java -cp "$jar:$(cat "$classpath")" "$main"
