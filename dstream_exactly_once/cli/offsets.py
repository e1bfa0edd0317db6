"""``dstream-eo offsets show`` and ``dstream-eo offsets reset`` (modelled on ``kafka-consumer-groups.sh``).

Positions are the store's (the single source of truth); the broker (``--bootstrap-servers`` or
``--kafka-params``) only adds earliest/latest offsets and lag, and is needed to plan a Kafka reset.
A reset is a dry run unless ``--execute``; executing takes a new epoch first (a running driver is
fenced: it stops at its next batch) and then sets every planned position in one store transaction.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

from ..errors import CliError
from ..stores.url import redact_url
from .driver_check import describe_driver, driver_status
from .exit_codes import EXIT_OK
from .kafka_args import kafka_config
from .output import emit_json, fmt_time, print_table
from .store_access import read_batch

__all__ = ["Broker", "gather", "parse_datetime", "parse_duration", "parse_scope", "show"]

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
    """``--topic`` values (:func:`~.arg_types.topic_partitions`) as ``{topic: partitions or None
    (all)}``; None = all. The same topic given twice: the union, all when one of them said all."""
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
class Broker:
    """Earliest/latest/by-time offsets of Kafka partitions (one admin client, closed by :meth:`close`)."""

    def __init__(self, config: Any) -> None:
        from ..kafka.metadata import KafkaMetadata

        self.config = config
        self.md = KafkaMetadata(config)

    def partitions(self, topics: List[str]) -> Dict[str, List[int]]:
        from ..errors import ConfigurationError

        existing = self.md.topics()
        unknown = sorted(set(topics) - existing)
        if unknown:
            raise CliError(f"unknown topic(s) {', '.join(map(repr, unknown))} at {self.config.bootstrap}")
        try:
            return self.md.partitions(topics)
        except ConfigurationError as exc:
            raise CliError(str(exc)) from exc

    def ends(self, tps: List[Any]) -> Tuple[Dict[Any, int], Dict[Any, int]]:
        return self.md.earliest(tps), self.md.latest(tps)

    def at_time(self, tps: List[Any], ms: int) -> Dict[Any, Optional[int]]:
        from kafka import KafkaConsumer, TopicPartition

        try:
            consumer = KafkaConsumer(**self.config.consumer_kwargs())
            try:
                found = consumer.offsets_for_times({TopicPartition(tp.topic, tp.partition): ms for tp in tps})
            finally:
                consumer.close()
        except Exception as exc:  # noqa: BLE001 - kafka-python's errors, answered as one line
            raise CliError(f"cannot look up offsets by time at {self.config.bootstrap}: {type(exc).__name__}: "
                           f"{exc}") from exc
        return {tp: (None if found.get(TopicPartition(tp.topic, tp.partition)) is None
                     else int(found[TopicPartition(tp.topic, tp.partition)].offset)) for tp in tps}

    def close(self) -> None:
        self.md.close()


def _last_batches(store: Any, keys: List[str], depth: int = 50) -> Dict[str, Tuple[int, int]]:
    """``{key: (batch id, batch time ms)}`` of the newest committed batch that moved each key."""
    out: Dict[str, Tuple[int, int]] = {}
    last = store.last_committed_batch_id()
    bid = last
    while bid is not None and bid >= 0 and last - bid < depth and len(out) < len(keys):
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


def _check_scope(scope: Dict[str, Optional[List[int]]], stored: Dict[str, Any], broker: Optional[Broker]) -> None:
    """Refuse a ``--topic`` the app has no position of and the broker (if given) does not know."""
    by_topic: Dict[str, set] = {}
    for tp in stored.values():
        by_topic.setdefault(tp.topic, set()).add(tp.partition)
    if broker is not None:
        return  # the broker's partitions decide (Broker.partitions names an unknown topic)
    unknown = sorted(t for t in scope if t not in by_topic)
    if unknown:
        raise CliError(f"unknown topic(s) {', '.join(map(repr, unknown))}: the app has no positions there; its "
                       f"topics: {', '.join(sorted(by_topic)) or '(none)'}")
    for topic, ids in sorted(scope.items()):
        missing = sorted(set(ids or []) - by_topic[topic])
        if missing:
            raise CliError(f"topic {topic!r}: the app has no position of partition(s) {missing}; it has "
                           f"{sorted(by_topic[topic])}")


def gather(store: Any, broker: Optional[Broker], scope: Optional[Dict[str, Optional[List[int]]]] = None,
           *, with_meta: bool = False) -> List[Dict[str, Any]]:
    """One row per stream partition: stored position, log start/end (or file length), lag, last batch
    (and, ``with_meta``, each non-Kafka position's document under ``meta``). What a row holds from
    the store alone comes from the position's range kind (``SourceRange.position_row``); Kafka
    rows get the log's ends and the lag from ``broker``."""
    from ..core.ranges import range_kind_of_key
    from ..kafka.offsets import TopicAndPartition

    positions = store.load_positions()
    rows: Dict[str, Dict[str, Any]] = {}
    kafka: Dict[str, TopicAndPartition] = {}
    for key, pos in positions.items():
        kind = range_kind_of_key(key)
        rows[key] = {"key": key, **(kind.position_row(key, pos) if kind is not None else
                                    {"source": "unknown", "position": pos.offset, "lag": None})}
        if rows[key]["source"] == "kafka":
            kafka[key] = TopicAndPartition(rows[key]["topic"], rows[key]["partition"])
        elif with_meta:
            rows[key]["meta"] = pos.meta
    if scope is not None:
        _check_scope(scope, kafka, broker)
        wanted = set(scope)
        rows = {k: r for k, r in rows.items() if r.get("topic") in wanted and (
            scope[r["topic"]] is None or r["partition"] in (scope[r["topic"]] or []))}
    if broker is not None:
        topics = sorted(set(scope) if scope is not None else {tp.topic for tp in kafka.values()})
        for topic, ids in broker.partitions(topics).items():
            for p in ids:
                key = f"{topic}/{p}"
                if scope is not None and scope.get(topic) is not None and p not in (scope[topic] or []):
                    continue
                rows.setdefault(key, {"key": key, "source": "kafka", "topic": topic, "partition": p, "position": None})
                kafka[key] = TopicAndPartition(topic, p)
        if scope is not None:
            for topic, wanted_ids in scope.items():
                missing = sorted(set(wanted_ids or []) - set(broker.partitions([topic])[topic]))
                if missing:
                    raise CliError(f"topic {topic!r} has no partition(s) {missing}")
        tps = [kafka[k] for k in rows if k in kafka]
        earliest, latest = broker.ends(tps)
        for key, row in rows.items():
            tp = kafka.get(key)
            if tp is None:
                continue
            row["earliest"], row["latest"] = earliest.get(tp), latest.get(tp)
            if row["position"] is not None and row["latest"] is not None:
                row["lag"] = max(row["latest"] - row["position"], 0)
    last = _last_batches(store, list(rows))
    for key, row in rows.items():
        if key in last:
            row["last_batch"], row["last_batch_time"] = last[key][0], fmt_time(last[key][1] / 1000)
    return [rows[k] for k in sorted(rows, key=lambda k: (rows[k]["source"], rows[k].get("topic") or k,
                                                           rows[k].get("partition") or 0))]


# ---------------------------------------------------------------- show
def show(args: argparse.Namespace, store: Any) -> int:
    config = kafka_config(args)
    broker = Broker(config) if config is not None else None
    try:
        rows = gather(store, broker, parse_scope(args.topic))
    finally:
        if broker is not None:
            broker.close()
    status = driver_status(store)
    doc = {"store": redact_url(store.url), "app": store.app_id, "driver": status,
           "last_committed_batch": store.last_committed_batch_id(), "partitions": rows,
           "broker": None if config is None else config.bootstrap}
    if args.json:
        emit_json(doc)
        return EXIT_OK
    out = sys.stdout
    out.write(f"app {store.app_id} in {redact_url(store.url)}\n{describe_driver(status)}\n")
    if broker is None and any(r["source"] == "kafka" for r in rows):
        out.write("no --bootstrap-servers/--kafka-params: stored positions only (no earliest/latest/lag)\n")
    print_table(rows, ["key", "position", "earliest", "latest", "lag", "last_batch", "last_batch_time"], out)
    return EXIT_OK



