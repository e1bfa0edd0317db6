"""RDDs whose partitions prefer given hosts (Spark preferred locations), from PySpark.

PySpark's ``sc.parallelize`` has no preferred locations; Scala's
``SparkContext.makeRDD[T: ClassTag](seq: Seq[(T, Seq[String])])`` does (one partition per element,
each preferring its hosts). Through py4j it is called with its erased signature
``makeRDD(Seq[Tuple2[byte[], Seq[String]]], ClassTag)``: each element is one pickled Python object,
and the JVM RDD is wrapped as a Python RDD read with :class:`CPickleSerializer` (one object per
frame). Python transformations pipelined on it run in the same task, and the scheduler follows the
narrow dependency to these locations, so the tasks of a :class:`~._range_rdd.RangeRDD` built on it
prefer the planned hosts.

A preferred location is a preference: after ``spark.locality.wait`` (default 3s) without a free
executor on the host, Spark runs the task elsewhere. Tasks that must read a host's local files
therefore check their host on the executor (:func:`~dstream_exactly_once.files._hosts.check_host`)
and fail, so Spark retries them; set ``spark.locality.wait`` long enough for busy hosts.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Sequence, Tuple

from pyspark import RDD, SparkContext
from pyspark.serializers import CPickleSerializer

__all__ = ["pinned_rdd", "preferred_locations", "spark_host_runner"]


def pinned_rdd(sc: SparkContext, items: Sequence[Tuple[Any, Sequence[str]]]) -> RDD:
    """An RDD with one partition per ``(value, hosts)`` of ``items``: partition ``i`` holds only
    ``items[i][0]`` and prefers ``items[i][1]``. At least one item is required."""
    if not items:
        raise ValueError("pinned_rdd needs at least one (value, hosts) item")
    jvm = sc._jvm
    assert jvm is not None, "SparkContext is stopped"
    ser = CPickleSerializer()
    pairs = jvm.java.util.ArrayList()
    for value, hosts in items:
        jhosts = jvm.java.util.ArrayList()
        for h in hosts:
            jhosts.add(str(h))
        pairs.add(jvm.scala.Tuple2(bytearray(ser.dumps(value)), jvm.PythonUtils.toSeq(jhosts)))
    class_tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
    jrdd = sc._jsc.sc().makeRDD(jvm.PythonUtils.toSeq(pairs), class_tag)
    return RDD(jrdd.toJavaRDD(), sc, ser)


def preferred_locations(rdd: RDD) -> List[List[str]]:
    """The preferred hosts of each partition of ``rdd`` as the JVM scheduler finds them: the RDD's own,
    else (like ``DAGScheduler.getPreferredLocs``) those of its parent through one-to-one dependencies
    (a Python transformation's ``PythonRDD`` has none of its own)."""
    jrdd = rdd._jrdd.rdd()
    out: List[List[str]] = []
    for i in range(len(jrdd.partitions())):
        node = jrdd
        hosts: List[str] = []
        while True:
            locs = node.preferredLocations(node.partitions()[i])
            hosts = [str(locs.apply(k)) for k in range(locs.size())]
            deps = node.dependencies()
            if hosts or deps.size() != 1 or "OneToOneDependency" not in deps.apply(0).getClass().getName():
                break
            node = deps.apply(0).rdd()
        out.append(hosts)
    return out


def spark_host_runner(sc: SparkContext) -> Callable[[Sequence[Tuple[str, Any]], Callable[[Any], Any]], List[Any]]:
    """A :data:`~dstream_exactly_once.files._hosts.HostRunner`: one Spark job with a task per
    ``(host, payload)`` pinned to ``host`` that returns ``fn(payload)``; results in order. ``fn``
    checks its host itself (a task Spark placed elsewhere must fail, not answer for another host)."""

    def run(items: Sequence[Tuple[str, Any]], fn: Callable[[Any], Any]) -> List[Any]:
        items = list(items)
        if not items:
            return []

        def apply(index: int, values: Iterable[Any]) -> Iterator[Tuple[int, Any]]:
            for v in values:
                yield index, fn(v)

        rdd = pinned_rdd(sc, [(payload, [host]) for host, payload in items])
        results = dict(rdd.mapPartitionsWithIndex(apply).collect())
        return [results[i] for i in range(len(items))]

    return run
