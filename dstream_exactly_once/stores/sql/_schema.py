"""The SQL stores' layout in one place: the tables of the current version, how a database's layout
is recognised without writing, and the upgrades from layout versions 1 and 2.

Tables of layout version 3, every row scoped by ``app`` (the application id)::

    deo_meta       (app PK, schema_version, epoch)                  one row per app; commits lock it
    deo_positions  (app, pkey, next_pos, meta)                      next position to read of each stream
                                                                    partition (key "topic/partition",
                                                                    "file:<id>"), and the source's JSON
                                                                    document kept beside it (or NULL)
    deo_pos_log    (app, batch_id, doc)                             positions of flat whole-batch commits,
                                                                    one JSON entry per commit, applied over
                                                                    deo_positions (see _position_log)
    deo_batches    (app, batch_id, batch_time_ms, ranges)           offset log (ranges as JSON, each range
                                                                    kind's encoding of many ranges)
    deo_commits    (app, batch_id, epoch)                           commit log
    deo_values     (app, ns, k, inum, fnum, doc)                    incr/put values (int part, float
                                                                    part, or a JSON document)
    deo_batch_rows (app, ns, batch_id, part, seq, doc)              time-keyed rows, replaced per
                                                                    (batch, part); part "" = whole batch
    deo_labels     (app, label)                                     labels applied

Layout version 2 is version 3 without ``deo_pos_log``, its offset-log entries hold a JSON array
of ranges encoded one by one (they decode as they are). Layout version 1 (dstream-exactly-once
before sources became plug-ins) had ``deo_offsets (app, topic, partition_id, next_offset)``
instead of ``deo_positions``; its offset-log entries (Kafka ranges as 4-element lists) decode as
they are. :func:`ensure_layout` upgrades either in the first write transaction, under the schema
lock: it creates the missing tables, copies the offsets of *every* application out of
``deo_offsets`` (version 1: key ``topic || '/' || partition_id``, no document) and drops it, and
sets ``schema_version = 3`` for all applications — all or nothing. Processes of an older version
must be stopped first (they refuse a layout newer than theirs).
"""

from __future__ import annotations

from typing import Any, Set

from ...errors import StoreVersionError
from .._base import SCHEMA_VERSION
from .._url import redact_url

__all__ = ["ABSENT", "MARKERS", "ensure_layout", "read_layout"]

#: The layout "version" of a database without the store's tables: reads return empty results.
ABSENT = 0

_DDL = (
    "CREATE TABLE IF NOT EXISTS deo_meta (app TEXT PRIMARY KEY, schema_version INTEGER NOT NULL, "
    "epoch BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS deo_positions (app TEXT NOT NULL, pkey TEXT NOT NULL, next_pos BIGINT NOT NULL, "
    "meta TEXT, PRIMARY KEY (app, pkey)){options}",
    "CREATE TABLE IF NOT EXISTS deo_pos_log (app TEXT NOT NULL, batch_id BIGINT NOT NULL, doc TEXT NOT NULL, "
    "PRIMARY KEY (app, batch_id))",
    "CREATE TABLE IF NOT EXISTS deo_batches (app TEXT NOT NULL, batch_id BIGINT NOT NULL, "
    "batch_time_ms BIGINT NOT NULL, ranges TEXT NOT NULL, PRIMARY KEY (app, batch_id))",
    "CREATE TABLE IF NOT EXISTS deo_commits (app TEXT NOT NULL, batch_id BIGINT NOT NULL, epoch BIGINT NOT NULL, "
    "PRIMARY KEY (app, batch_id))",
    "CREATE TABLE IF NOT EXISTS deo_values (app TEXT NOT NULL, ns TEXT NOT NULL, k TEXT NOT NULL, inum {int}, "
    "fnum {float}, doc TEXT, PRIMARY KEY (app, ns, k)){options}",
    "CREATE TABLE IF NOT EXISTS deo_batch_rows (app TEXT NOT NULL, ns TEXT NOT NULL, batch_id BIGINT NOT NULL, "
    "part TEXT NOT NULL, seq INTEGER NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (app, ns, batch_id, part, seq))",
    "CREATE TABLE IF NOT EXISTS deo_labels (app TEXT NOT NULL, label TEXT NOT NULL, PRIMARY KEY (app, label))",
)

_UPGRADE_FROM_1 = (
    "INSERT INTO deo_positions (app, pkey, next_pos, meta) "
    "SELECT app, topic || '/' || CAST(partition_id AS TEXT), next_offset, NULL FROM deo_offsets",
    "DROP TABLE deo_offsets",
)
_SET_VERSION = "UPDATE deo_meta SET schema_version = {version} WHERE schema_version < {version}"

#: The tables whose presence tells the layouts apart; each dialect lists which exist with one query.
MARKERS = ("deo_meta", "deo_offsets", "deo_positions", "deo_pos_log")


def read_layout(cur: Any, tables_sql: str, url: str) -> int:
    """The layout version of the database (:data:`ABSENT`, 1, 2 or 3), read without writing anything.

    ``cur`` is the store's cursor (``one``/``all``), ``tables_sql`` the dialect's query naming which
    of :data:`MARKERS` exist. Raises :class:`StoreVersionError` for a layout of a newer version.
    """
    names: Set[str] = {str(row[0]) for row in cur.all(tables_sql)}
    if "deo_meta" not in names:
        return ABSENT
    row = cur.one("SELECT MAX(schema_version) FROM deo_meta")
    found = int(row[0]) if row is not None and row[0] is not None else ABSENT
    if found > SCHEMA_VERSION:
        raise StoreVersionError(
            f"store {redact_url(url)} has layout version {found}, newer than version "
            f"{SCHEMA_VERSION} written by this dstream-exactly-once; upgrade the library")
    if "deo_pos_log" in names:
        return 3
    if "deo_positions" in names:
        return 2
    return 1 if "deo_offsets" in names else ABSENT


def ensure_layout(cur: Any, layout: int, *, int_type: str, float_type: str, table_options: str) -> None:
    """Create the tables of the current layout, upgrading a version-1 or 2 layout, in the caller's write
    transaction (which holds the schema lock and has just read ``layout`` with :func:`read_layout`)."""
    if layout == SCHEMA_VERSION:
        return
    for ddl in _DDL:
        cur.run(ddl.format(int=int_type, float=float_type, options=table_options))
    if layout == 1:
        for statement in _UPGRADE_FROM_1:
            cur.run(statement)
    if layout != ABSENT:
        cur.run(_SET_VERSION.format(version=SCHEMA_VERSION))
