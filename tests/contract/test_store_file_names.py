"""A file whose name is not valid UTF-8 (kept as ``surrogateescape`` text) survives every store: the
offset log, the committed position's identity document and a reload give the very same path."""

from __future__ import annotations

import os
from typing import Any

import pytest

from dstream_exactly_once.files import FileRange
from dstream_exactly_once.stores import CommitOutcome, PlannedBatch, Writes, open_store

ODD = os.fsdecode(b"/var/log/app/service.log.\xff\xfe")


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis", "redis-cluster"])
def test_a_non_utf8_file_name_round_trips_through_the_store(kind: str, tmp_path: Any, app_id: str,
                                                            request: Any) -> None:
    fixture = {"postgres": "postgres_url", "redis": "redis_url"}
    url = (f"sqlite:///{tmp_path}/names.db" if kind == "sqlite" else request.getfixturevalue("redis_cluster").url
           if kind == "redis-cluster" else request.getfixturevalue(fixture[kind]))
    r = FileRange("0123456789abcdef", ODD, 0, 12, "f" * 32, 12, "e" * 32, 12, 1, 2)
    batch = PlannedBatch(0, 1000, (r,))
    with open_store(url, app_id) as store:
        epoch = store.start_epoch()
        store.log_batch(epoch, batch)
        assert store.commit(epoch, batch, Writes().incr("n", "lines", 3)) is CommitOutcome.APPLIED
    with open_store(url, app_id) as store:
        got = store.get_batch(0)
        assert got == batch and got.ranges[0].path == ODD
        position = store.load_positions()[r.position_key]
        assert position.offset == 12 and position.meta == r.position_meta()
        assert os.fsencode(position.meta["path"]) == b"/var/log/app/service.log.\xff\xfe"
