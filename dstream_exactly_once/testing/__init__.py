"""Real local services for tests, demos and benchmarks (no containers needed).

- :class:`LocalKafka` — single-node KRaft Apache Kafka from Maven Central jars (``java``).
- :class:`LocalRedis` — Debian ``redis-server`` (optional AOF, ``requirepass``).
- :class:`LocalRedisCluster` — a Redis Cluster of Debian ``redis-server`` nodes (three masters with a
  replica each; failover, kill/restart and pause/resume of single nodes).
- :class:`LocalPostgres` — Debian PostgreSQL, a throwaway cluster.
- :class:`LocalSparkCluster` — Spark standalone master + workers from the PySpark install.
- :class:`LocalSparkConnect` — a Spark Connect server from the PySpark install (``local[N]``, its
  Python workers import this package; Spark's Kafka source jars with ``kafka=True``).
- :class:`LocalYarnCluster` — Hadoop's YARN mini-cluster (ResourceManager + NodeManager, no HDFS)
  from Maven Central jars, for ``--master yarn``.
- :class:`FakeKafkaCluster` — an in-memory cluster (topics, partitions, movable earliest/latest)
  behind the planner's metadata seam, for unit tests without a broker.
"""

from ._fake_kafka import FakeKafkaCluster
from ._kafka import LocalKafka, kafka_classpath
from ._postgres import LocalPostgres
from ._redis import LocalRedis
from ._redis_cluster import LocalRedisCluster
from ._spark import LocalSparkCluster, make_spark_context
from ._spark_connect import LocalSparkConnect
from ._yarn import LocalYarnCluster

__all__ = ["FakeKafkaCluster", "LocalKafka", "LocalPostgres", "LocalRedis", "LocalRedisCluster",
           "LocalSparkCluster", "LocalSparkConnect", "LocalYarnCluster",
           "kafka_classpath", "make_spark_context"]
