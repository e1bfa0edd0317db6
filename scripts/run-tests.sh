#!/usr/bin/env bash
# `make test`'s pytest step: the whole suite as two pytest processes side by side, so the run takes
# about as long as the longer half instead of the sum.
#
#   - "slow": the tests marked slow (the long fault-injection and cluster files, which spend most of
#     their time waiting for killed processes to come back);
#   - "rest": everything else (unit, contract and the other integration tests).
#
# Each process starts its own Kafka, Redis, PostgreSQL and Spark through the session fixtures (free
# ports, own data directories) and gets its own --basetemp. The exit status is non-zero when either
# half fails, including pytest's 5 ("no tests collected"). The slow half's output goes to a log file,
# printed when both are done (the rest streams to the terminal).
#
# Each half ends with its 25 slowest tests (--durations), so a run shows where its time went.
#
# With arguments (a -k selection, a file), they go to one ordinary pytest run instead.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "$#" -gt 0 ]; then
  exec "$PY" -m pytest "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/deo-tests.XXXXXX")
slow_log="$work/slow.log"
"$PY" -m pytest -m slow --durations=25 --basetemp="$work/slow" >"$slow_log" 2>&1 &
slow_pid=$!
# Ctrl-C or a CI timeout: stop the slow half too (its own services stop with its fixtures)
trap 'kill -INT "$slow_pid" 2>/dev/null; wait "$slow_pid"; exit 130' INT TERM
"$PY" -m pytest -m "not slow" --durations=25 --basetemp="$work/rest"
rest_rc=$?
wait "$slow_pid"
slow_rc=$?
trap - INT TERM
echo
echo "================ the slow half: pytest -m slow ($slow_log) ================"
cat "$slow_log"
echo "[run-tests] pytest -m 'not slow': exit $rest_rc; pytest -m slow: exit $slow_rc"
if [ "$rest_rc" -ne 0 ]; then exit "$rest_rc"; fi
if [ "$slow_rc" -ne 0 ]; then exit "$slow_rc"; fi
rm -rf "$work"
