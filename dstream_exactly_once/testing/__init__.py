"""Real local services for tests, demos and benchmarks (no containers needed).

- :class:`LocalKafka` — single-node KRaft Apache Kafka from Maven Central jars (``java``).
- :class:`LocalRedis` — Debian ``redis-server`` (optional AOF, ``requirepass``).
- :class:`LocalPostgres` — Debian PostgreSQL, a throwaway cluster.
- :class:`LocalSparkCluster` — Spark standalone master + workers from the PySpark install.
"""

from .kafka import LocalKafka, kafka_classpath
from .postgres import LocalPostgres
from .redis import LocalRedis
from .spark import LocalSparkCluster, make_spark_context

__all__ = ["LocalKafka", "LocalPostgres", "LocalRedis", "LocalSparkCluster", "kafka_classpath", "make_spark_context"]
