"""Store-anchored positions: the ``deo-store`` sink keeps the query's source positions in the store.

With option ``anchor=true`` the sink commits each micro-batch as a DStream application commits a
batch: ONE store transaction holds the batch's writes, the source's positions under the store's
usual position keys (``deo-kafka``: ``topic/partition``; ``aof``: ``file:<id>`` with the file's
identity document; shown by ``dstream-eo offsets show``; compare-and-set ``stored == start``), the
batch's offset-log and commit-log entries, and the query run that committed it. The positions
come from Spark's offset log in the query's checkpoint (``<checkpointLocation>/offsets/<batch
id>``: a version line, a metadata line, then one line per source), which Spark writes before the
batch runs. A ``deo-kafka`` or ``aof`` source given the same store and application (options
``starting.positions.store``, ``starting.positions.app``) starts a query without an offset log
from these positions, so a query restarted on a new, lost or changed checkpoint resumes exactly
where the output stopped; a DStream application on the same store and
application id continues from them too, and the other way round.

Rules for Spark batch ``b`` of query ``q`` (run ``r``), against the run document stored with the
last commit (``{"query", "run", "epoch", "spark_batch", "fenced"}``, :func:`decide_anchored`):

- a run the store recorded as replaced (``fenced``) is refused with
  :class:`~dstream_exactly_once.errors.FencedError`;
- the same query with ``b <= spark_batch``: Spark replays a batch committed before; nothing written;
- otherwise the batch is the application's next batch (the one after the last committed batch id);
  the first commit of a run takes a new epoch and records the previous run as replaced.

The store's compare-and-set on the offsets then refuses a batch that does not start where the
output stopped (:class:`~dstream_exactly_once.errors.OffsetConflictError`, nothing written): a new
checkpoint whose source did not start from the store's positions, or two queries on one application.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit

from ..core._ranges import SourceRange
from ..errors import ConfigurationError, FencedError, OffsetConflictError
from ..files.structured import _aof_offsets as aof_offsets
from ..kafka._offsets import OffsetRange, TopicAndPartition
from ..kafka.structured._source_offsets import offsets_of, starts_of
from ._sink_runs import KEEP_FENCED, QueryRun

__all__ = ["ANCHOR_NAMESPACE", "AnchorDecision", "check_checkpoint_location", "decide_anchored", "offset_log_entry",
           "source_ranges", "stored_kafka_offsets"]

#: The value namespace holding the run document of an anchored sink (key :data:`ANCHOR_KEY`).
ANCHOR_NAMESPACE = "deo-sink"
ANCHOR_KEY = "run"


def check_checkpoint_location(raw: Any, sink: str) -> str:
    """The local directory of writer option ``checkpointLocation`` (an absolute path or ``file:`` URI)."""
    text = raw if isinstance(raw, str) else ""
    parts = urlsplit(text)
    path = unquote(parts.path) if parts.scheme == "file" else text if not parts.scheme else ""
    if not path.startswith("/"):
        raise ConfigurationError(
            f"{sink} option anchor=true reads the query's offset log, so the query needs writer option "
            f"'checkpointLocation' as an absolute local path or file: URI (the sink's commit reads "
            f"<checkpointLocation>/offsets/<batch id>), got {raw!r}; set .option('checkpointLocation', '/abs/dir')")
    return path.rstrip("/") or "/"


def offset_log_entry(checkpoint: str, batch_id: int) -> Optional[List[Any]]:
    """The source offsets Spark logged for ``batch_id`` (one JSON value per source, ``None`` for a source
    without one), or ``None`` when the checkpoint holds no entry for it."""
    path = os.path.join(checkpoint, "offsets", str(batch_id))
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise ConfigurationError(f"{path} is not a Spark offset-log entry (a version line, a metadata line, then "
                                 f"one line per source)")
    return [None if line == "-" else json.loads(line) for line in lines[2:]]


def _kind(doc: Any) -> Optional[str]:
    """``"aof"`` or ``"kafka"``: the source whose offset ``doc`` is (``None``: another source's)."""
    if not isinstance(doc, dict):
        return None
    if doc.get("v") == aof_offsets.DOC_VERSION and isinstance(doc.get("files"), dict):
        return "aof"
    try:
        offsets_of(doc)
    except ConfigurationError:
        return None
    return "kafka"


def _source_doc(entry: Sequence[Any], where: str) -> Tuple[str, Dict[str, Any]]:
    found = [(kind, doc) for doc in entry if (kind := _kind(doc)) is not None]
    if len(found) != 1:
        raise ConfigurationError(f"{where}: anchor=true keeps the positions of exactly one deo-kafka or aof source, "
                                 f"but the query's offset log holds {len(found)} such offsets among {len(entry)} "
                                 f"source(s); nothing was written")
    return found[0]


def source_ranges(checkpoint: str, batch_id: int, stored: Mapping[str, Any], where: str) -> List[SourceRange]:
    """The ranges of Spark batch ``batch_id`` of the query's ``deo-kafka`` or ``aof`` source (``stored``:
    the store's positions, ``{position key: Position}``)."""
    entry = offset_log_entry(checkpoint, batch_id)
    if entry is None:
        raise ConfigurationError(f"{where}: the checkpoint {checkpoint!r} holds no offset-log entry "
                                 f"offsets/{batch_id}; is option 'checkpointLocation' the query's checkpoint (on "
                                 f"the driver's machine)? Spark's asyncProgressTrackingEnabled, which writes the "
                                 f"offset log later, cannot be used with anchor=true; nothing was written")
    kind, end = _source_doc(entry, where)
    previous = offset_log_entry(checkpoint, batch_id - 1) if batch_id > 0 else None
    before = _source_doc(previous, where) if previous is not None else None
    if before is not None and before[0] != kind:
        raise ConfigurationError(f"{where}: offsets/{batch_id - 1} and offsets/{batch_id} belong to different sources")
    if kind == "aof":
        return aof_ranges(None if before is None else before[1], end)
    return list(kafka_ranges(None if before is None else before[1], end, stored_kafka_offsets(stored), where,
                             batch_id))


def aof_ranges(before: Optional[Mapping[str, Any]], end: Mapping[str, Any]) -> List[SourceRange]:
    """The file ranges of an ``aof`` batch: each entry of ``end`` that differs from ``before`` holds the
    range that changed it (without ``before``, a new checkpoint's first batch: every entry, those the
    batch did not read being empty at the position the query started from)."""
    files = dict(before.get("files") or {}) if before is not None else {}
    return [aof_offsets.entry_range(key, doc) for key, doc in sorted(dict(end["files"]).items())
            if files.get(key) != doc]


def kafka_ranges(before_doc: Optional[Mapping[str, Any]], end: Mapping[str, Any],
                 stored: Mapping[TopicAndPartition, int], where: str, batch_id: int) -> List[OffsetRange]:
    """The Kafka ranges of Spark batch ``batch_id``: from the range start the entry records (``@from``) or
    the previous batch's offsets, to the batch's offsets. A partition with neither is refused when the
    store holds a position of it (its start is unknown); otherwise its range is empty at the batch's
    offset (nothing to compare; the position is stored)."""
    before = offsets_of(before_doc) if before_doc is not None else {}
    starts = starts_of(end)
    out = []
    for tp, until in sorted(offsets_of(end).items()):
        if tp in starts or tp in before:
            begin = starts.get(tp, before.get(tp, until))
        elif tp in stored:
            raise ConfigurationError(
                f"{where}: the offset log does not say where the batch began reading {tp}, which has a stored "
                f"position ({stored[tp]}): the query's deo-kafka source did not start from the store. Give the "
                f"source options starting.positions.store and starting.positions.app (the sink's store and app "
                f"id) and start again on a new checkpoint; nothing was written")
        else:  # a partition the store has no position of: nothing to compare, its position is stored
            begin = until
        if until < begin:
            raise ConfigurationError(f"{where}: offsets/{batch_id} ends {tp} at {until} before its start {begin}")
        out.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return out


def _name(r: SourceRange) -> str:
    return str(r.topicPartition()) if isinstance(r, OffsetRange) else r.position_key


def stored_kafka_offsets(positions: Mapping[str, Any]) -> Dict[TopicAndPartition, int]:
    """The Kafka positions among a store's ``positions`` (``{position key: Position}``)."""
    out: Dict[TopicAndPartition, int] = {}
    for key, pos in positions.items():
        tp = OffsetRange.parse_position_key(key)
        if isinstance(tp, TopicAndPartition):
            out[tp] = int(pos.offset)
    return out


@dataclass(frozen=True)
class AnchorDecision:
    """What the anchored sink does with a Spark batch: skip a replay, or commit under ``epoch`` (``None``:
    take a new one) recording ``fenced`` runs."""

    replay: bool
    epoch: Optional[int]
    fenced: Tuple[str, ...]

    def doc(self, ident: QueryRun, epoch: int, spark_batch: int) -> Dict[str, Any]:
        """The run document stored with the commit."""
        return {"query": ident.query, "run": ident.run, "epoch": epoch, "spark_batch": spark_batch,
                "fenced": list(self.fenced)}


def decide_anchored(where: str, stored: Optional[Mapping[str, Any]], ident: QueryRun, batch_id: int) -> AnchorDecision:
    """The rules of this module for Spark batch ``batch_id`` of ``ident`` against the ``stored`` run document."""
    if not stored:
        return AnchorDecision(False, None, ())
    fenced = tuple(str(r) for r in stored.get("fenced", ()))
    if ident.run in fenced:
        raise FencedError(f"{where}: run {ident.run} of query {ident.query} was replaced by a later start (run "
                          f"{stored.get('run')}, query {stored.get('query')}, epoch {stored.get('epoch')}); this run "
                          f"must stop")
    if stored.get("query") == ident.query and batch_id <= int(stored.get("spark_batch", -1)):
        return AnchorDecision(True, None, fenced)
    if stored.get("run") == ident.run:
        return AnchorDecision(False, int(stored["epoch"]), fenced)
    return AnchorDecision(False, None, (fenced + (str(stored.get("run")),))[-KEEP_FENCED:])


def anchored_commit(store: Any, writes: Any, checkpoint: str, batch_id: int, ident: QueryRun, where: str) -> Any:
    """Commit ``writes`` of Spark batch ``batch_id`` with the source's offsets in one transaction of ``store``
    (an open store of the application); returns the :class:`~dstream_exactly_once.CommitOutcome`."""
    from ..stores._writes import CommitOutcome, PlannedBatch

    decision = decide_anchored(where, store.get_value(ANCHOR_NAMESPACE, ANCHOR_KEY), ident, batch_id)
    if decision.replay:
        return CommitOutcome.REPLAYED
    stored = store.load_positions()
    ranges = source_ranges(checkpoint, batch_id, stored, where)
    moved = [r for r in ranges if r.position_key in stored and stored[r.position_key].offset != r.start]
    if moved:
        shown = ", ".join(f"{_name(r)} stored {stored[r.position_key].offset}, batch from {r.start}"
                          for r in moved[:5])
        raise OffsetConflictError(
            f"{where}: the batch does not start where the application's output stopped ({shown}); nothing was "
            f"written. Start the source from the store (options starting.positions.store and "
            f"starting.positions.app = the sink's store and app id) with a new checkpoint, or use a new "
            f"application id")
    ids = [i for i in (store.last_committed_batch_id(), store.last_logged_batch_id()) if i is not None]
    epoch = store.start_epoch() if decision.epoch is None else decision.epoch
    out = writes.copy()
    out.put(ANCHOR_NAMESPACE, ANCHOR_KEY, decision.doc(ident, epoch, batch_id))
    batch = PlannedBatch(max(ids) + 1 if ids else 0, int(time.time() * 1000), tuple(ranges))
    return store.commit(epoch, batch, out, log_entry=True)
