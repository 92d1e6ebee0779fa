#!/usr/bin/env bash
# The demo: a real Kafka broker (KRaft, jars from Maven Central), the worker, a simulated
# eval run published live, and a live terminal view of it; then the run's final summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
run="demo-$(date +%s)"
mkdir -p .state
"$bin/evalstream" broker start
"$bin/evalstream" worker --data-dir .state/worker --web-port "${EVALSTREAM_WEB_PORT:-6066}" > .state/worker.log 2>&1 &
worker=$!
trap 'kill "$worker" 2>/dev/null || true; wait "$worker" 2>/dev/null || true' EXIT
"$bin/evalstream" simulate --run-id "$run" --tasks 30 --attempts 5 --pace 150 &
"$bin/evalstream" watch "$run"
wait %2 2>/dev/null || true
echo
"$bin/evalstream" summaries --run "$run" | tail -n 1 | "$bin/evalstream" digest
echo
echo "The worker's log is .state/worker.log; the broker keeps running: .venv/bin/evalstream broker stop"
