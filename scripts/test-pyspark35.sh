#!/usr/bin/env bash
# Runs the core suite (unit tests, KafkaRDD, direct stream, exactly-once stream) on PySpark 3.5 in
# its own virtualenv, so both supported Spark lines are checked. Idempotent: the venv is reused.
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
  "psycopg[binary]>=3.1" pytest "matplotlib>=3.5" "confluent-kafka>=2.3"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e .
echo "[pyspark35] $("$VENV/bin/python" -c 'import pyspark; print("pyspark", pyspark.__version__)')"
exec "$VENV/bin/python" -m pytest -q tests/unit tests/integration/test_kafka_rdd.py \
  tests/integration/test_direct_stream.py tests/integration/test_exactly_once_stream.py "$@"
