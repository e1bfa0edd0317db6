"""Delta Lake: an exactly-once table sink written with ``deltalake`` (delta-rs, no JVM).

Modules: ``_schema.py`` (the batch schema against the table's; rows to Arrow), ``_files.py`` (an
executor task's rows as Parquet files in the table directory, returning Delta ``add`` actions),
``_table.py`` (every ``deltalake`` call: snapshots, the one commit per batch, error translation),
``_log.py`` (what the table's log says: the last committed batch, unreferenced files) and
``_sink.py`` (:class:`DeltaSink`, the DStream protocol).

Protocol, per batch
-------------------
A Delta commit can carry an *application transaction* ``(app id, version)``, written atomically
with the commit's files; ``DeltaTable.transaction_version(app_id)`` reads the newest one back. The
sink uses the batch id as the version:

1. driver: the table's transaction of the sink's app id is read. At or past this batch id → the
   batch is in the table already (a replay): nothing is written, and the store commits the positions;
2. executors: each task writes its rows as Parquet files into the table directory (unreferenced
   so far: no reader sees them) and returns their ``add`` actions;
3. driver: ONE store transaction records the batch's files as ``pending`` under the sink's record
   key, with the epoch check: a fenced (older) driver stops here, before the table;
4. driver: ONE Delta commit adds every file with the transaction ``(app id, batch id)`` and the
   batch's input positions in the commit's custom metadata (key ``dstreamExactlyOnce``);
5. driver: the store commits the batch's positions and its commit-log entry with the record, now
   ``committed`` with the table version (``commit_each_batch``).

Crash points: before 4 — the files stay unreferenced, the replay writes the batch again (new
files); between 4 and 5 — the replay finds the transaction in the table and writes nothing. Two
drivers committing one batch concurrently: Delta refuses the second commit carrying the same
application transaction (a conflict); the loser finds the batch in the table and writes nothing, or,
when another change won, raises :class:`~dstream_exactly_once.errors.TableConflictError`.

A table that holds a batch of the sink's transaction id this store never started (another
application writing under the same id) is refused with a :class:`~dstream_exactly_once.errors.ConfigurationError`
rather than taken for a replay.

The table alone says where the stream stands: :func:`table_offsets` (Kafka, ``{TopicAndPartition:
offset}`` for ``fromOffsets``) and :func:`table_positions` read the newest batch's input positions
from the log, for a stream to start from when its store is lost.

Delivery guarantee
------------------
Exactly-once, provided no other writer uses the sink's application transaction id and the
table keeps its application transactions (Delta drops them only past
``delta.setTransactionRetentionDuration``, unset by default). Readers see each batch all at once.
"""

from __future__ import annotations

from ._log import table_offsets, table_positions
from ._sink import DeltaSink

__all__ = ["DeltaSink", "table_offsets", "table_positions"]
