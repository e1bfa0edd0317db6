#!/usr/bin/env bash
# `make test`'s pytest step: the whole suite as three pytest processes side by side, so the run takes
# about as long as the longest part instead of the sum.
#
#   - "slow 1/2" and "slow 2/2": the tests marked slow (the long fault-injection and cluster files,
#     which spend most of their time waiting for killed processes to come back), as two groups of
#     whole files balanced by their usual durations (`--shard`, tests/conftest.py);
#   - "rest": everything else (unit, contract and the other integration tests).
#
# Each process starts its own Kafka, Redis, PostgreSQL and Spark through the session fixtures (free
# ports, own data directories) and gets its own --basetemp. The exit status is non-zero when any
# part fails, including pytest's 5 ("no tests collected"). The slow parts' output goes to log files,
# printed when all are done (the rest streams to the terminal).
#
# Each part ends with its 25 slowest tests (--durations), so a run shows where its time went. With
# DEO_TEST_REPORTS=DIR each part also writes a JUnit XML report there (rest.xml, slow1.xml, slow2.xml):
# every test's duration, for balancing the shards.
#
# With arguments (a -k selection, a file), they go to one ordinary pytest run instead.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "$#" -gt 0 ]; then
  exec "$PY" -m pytest "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/deo-tests.XXXXXX")
report() {  # report PART: pytest's option writing PART's JUnit XML, when DEO_TEST_REPORTS names a directory
  if [ -n "${DEO_TEST_REPORTS:-}" ]; then
    mkdir -p "$DEO_TEST_REPORTS" && echo "--junitxml=$DEO_TEST_REPORTS/$1.xml"
  fi
}
pids=()
for shard in 1 2; do
  "$PY" -m pytest -m slow --shard "$shard/2" --durations=25 --basetemp="$work/slow$shard" $(report "slow$shard") \
    >"$work/slow$shard.log" 2>&1 &
  pids+=($!)
done
# Ctrl-C or a CI timeout: stop the slow parts too (their own services stop with their fixtures)
trap 'kill -INT "${pids[@]}" 2>/dev/null; wait "${pids[@]}"; exit 130' INT TERM
"$PY" -m pytest -m "not slow" --durations=25 --basetemp="$work/rest" $(report rest)
rest_rc=$?
slow_rc=()
for pid in "${pids[@]}"; do
  wait "$pid"
  slow_rc+=($?)
done
trap - INT TERM
for shard in 1 2; do
  echo
  echo "================ the slow tests, part $shard/2: pytest -m slow --shard $shard/2 ($work/slow$shard.log) ================"
  cat "$work/slow$shard.log"
done
echo "[run-tests] pytest -m 'not slow': exit $rest_rc; pytest -m slow --shard 1/2: exit ${slow_rc[0]}; --shard 2/2: exit ${slow_rc[1]}"
if [ "$rest_rc" -ne 0 ]; then exit "$rest_rc"; fi
for rc in "${slow_rc[@]}"; do
  if [ "$rc" -ne 0 ]; then exit "$rc"; fi
done
rm -rf "$work"
