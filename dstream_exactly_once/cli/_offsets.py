"""``dstream-eo offsets show`` and ``dstream-eo offsets reset`` (modelled on ``kafka-consumer-groups.sh``).

Positions are the store's (the single source of truth); the broker (``--bootstrap-servers`` or
``--kafka-params``, the live log of the Kafka range kind, asked by kind) only adds earliest/latest
offsets and lag, and is needed to plan a Kafka reset.
A reset is a dry run unless ``--execute``; executing takes a new epoch first (a running driver is
fenced: it stops at its next batch) and then sets every planned position in one store transaction.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..core._live_log import LiveLog
from ..errors import CliError, ConfigurationError
from ._driver_check import describe_driver, driver_status
from ._exit_codes import EXIT_OK
from ._kafka_args import BROKER_KIND, open_broker
from ._output import emit_json, fmt_time, print_table, unit_column
from ._store_access import read_batch

if TYPE_CHECKING:
    from ..stores._base import TransactionalStore
    from ..stores._interfaces import BatchLog

__all__ = ["broker_partitions", "gather", "parse_datetime", "parse_duration", "parse_scope", "show"]

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_datetime(text: str) -> datetime:
    """An ISO-8601 time (``2024-05-01T12:00:00Z``, ``…+02:00``; no zone = UTC) as an aware datetime."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO-8601 time such as 2024-05-01T12:00:00Z, got {text!r}") \
            from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def parse_duration(text: str) -> timedelta:
    """An ISO-8601 duration ``PnDTnHnMnS`` (e.g. ``PT15M``, ``P1DT2H``)."""
    m = _DURATION.match(text.strip().upper())
    if not m or not any(m.groups()) or text.strip().upper().endswith("T"):
        raise argparse.ArgumentTypeError(f"expected a duration PnDTnHnMnS such as PT15M or P1DT2H, got {text!r}")
    d, h, mi, s = m.groups()
    try:
        return timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))
    except OverflowError:
        raise argparse.ArgumentTypeError(f"duration too long (at most 999999999 days), got {text!r}") from None


def parse_scope(specs: Optional[List[Tuple[str, Optional[Tuple[int, ...]]]]]
                ) -> Optional[Dict[str, Optional[List[int]]]]:
    """``--topic`` values (:func:`~dstream_exactly_once._command_line.topic_partitions`) as ``{topic:
    partitions or None (all)}``; None = all. The same topic given twice: the union, all when one of them said all."""
    if not specs:
        return None
    out: Dict[str, Optional[List[int]]] = {}
    for topic, ids in specs:
        if ids is None or (topic in out and out[topic] is None):
            out[topic] = None
        else:
            out[topic] = sorted(set(out.get(topic) or []) | set(ids))
    return out


# ---------------------------------------------------------------- gathering the current state
def _last_batches(store: BatchLog, keys: List[str], depth: int = 50) -> Dict[str, Tuple[int, int]]:
    """``{key: (batch id, batch time ms)}`` of the newest committed batch that moved each key."""
    out: Dict[str, Tuple[int, int]] = {}
    last = store.last_committed_batch_id()
    if last is None:
        return out
    bid = last
    while bid >= 0 and last - bid < depth and len(out) < len(keys):
        b, damage = read_batch(store, bid)
        if damage is not None:  # a damaged entry says nothing about positions: look further back
            bid -= 1
            continue
        if b is None:
            break
        if store.is_committed(bid):
            for r in b.ranges:
                if r.count() and r.position_key not in out:
                    out[r.position_key] = (bid, b.batch_time_ms)
        bid -= 1
    return out


def broker_partitions(broker: LiveLog, topics: List[str]) -> Dict[str, Dict[int, str]]:
    """``{topic: {partition: position key}}`` at the broker; an unknown topic is refused, naming it."""
    try:
        return broker.stream_partitions(topics)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc


def _check_scope(scope: Dict[str, Optional[List[int]]], stored: List[Dict[str, Any]],
                 broker: Optional[LiveLog]) -> None:
    """Refuse a ``--topic`` the app has no position of and the broker (if given) does not know."""
    by_topic: Dict[str, set] = {}
    for row in stored:
        by_topic.setdefault(row["topic"], set()).add(row["partition"])
    if broker is not None:
        return  # the broker's partitions decide (broker_partitions names an unknown topic)
    unknown = sorted(t for t in scope if t not in by_topic)
    if unknown:
        raise CliError(f"unknown topic(s) {', '.join(map(repr, unknown))}: the app has no positions there; its "
                       f"topics: {', '.join(sorted(by_topic)) or '(none)'}")
    for topic, ids in sorted(scope.items()):
        missing = sorted(set(ids or []) - by_topic[topic])
        if missing:
            raise CliError(f"topic {topic!r}: the app has no position of partition(s) {missing}; it has "
                           f"{sorted(by_topic[topic])}")


def gather(store: TransactionalStore, broker: Optional[LiveLog],
           scope: Optional[Dict[str, Optional[List[int]]]] = None, *, with_meta: bool = False,
           live: bool = False) -> List[Dict[str, Any]]:
    """One row per stream partition: stored position, log start/end (or file length), lag, last batch
    (and, ``with_meta``, each non-Kafka position's document under ``meta``). What a row holds from
    the store alone comes from the display of the position's range kind (``RangeDisplay.position_row``);
    Kafka rows get the log's ends and the lag from ``broker`` (the Kafka kind's live log). ``live``: each
    kind measures its live source as this host sees it (``RangeDisplay.live_rows``: a file's size now),
    which may add rows of data no stored position covers yet (their ``position`` is ``None``)."""
    from ..core._range_display import range_display
    from ..core._ranges import range_kind_of_key

    positions = store.load_positions()
    rows: Dict[str, Dict[str, Any]] = {}
    by_kind: Dict[Any, Dict[str, Any]] = {}
    for key, pos in positions.items():
        kind = range_kind_of_key(key)
        rows[key] = {"key": key, **(range_display(kind.kind).position_row(key, pos) if kind is not None else
                                    {"source": "unknown", "position": pos.offset, "lag": None})}
        if rows[key]["source"] != BROKER_KIND and with_meta:
            rows[key]["meta"] = pos.meta
        if kind is not None:
            by_kind.setdefault(kind, {})[key] = pos
    if live:
        for kind, kind_positions in by_kind.items():
            for key, seen in range_display(kind.kind).live_rows(kind_positions).items():
                rows.setdefault(key, {"key": key}).update(seen)
    if scope is not None:
        _check_scope(scope, [r for r in rows.values() if r["source"] == BROKER_KIND], broker)
        wanted = set(scope)
        rows = {k: r for k, r in rows.items() if r.get("topic") in wanted and (
            scope[r["topic"]] is None or r["partition"] in (scope[r["topic"]] or []))}
    if broker is not None:
        topics = sorted(set(scope) if scope is not None else
                        {r["topic"] for r in rows.values() if r["source"] == BROKER_KIND})
        at_broker = broker_partitions(broker, topics)
        for topic, keys in at_broker.items():
            for p, key in keys.items():
                if scope is not None and scope.get(topic) is not None and p not in (scope[topic] or []):
                    continue
                rows.setdefault(key, {"key": key, "source": BROKER_KIND, "topic": topic, "partition": p,
                                      "position": None})
        if scope is not None:
            for topic, wanted_ids in scope.items():
                missing = sorted(set(wanted_ids or []) - set(at_broker[topic]))
                if missing:
                    raise CliError(f"topic {topic!r} has no partition(s) {missing}")
        earliest, latest = broker.ends([k for k, r in rows.items() if r["source"] == BROKER_KIND])
        for key, row in rows.items():
            if row["source"] != BROKER_KIND:
                continue
            row["earliest"], row["latest"] = earliest.get(key), latest.get(key)
            if row["position"] is not None and row["latest"] is not None:
                row["lag"] = max(row["latest"] - row["position"], 0)
    last = _last_batches(store, list(rows))
    for key, row in rows.items():
        if key in last:
            row["last_batch"], row["last_batch_time"] = last[key][0], fmt_time(last[key][1] / 1000)
    return [rows[k] for k in sorted(rows, key=lambda k: (rows[k]["source"], rows[k].get("topic") or k,
                                                           rows[k].get("partition") or 0))]


# ---------------------------------------------------------------- show
def _unit(source: str) -> str:
    from ..core._ranges import range_kind

    try:
        return range_kind(source).position_unit
    except Exception:  # noqa: BLE001 - a kind this install does not know
        return "position"


def show(args: argparse.Namespace, store: TransactionalStore) -> int:
    broker = open_broker(args)
    try:
        rows = gather(store, broker, parse_scope(args.topic), live=True)
    finally:
        if broker is not None:
            broker.close()
    for row in rows:
        row["unit"] = _unit(row["source"])
    status = driver_status(store)
    doc = {"store": store.display_url, "app": store.app_id, "driver": status,
           "last_committed_batch": store.last_committed_batch_id(), "partitions": rows,
           "broker": None if broker is None else broker.where}
    if args.json:
        emit_json(doc)
        return EXIT_OK
    out = sys.stdout
    out.write(f"app {store.app_id} in {store.display_url}\n{describe_driver(status)}\n")
    if broker is None and any(r["source"] == BROKER_KIND for r in rows):
        out.write("no --bootstrap-servers/--kafka-params: stored positions only (no earliest/latest/lag)\n")
    column = unit_column(r["unit"] for r in rows)
    table = [{**r, column: r["position"]} for r in rows]
    print_table(table, ["key", column, "earliest", "latest", "lag", "last_batch", "last_batch_time"], out)
    _file_notes(rows, out)
    return EXIT_OK


def _file_notes(rows: List[Dict[str, Any]], out: Any) -> None:
    """Where the LATEST and LAG of rows with a live view come from (files: measured here or not, why)."""
    measured = [r for r in rows if r.get("live") and r.get("position") is not None]
    rotated = [r for r in measured if r.get("rotated")]
    new = [r for r in rows if r.get("live") and r.get("position") is None]
    if measured or new:
        out.write(f"latest/lag of {len(measured) + len(new)} file(s): their size now, read on this host"
                  + (f"; {len(rotated)} rotated since the driver last recorded them" if rotated else "")
                  + (f"; {len(new)} new file(s) no position covers yet, unread" if new else "") + "\n")
    for r in rows:
        if r.get("rotated"):
            out.write(f"  {r['key']}: {r.get('lag_note')}\n")
        elif r.get("live") is False:
            out.write(f"  {r['key']}: {r.get('live_note')}; {r.get('lag_note')}\n")
