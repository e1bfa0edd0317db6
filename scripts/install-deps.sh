#!/usr/bin/env bash
# Installs everything the demo, the tests and the benchmarks need, idempotently:
#   Debian packages (Java 17, Maven, redis-server, PostgreSQL), this package with its extras (pip; the dev
#   extra includes PySpark's Spark Connect client and server-side Python packages),
#   the Kafka broker and YARN mini-cluster jars (Maven Central, cached in ~/.m2). Safe to run
#   again: it only installs what is missing and prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore

say() { printf '[deps] %s\n' "$*"; }

# `install-deps.sh chromium`: only headless Chromium, for the documentation's screenshots
# (scripts/screenshot-streaming-tab.sh); never needed by the tests.
if [ "${1:-}" = "chromium" ]; then
  if command -v chromium >/dev/null 2>&1; then
    say "chromium present"
  else
    say "apt-get install chromium"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
  exit 0
fi

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need_apt+=(postgresql)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  say "apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  # The Debian packages start system-wide services; the project starts its own on free ports.
  $SUDO service redis-server stop >/dev/null 2>&1 || true
  $SUDO service postgresql stop >/dev/null 2>&1 || true
else
  say "Debian packages present (java, mvn, redis-server, postgresql)"
fi

stamp_src=$(cat setup.py dstream_exactly_once/_version.py | sha256sum | cut -c1-16)
stamp=".deps-stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_src" ] && "$PY" -c "import dstream_exactly_once, pyspark, kafka, crc32c, redis, psycopg, pytest, ruff, mypy, deltalake, grpc, pandas" 2>/dev/null; then
  say "python packages present"
else
  say "pip install -e .[dev]"
  "$PY" -m pip install -q --disable-pip-version-check -e ".[dev]"
  echo "$stamp_src" > "$stamp"
fi

say "Kafka broker jars (Maven Central, cached)"
"$PY" -c "from dstream_exactly_once.testing._kafka import kafka_classpath; cp = kafka_classpath(); print('[deps] kafka classpath: %d jars' % len(cp.split(':')))"
say "Kafka 3.x broker jars (Maven Central, cached; tests/integration/test_kafka3_broker.py)"
"$PY" -c "from dstream_exactly_once.testing._kafka import KAFKA_3_VERSION, kafka_classpath; cp = kafka_classpath(KAFKA_3_VERSION); print('[deps] kafka %s classpath: %d jars' % (KAFKA_3_VERSION, len(cp.split(':'))))"

say "Spark's Structured Streaming Kafka source jars (Maven Central, cached)"
"$PY" -c "from dstream_exactly_once.testing._spark_kafka import spark_kafka_jars, spark_kafka_version; j = spark_kafka_jars(); print('[deps] spark-sql-kafka-0-10 %s: %d jars' % (spark_kafka_version(), len(j.split(','))))"

say "Hadoop YARN mini-cluster jars at PySpark's Hadoop version (Maven Central, cached)"
"$PY" -c "from dstream_exactly_once.testing._yarn import hadoop_version, yarn_classpath; cp = yarn_classpath(); print('[deps] hadoop-minicluster %s classpath: %d jars' % (hadoop_version(), len(cp.split(':'))))"
