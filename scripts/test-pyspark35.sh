#!/usr/bin/env bash
# Runs the core suite (unit tests, KafkaRDD, direct stream, exactly-once stream) and a selection of
# the file source, CLI, Doris (protocol double) and transactional Kafka sink tests on PySpark 3.5 in
# its own virtualenv, so both supported Spark lines are checked (docs/compatibility.md lists what
# runs where). Idempotent: the venv is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore
VENV=${DEO_PYSPARK35_VENV:-$HOME/.cache/dstream-exactly-once/venv-pyspark35}
if ! "$VENV/bin/python" -c "import pyspark, sys; sys.exit(0 if pyspark.__version__.startswith('3.5') else 1)" 2>/dev/null; then
  echo "[pyspark35] creating $VENV with pyspark 3.5"
  "$PY" -m venv "$VENV"
fi
# The same test dependencies as setup.py's "test" extra, with Spark 3.5 (pip skips what is there).
"$VENV/bin/pip" install -q --disable-pip-version-check "pyspark>=3.5,<3.6" "kafka-python>=3.0,<3.1" crc32c redis \
  "psycopg[binary]>=3.1" pytest "matplotlib>=3.5" "confluent-kafka>=2.3" "pyarrow>=11" "deltalake>=1.0"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e .
echo "[pyspark35] $("$VENV/bin/python" -c 'import pyspark; print("pyspark", pyspark.__version__)')"
# One pytest process (one Kafka broker, one SparkContext).
# Tests marked pyspark4 read through the Python Data Source API, which PySpark 3.5 does not have (the
# import error that says so is tested here); they run in `make test`.
exec "$VENV/bin/python" -m pytest -q -m "not pyspark4" tests/unit tests/integration/test_kafka_rdd.py \
  tests/integration/test_direct_stream.py tests/integration/test_exactly_once_stream.py \
  tests/integration/test_file_stream.py::test_direct_stream_reads_growing_files_with_offset_ranges \
  tests/integration/test_file_stream.py::test_exactly_once_across_rotation_and_a_second_driver \
  tests/integration/test_operators_cli.py::test_a_file_app_restarts_after_a_reset \
  tests/integration/test_operators_cli.py::test_reset_checks_every_target_against_the_broker_and_clamps \
  tests/integration/test_doris_sink.py \
  tests/integration/test_kafka_sink.py::test_output_is_written_once_and_a_replay_produces_nothing \
  tests/integration/test_streaming_tab.py "$@"
