"""Unit checks of the local-service helpers that need no process."""

from dstream_exactly_once.testing.kafka import _cluster_id


def test_kafka_cluster_ids_never_look_like_options():
    ids = {_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)
