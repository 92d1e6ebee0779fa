#!/usr/bin/env bash
# The demo: a real Kafka broker (KRaft, jars from Maven Central), the worker, the dashboard,
# a finished baseline run and a simulated eval run published live; a live terminal view of it,
# then its final summary. The dashboard's URL is printed before the live run starts, and it
# keeps serving afterwards (from a terminal) until Enter or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
stamp="$(date +%s)"
run="demo-$stamp"
baseline="baseline-$stamp"
port="${EVALSTREAM_DASHBOARD_PORT:-6067}"
mkdir -p .state
"$bin/evalstream" broker start
"$bin/evalstream" worker --data-dir .state/worker --web-port "${EVALSTREAM_WEB_PORT:-6066}" > .state/worker.log 2>&1 &
worker=$!
"$bin/evalstream" dashboard --port "$port" > .state/dashboard.log 2>&1 &
dashboard=$!
trap 'kill "$dashboard" "$worker" 2>/dev/null || true; wait "$dashboard" "$worker" 2>/dev/null || true' EXIT

# The dashboard prints its URL once it has read the topics and listens.
until url="$(grep -o 'http://[^ ]*' .state/dashboard.log)"; do
  if ! kill -0 "$dashboard" 2>/dev/null; then
    cat .state/dashboard.log >&2
    exit 1
  fi
  sleep 0.2
done

# A finished run of the same synthetic benchmark (another seed), to compare the live one with.
"$bin/evalstream" simulate --run-id "$baseline" --seed 1 --tasks 30 --attempts 5 --pace 2000 2> /dev/null
echo
echo "  Dashboard: $url   (open it now: run $run starts in 3 s)"
echo "  Two runs:  ${url}compare?baseline=$baseline&candidate=$run   (fills in when $run closes)"
echo
sleep 3
"$bin/evalstream" simulate --run-id "$run" --tasks 30 --attempts 5 --pace 50 &
simulated=$!
"$bin/evalstream" watch "$run"
wait "$simulated" 2>/dev/null || true
echo
"$bin/evalstream" summaries --run "$run" | tail -n 1 | "$bin/evalstream" digest
echo
echo "Logs: .state/worker.log, .state/dashboard.log; the broker keeps running: .venv/bin/evalstream broker stop"
if [ -t 0 ]; then
  read -r -p "The dashboard is still at $url; press Enter (or Ctrl-C) to stop it and the worker. " _ || true
fi
