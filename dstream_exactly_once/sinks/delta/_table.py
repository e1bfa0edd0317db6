"""Driver side of the Delta sink: reading a table's state and committing a batch's files in ONE commit.

Every ``deltalake`` call goes through this module, and its errors are translated here: a lost
concurrent commit becomes :class:`~dstream_exactly_once.errors.TableConflictError`, any other
failure of the table a :class:`~dstream_exactly_once.errors.SinkError` naming the table.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import pyarrow as pa

from ...errors import SinkError, TableConflictError
from ._files import FileAdd

__all__ = ["METADATA_KEY", "DeltaTarget", "batch_metadata"]

#: The commit-info key under which the sink records its batch (custom metadata of the commit).
METADATA_KEY = "dstreamExactlyOnce"


def batch_metadata(app_id: str, batch_id: int, ranges: Sequence[Any], rows: int) -> Dict[str, Any]:
    """The custom metadata of a batch's commit: the transaction's app id and batch id, the rows, and
    the batch's input positions (``[start, end)`` of each source partition)."""
    positions = [{"partition": r.position_key, "start": r.start, "end": r.end} for r in ranges]
    return {METADATA_KEY: json.dumps({"app_id": app_id, "batch_id": batch_id, "rows": rows, "positions": positions},
                                     separators=(",", ":"), sort_keys=True)}


def _commit_properties(app_id: str, batch_id: int, metadata: Dict[str, Any]) -> Any:
    """The commit properties of a batch: its application transaction and its metadata."""
    from deltalake import CommitProperties, Transaction

    return CommitProperties(app_transactions=[Transaction(app_id, batch_id)], custom_metadata=metadata)


class DeltaTarget:
    """One Delta table, by URI (``storage_options`` as ``deltalake`` takes them; never shown)."""

    def __init__(self, table_uri: str, storage_options: Optional[Mapping[str, str]] = None) -> None:
        self.table_uri = table_uri
        self.storage_options = dict(storage_options or {})
        self._snapshot: Optional[Any] = None  # the driver's snapshot, kept between batches (see latest())

    def __getstate__(self) -> Dict[str, Any]:
        return {**self.__dict__, "_snapshot": None}  # a snapshot stays in the process that read it

    def __repr__(self) -> str:
        return f"DeltaTarget({self.table_uri!r})"

    def describe(self) -> str:
        return f"Delta table {self.table_uri}"

    def load(self) -> Optional[Any]:
        """The table's newest snapshot (a ``deltalake.DeltaTable``), or ``None`` when there is no table yet."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self.table_uri, storage_options=self.storage_options or None)
        except TableNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - the one translation point of deltalake errors
            raise SinkError(f"{self.describe()}: cannot be read: {type(exc).__name__}: {exc}") from exc

    def latest(self) -> Optional[Any]:
        """The table's newest snapshot, as :meth:`load`, but kept between calls: a later call brings it up
        to date with the commits made since (reading only those, not the whole log again)."""
        if self._snapshot is not None:
            try:
                self._snapshot.update_incremental()
                return self._snapshot
            except Exception:  # noqa: BLE001 - the table changed under the snapshot (deleted, replaced): read it anew
                self._snapshot = None
        self._snapshot = self.load()
        return self._snapshot

    @staticmethod
    def arrow_schema(table: Any) -> pa.Schema:
        return pa.schema(table.schema().to_arrow())

    @staticmethod
    def partition_columns(table: Any) -> List[str]:
        return list(table.metadata().partition_columns)

    @staticmethod
    def transaction_version(table: Optional[Any], app_id: str) -> Optional[int]:
        """The newest batch id committed under ``app_id`` (the table's application transaction), or ``None``."""
        if table is None:
            return None
        version = table.transaction_version(app_id)
        return None if version is None else int(version)

    def commit(self, table: Optional[Any], adds: Sequence[FileAdd], schema: pa.Schema, partition_by: Sequence[str],
               app_id: str, batch_id: int, metadata: Dict[str, Any]) -> int:
        """Commit ``adds`` in ONE Delta commit carrying the application transaction ``(app_id, batch_id)``
        and ``metadata``, on the snapshot ``table`` (``None``: the commit creates the table). Returns
        the table version written. A concurrent commit that wins raises :class:`TableConflictError`."""
        from deltalake import Schema
        from deltalake.transaction import AddAction, create_table_with_add_actions

        actions = [AddAction(a.path, a.size, dict(a.partition_values), a.modification_time, True, a.stats)
                   for a in adds]
        props = _commit_properties(app_id, batch_id, metadata)
        before = None if table is None else int(table.version())
        with self._translated("commit", app_id, batch_id):
            if table is None:
                create_table_with_add_actions(self.table_uri, Schema.from_arrow(schema), actions, mode="append",
                                              partition_by=list(partition_by) or None,
                                              storage_options=self.storage_options or None, commit_properties=props)
            else:
                table.create_write_transaction(actions, "append", schema, list(partition_by) or None,
                                               commit_properties=props)
        return self._version_of(table, before, metadata)

    def merge(self, table: Optional[Any], data: pa.Table, keys: Sequence[str], partition_by: Sequence[str],
              app_id: str, batch_id: int, metadata: Dict[str, Any]) -> int:
        """Upsert ``data`` (one row per key) by ``keys`` in ONE Delta commit carrying the application
        transaction ``(app_id, batch_id)`` and ``metadata``: matching rows are updated, the others
        inserted (``table`` ``None``: the commit creates the table with ``data``). Returns the version."""
        from deltalake import write_deltalake

        from ._merge import merge_predicate

        props = _commit_properties(app_id, batch_id, metadata)
        before = None if table is None else int(table.version())
        with self._translated("merge", app_id, batch_id):
            if table is None:
                write_deltalake(self.table_uri, data, mode="append", partition_by=list(partition_by) or None,
                                storage_options=self.storage_options or None, commit_properties=props)
            else:
                (table.merge(data, merge_predicate(keys), source_alias="s", target_alias="t", commit_properties=props)
                 .when_matched_update_all().when_not_matched_insert_all().execute())
        return self._version_of(table, before, metadata)

    @contextmanager
    def _translated(self, what: str, app_id: str, batch_id: int) -> Iterator[None]:
        """``deltalake``'s errors of the ``what`` (commit, merge) of a batch, translated: a lost
        concurrent commit is :class:`TableConflictError`, any other failure a :class:`SinkError`."""
        from deltalake.exceptions import CommitFailedError

        try:
            yield
        except CommitFailedError as exc:
            raise TableConflictError(
                f"{self.describe()}: the {what} of batch {batch_id} (application transaction {app_id!r}) lost to a "
                f"concurrent commit ({exc}); nothing of it is in the table, and the next attempt reads the table "
                f"again") from exc
        except Exception as exc:  # noqa: BLE001 - the one translation point of deltalake errors
            raise SinkError(f"{self.describe()}: the {what} of batch {batch_id} (application transaction "
                            f"{app_id!r}) failed: {type(exc).__name__}: {exc}") from exc

    def _version_of(self, table: Optional[Any], before: Optional[int], metadata: Dict[str, Any]) -> int:
        """The version of the commit just made with ``metadata`` on the snapshot ``table`` of version
        ``before`` (``None``: the commit created the table). The snapshot is brought up to date: exactly
        one version past ``before`` is the commit just made; otherwise it is looked up in the newest
        commits' infos (another writer committed too)."""
        if table is None:
            table = self.load()
            if table is None:  # the commit made the table; it cannot have vanished
                raise SinkError(f"{self.describe()}: not found right after a commit to it")
        else:
            table.update_incremental()  # deltalake leaves the snapshot at the version it was read at
        newest = int(table.version())
        if newest == (-1 if before is None else before) + 1:
            return newest  # no other commit since the snapshot: the newest one is ours
        for depth in (1, 20):  # ours is the newest commit unless another writer committed since
            for info in table.history(depth):
                if info.get(METADATA_KEY) == metadata[METADATA_KEY]:
                    return int(info["version"])
        return int(table.version())  # more than 20 commits since ours: the newest version is an upper bound

    def committed_files(self, table: Any) -> List[str]:
        """The data files the table's newest snapshot references (paths relative to the root, decoded)."""
        from urllib.parse import unquote

        actions = table.get_add_actions(flatten=True)
        return [unquote(p) for p in pa.table(actions).column("path").to_pylist()]

    def history(self, table: Any, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The table's commit infos, newest first."""
        return list(table.history(limit))
