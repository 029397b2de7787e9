#!/usr/bin/env bash
# Seeds per second of the diamond from a user's `cargo test`: first in the
# default test profile, then with README's override (dependencies at
# opt-level 2), each built in its own target directory so that the build
# times are comparable too. SEEDS=N sets the seeds per run (default 200).
set -euo pipefail
cd "$(dirname "$0")"
run() {
    local label=$1; shift
    local target="${TMPDIR:-/tmp}/parsley-user-test-$label"
    local started=$SECONDS
    cargo test --quiet --no-run --target-dir "$target" "$@" 2>/dev/null
    local built=$((SECONDS - started))
    local line
    line=$(cargo test --quiet --target-dir "$target" "$@" -- --nocapture 2>/dev/null | grep '^diamond:')
    echo "$label: build ${built} s; $line"
}
run default
run override --config 'profile.dev.package."*".opt-level=2'
