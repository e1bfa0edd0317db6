"""The Redis store on a real Redis Cluster (three masters, a replica each): apps spread over the
masters, redirections during a resharding, ``wait_replicas``, an acknowledged commit lost by
asynchronous replication, and the Kafka sum pipeline across failovers and driver SIGKILLs."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable, Dict, List

import pytest
from redis.crc import key_slot

from dstream_exactly_once.errors import StoreUnavailableError
from dstream_exactly_once.kafka._offsets import OffsetRange
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, RedisClusterStore, Writes, open_store
from dstream_exactly_once.teaching._pipeline import verify
from dstream_exactly_once.testing._redis_cluster import (
    LocalRedisCluster,
    begin_migration,
    finish_migration,
    master_ports,
    migrate_keys,
)

from .faults import run_with_kills

pytestmark = [pytest.mark.integration]


def eventually(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def batch(i: int, start: int, end: int) -> PlannedBatch:
    return PlannedBatch(i, 1000 * (i + 1), (OffsetRange("t", 0, start, end),))


def app_keys(cluster: LocalRedisCluster, app: str) -> List[str]:
    client = cluster.client()
    try:
        return sorted(client.scan_iter(match="{deo:" + app + "}:*", target_nodes=client.PRIMARIES))
    finally:
        client.close()


def healthy(cluster: LocalRedisCluster) -> None:
    """Leave the shared cluster as tests expect it: every node up, every replica in sync."""
    for port in cluster.ports:
        if port not in cluster.running_ports():
            cluster.restart(port)
        cluster.resume(port)
    cluster.wait_ok(90)


def test_apps_spread_over_masters_and_each_app_stays_in_one_slot(redis_cluster: LocalRedisCluster) -> None:
    apps = [f"spread-{i}-{uuid.uuid4().hex[:6]}" for i in range(12)]
    owners = set()
    for app in apps:
        with open_store(redis_cluster.url, app) as store:
            assert isinstance(store, RedisClusterStore)
            epoch = store.start_epoch()
            store.log_batch(epoch, batch(0, 0, 5))
            store.commit(epoch, batch(0, 0, 5), Writes().incr("n", "x", 5).put("d", "k", {"a": 1})
                         .put_batch_rows("rows", [1]).add_label("L"))
            store.heartbeat(epoch, {"pid": 1})
            assert set(apps[: apps.index(app) + 1]) <= set(store.list_apps())  # every master is scanned
        keys = app_keys(redis_cluster, app)
        assert len(keys) >= 9 and len({key_slot(k.encode()) for k in keys}) == 1, keys
        owners.add(redis_cluster.master_of_key(keys[0]))
    assert len(owners) >= 2, owners  # 12 random slots on 3 masters: all on one has probability 3 * 3**-12


@pytest.mark.parametrize("wait", [0, 1])
def test_a_resharding_is_ridden_out_and_followed(redis_cluster: LocalRedisCluster, wait: int) -> None:
    """While the app's slot migrates, a write script (it names keys that do not exist yet) gets
    ``TRYAGAIN`` — directly with the keys split between two masters, after an ``ASK`` with all of
    them moved: a retriable outage that wrote nothing. Once the slot has its new master, the same
    store object, with its stale slot map, follows ``MOVED`` and commits."""
    app = f"reshard-{wait}-{uuid.uuid4().hex[:6]}"
    store = open_store(redis_cluster.url, app, wait_replicas=wait)
    try:
        epoch = store.start_epoch()
        store.commit(epoch, batch(0, 0, 10), Writes().incr("n", "x", 10), log_entry=True)
        keys = app_keys(redis_cluster, app)
        slot = key_slot(keys[0].encode())
        source = redis_cluster.master_of_key(keys[0])
        target = next(p for p in master_ports(redis_cluster) if p != source)
        begin_migration(redis_cluster, slot, source, target)

        def dump() -> Dict[Any, Any]:
            """Every key of the slot on either master, serialized (ASKING to read the importing one)."""
            out = {}
            for port in (source, target):
                client = redis_cluster.node_client(port, decode_responses=False)
                try:
                    for k in client.execute_command("CLUSTER GETKEYSINSLOT", slot, 1000):
                        pipe = client.pipeline(transaction=False)
                        pipe.execute_command("ASKING")
                        pipe.dump(k)
                        out[(port, k)] = pipe.execute()[1]
                finally:
                    client.close()
            return out

        for moved in (keys[:2], keys[2:]):  # split between the masters, then all on the target (ASK)
            migrate_keys(redis_cluster, source, target, moved)
            before = dump()
            with pytest.raises(StoreUnavailableError, match="slot moving or cluster down") as info:
                store.commit(epoch, batch(1, 10, 20), Writes().incr("n", "x", 10), log_entry=True)
            assert info.value.retriable and ("TryAgainError" in str(info.value) or "TTL exhausted" in str(info.value))
            assert dump() == before
        finish_migration(redis_cluster, slot, target)  # the store's slot map still says source: MOVED
        assert store.commit(epoch, batch(1, 10, 20), Writes().incr("n", "x", 10), log_entry=True) \
            is CommitOutcome.APPLIED
        assert redis_cluster.master_of_key(keys[0]) == target
        assert store.get_value("n", "x") == 20 and store.last_committed_batch_id() == 1
        assert store.load_offsets() == {OffsetRange("t", 0, 0, 1).topicPartition(): 20}
    finally:
        store.close()


def _master_and_replica(cluster: LocalRedisCluster, app: str) -> tuple[int, int]:
    master = cluster.master_of_key("{deo:" + app + "}:epoch")
    return master, cluster.replicas_of(master)[0]


def test_wait_replicas_refuses_a_commit_no_replica_confirmed_and_the_retry_acknowledges_it(
        redis_cluster: LocalRedisCluster) -> None:
    app = f"wait-{uuid.uuid4().hex[:6]}"
    master, replica = _master_and_replica(redis_cluster, app)
    waiting = open_store(redis_cluster.url, app, wait_replicas=1, wait_timeout=300)
    plain = open_store(redis_cluster.url, app)
    try:
        epoch = waiting.start_epoch()
        assert waiting.commit(epoch, batch(0, 0, 10), Writes().incr("n", "x", 10), log_entry=True) \
            is CommitOutcome.APPLIED
        redis_cluster.pause(replica)
        with pytest.raises(StoreUnavailableError) as info:
            waiting.commit(epoch, batch(1, 10, 20), Writes().incr("n", "x", 10), log_entry=True)
        message = str(info.value)
        assert info.value.retriable and "commit of batch 1 (t/0 [10, 20))" in message and "in doubt" in message
        assert "0 replica(s) confirmed it" in message and "wait_replicas=1" in message
        assert plain.is_committed(1)  # it did run on the primary: in doubt, not refused
        # without wait_replicas the same situation is acknowledged at once
        assert plain.commit(epoch, batch(2, 20, 25), Writes().incr("n", "x", 5), log_entry=True) \
            is CommitOutcome.APPLIED
        redis_cluster.resume(replica)
        redis_cluster.wait_ok()
        # the retry finds the batch committed and waits for the replica: acknowledged now
        assert waiting.commit(epoch, batch(1, 10, 20), Writes().incr("n", "x", 10), log_entry=True) \
            is CommitOutcome.REPLAYED
        assert waiting.get_value("n", "x") == 25
    finally:
        waiting.close()
        plain.close()
        healthy(redis_cluster)


def test_an_acknowledged_commit_lost_in_a_failover_is_planned_again_and_nothing_doubles(
        redis_cluster: LocalRedisCluster) -> None:
    """Asynchronous replication: batch 2 is acknowledged by the master while its replica lags, the
    master dies, the replica takes over without it. The surviving state is batch 1's (results,
    positions and logs together), and the next driver's batch 2 — planned again, over more records —
    is applied once: the count equals the records of the committed ranges, no more, no less."""
    app = f"lost-{uuid.uuid4().hex[:6]}"
    master, replica = _master_and_replica(redis_cluster, app)
    store = open_store(redis_cluster.url, app)
    try:
        with open_store(redis_cluster.url, app, wait_replicas=1, wait_timeout=10_000) as synced:
            epoch = synced.start_epoch()
            for i, (a, b) in enumerate([(0, 10), (10, 20)]):  # confirmed by the replica
                synced.log_batch(epoch, batch(i, a, b))
                synced.commit(epoch, batch(i, a, b), Writes().incr("n", "count", b - a))
        redis_cluster.pause(replica)  # it lags: the master drops its link and it cannot reconnect
        master_client = redis_cluster.node_client(master)
        master_client.execute_command("CLIENT KILL TYPE replica")
        master_client.close()
        store.log_batch(epoch, batch(2, 20, 30))
        assert store.commit(epoch, batch(2, 20, 30), Writes().incr("n", "count", 10)) is CommitOutcome.APPLIED
        redis_cluster.kill(master)
        redis_cluster.resume(replica)
        redis_cluster.wait_master(replica, 90)
        store.close()
        with open_store(redis_cluster.url, app) as after:  # the next driver
            assert after.last_committed_batch_id() == 1 and after.last_logged_batch_id() == 1
            assert after.get_value("n", "count") == 20 and after.current_epoch() == epoch
            e2 = after.start_epoch()
            again = batch(2, 20, 37)  # planned anew from the surviving position, up to the new latest
            after.log_batch(e2, again)
            assert after.commit(e2, again, Writes().incr("n", "count", 17)) is CommitOutcome.APPLIED
            assert after.get_value("n", "count") == 37
            assert after.load_offsets() == {OffsetRange("t", 0, 0, 1).topicPartition(): 37}
    finally:
        healthy(redis_cluster)


# ---------------------------------------------------------------- the Kafka sum pipeline
N = 12_000
PARTITIONS = 2


def test_sum_is_exact_across_failovers_and_driver_sigkills(kafka, redis_cluster: LocalRedisCluster) -> None:
    """While the pipeline commits: ``CLUSTER FAILOVER`` on the replica of the app's master, then a
    SIGKILL of that (new) master, promoted by its replica; meanwhile the driver itself is SIGKILLed
    and restarted. The sum, count, word counts and batch rows are exact."""
    topic = "numbers-" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, PARTITIONS)
    kafka.produce(topic, range(1, N + 1), partitions=PARTITIONS)
    url = redis_cluster.url
    app = f"rc-faults-{uuid.uuid4().hex[:6]}"
    batch_app = f"{app}-batch"
    done: List[str] = []
    errors: List[BaseException] = []

    def committed() -> int:
        try:
            with open_store(url, batch_app) as store:
                return store.last_committed_batch_id() or -1
        except StoreUnavailableError:
            return -1

    def failovers() -> None:
        try:
            eventually(lambda: committed() >= 1, 400, "the first commits")
            master, replica = _master_and_replica(redis_cluster, batch_app)
            redis_cluster.failover(replica)
            done.append(f"CLUSTER FAILOVER {master} -> {replica}")
            seen = committed()
            eventually(lambda: committed() >= seen + 2, 400, "commits after the manual failover")
            master, replica = _master_and_replica(redis_cluster, batch_app)
            redis_cluster.kill(master)
            redis_cluster.wait_master(replica, 120)
            done.append(f"SIGKILL master {master}, {replica} promoted")
            redis_cluster.restart(master)
            redis_cluster.wait_ok(120)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=failovers, daemon=True)
    thread.start()
    try:
        stats = run_with_kills(kafka.bootstrap, topic, url, app, "both", min_kills=2, seed=31, rate=100,
                               kill_window=(25.0, 45.0), run_timeout=400)
        thread.join(600)
    finally:
        thread.join(5)
        healthy(redis_cluster)
    assert not errors, errors
    assert len(done) == 2, done
    assert stats.kills + stats.self_crashes >= 2, stats
    assert verify(url, batch_app, N, "batch") == []
    assert verify(url, f"{app}-partition", N, "partition") == []
