"""``dstream-eo offsets show`` and ``dstream-eo offsets reset`` (modelled on ``kafka-consumer-groups.sh``).

Positions are the store's (the single source of truth); the broker (``--bootstrap-servers`` or
``--kafka-params``) only adds earliest/latest offsets and lag, and is needed to plan a Kafka reset.
A reset is a dry run unless ``--execute``; executing takes a new epoch first (a running driver is
fenced: it stops at its next batch) and then sets every planned position in one store transaction.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

from ._cli_common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    describe_driver,
    driver_status,
    emit_json,
    fmt_time,
    kafka_config,
    print_table,
    refuse_if_live,
)
from .stores.url import redact_url

__all__ = ["parse_datetime", "parse_duration", "run_offsets"]

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
    return timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))


def parse_scope(specs: Optional[List[str]]) -> Optional[Dict[str, Optional[List[int]]]]:
    """``--topic t`` / ``--topic t:0,2`` options as ``{topic: partitions or None (all)}``; None = all."""
    if not specs:
        return None
    out: Dict[str, Optional[List[int]]] = {}
    for spec in specs:
        topic, _, parts = spec.partition(":")
        if not topic:
            raise CliError(f"--topic needs a topic name, optionally with :partition,…, got {spec!r}", EXIT_USAGE)
        if not parts:
            out[topic] = None
            continue
        try:
            ids = sorted({int(p) for p in parts.split(",")})
        except ValueError:
            raise CliError(f"--topic {spec!r}: partitions must be integers separated by commas", EXIT_USAGE) from None
        existing = out.get(topic, [])
        out[topic] = None if topic in out and existing is None else sorted(set(existing or []) | set(ids))
    return out


# ---------------------------------------------------------------- gathering the current state
class _Broker:
    """Earliest/latest/by-time offsets of Kafka partitions (one admin client, closed by :meth:`close`)."""

    def __init__(self, config: Any) -> None:
        from .kafka.metadata import KafkaMetadata

        self.config = config
        self.md = KafkaMetadata(config)

    def partitions(self, topics: List[str]) -> Dict[str, List[int]]:
        from .errors import ConfigurationError

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

        consumer = KafkaConsumer(**self.config.consumer_kwargs())
        try:
            found = consumer.offsets_for_times({TopicPartition(tp.topic, tp.partition): ms for tp in tps})
        finally:
            consumer.close()
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
        b = store.get_batch(bid)
        if b is None:
            break
        if store.is_committed(bid):
            for r in b.ranges:
                if r.count() and r.position_key not in out:
                    out[r.position_key] = (bid, b.batch_time_ms)
        bid -= 1
    return out


def gather(store: Any, broker: Optional[_Broker], scope: Optional[Dict[str, Optional[List[int]]]] = None
           ) -> List[Dict[str, Any]]:
    """One row per stream partition: stored position, log start/end (or file length), lag, last batch."""
    from .offsets import OffsetRange, TopicAndPartition

    positions = store.load_positions()
    rows: Dict[str, Dict[str, Any]] = {}
    kafka: Dict[str, TopicAndPartition] = {}
    for key, pos in positions.items():
        tp = OffsetRange.parse_position_key(key)
        if tp is not None:
            kafka[key] = tp
            rows[key] = {"key": key, "source": "kafka", "topic": tp.topic, "partition": tp.partition,
                         "position": pos.offset}
        else:
            path = (pos.meta or {}).get("path") if isinstance(pos.meta, dict) else None
            size = os.path.getsize(path) if isinstance(path, str) and os.path.exists(path) else None
            rows[key] = {"key": key, "source": "file", "path": path, "position": pos.offset, "earliest": 0,
                         "latest": size, "lag": None if size is None else max(size - pos.offset, 0)}
    if scope is not None:
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
    broker = _Broker(config) if config is not None else None
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


# ---------------------------------------------------------------- reset
def _targets(args: argparse.Namespace, rows: List[Dict[str, Any]], broker: Optional[_Broker]) -> Dict[str, int]:
    from .offsets import TopicAndPartition

    if args.from_file:
        return _from_csv(args.from_file, {r["key"] for r in rows})
    out: Dict[str, int] = {}
    at_ms: Optional[int] = None
    if args.to_datetime is not None or args.by_duration is not None:
        when = args.to_datetime if args.to_datetime is not None else datetime.now(timezone.utc) - args.by_duration
        at_ms = int(when.timestamp() * 1000)
        kafka_rows = [r for r in rows if r["source"] == "kafka"]
        if len(kafka_rows) != len(rows):
            raise CliError("--to-datetime/--by-duration apply to Kafka partitions only; narrow the scope with --topic")
        found = broker.at_time([TopicAndPartition(r["topic"], r["partition"]) for r in kafka_rows], at_ms) \
            if broker is not None else {}
    for r in rows:
        lo, hi, cur = r.get("earliest"), r.get("latest"), r.get("position")
        if args.to_earliest:
            new = lo
        elif args.to_latest:
            new = hi
        elif at_ms is not None:
            hit = found.get(TopicAndPartition(r["topic"], r["partition"]))
            new = hi if hit is None else hit
        elif args.shift_by is not None:
            if cur is None:
                raise CliError(f"--shift-by needs a stored position; {r['key']} has none (use --to-offset)")
            new = cur + args.shift_by
        else:
            new = args.to_offset
        if new is None:
            raise CliError(f"no earliest/latest known for {r['key']} (file missing?)")
        if lo is not None and hi is not None:
            new = min(max(new, lo), hi)  # as kafka-consumer-groups: clamped to what the log holds
        out[r["key"]] = int(new)
    return out


def _from_csv(path: str, known: set) -> Dict[str, int]:
    """``topic,partition,offset`` rows (Kafka) or ``position key,position`` rows."""
    out: Dict[str, int] = {}
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for n, row in enumerate(csv.reader(f), 1):
                if not row or row[0].startswith("#"):
                    continue
                try:
                    key, pos = (f"{row[0]}/{int(row[1])}", int(row[2])) if len(row) == 3 else (row[0], int(row[1]))
                except (ValueError, IndexError):
                    raise CliError(f"{path}:{n}: expected topic,partition,offset or key,position, got {row!r}") \
                        from None
                if pos < 0:
                    raise CliError(f"{path}:{n}: position must be >= 0, got {pos}")
                out[key] = pos
    except OSError as exc:
        raise CliError(f"cannot read --from-file {path!r}: {exc}") from exc
    return out


def reset(args: argparse.Namespace, store: Any) -> int:
    config = kafka_config(args)
    broker = _Broker(config) if config is not None else None
    out = sys.stdout
    try:
        rows = gather(store, broker, parse_scope(args.topic))
        if broker is None and any(r["source"] == "kafka" for r in rows) and not args.from_file \
                and args.to_offset is None:
            raise CliError("resetting Kafka positions needs the broker: pass --bootstrap-servers or --kafka-params")
        targets = _targets(args, rows, broker)
    finally:
        if broker is not None:
            broker.close()
    by_key = {r["key"]: r for r in rows}
    plan: List[Dict[str, Any]] = [{"key": k, "current": by_key.get(k, {}).get("position"), "new": v,
             "earliest": by_key.get(k, {}).get("earliest"), "latest": by_key.get(k, {}).get("latest")}
            for k, v in sorted(targets.items())]
    for p in plan:
        p["delta"] = None if p["current"] is None else p["new"] - p["current"]
    if not plan:
        raise CliError(f"nothing to reset: app {store.app_id!r} has no positions in the scope")
    if args.execute:
        refuse_if_live(store, args.force, "reset positions")
    pending = [b for b in store.pending_batches() if {r.position_key for r in b.ranges if r.count()} & set(targets)]
    if pending:
        ids = [b.batch_id for b in pending]
        raise CliError(f"batch(es) {ids} are uncommitted in the offset log and would be replayed from their logged "
                       f"ranges; start the app once (or stop it gracefully) so they commit, then reset; a batch that "
                       f"fails every time is skipped with: dstream-eo batches skip --store {redact_url(store.url)} "
                       f"--app {store.app_id} --batch {ids[0]} --execute")
    columns = ["key", "current", "new", "delta", "earliest", "latest"]
    if not args.execute:
        status = driver_status(store)
        if args.json:
            emit_json({"dry_run": True, "plan": plan, "driver": status})
        else:
            out.write(f"DRY RUN for app {store.app_id} in {redact_url(store.url)} (nothing written; add --execute)\n"
                      f"{describe_driver(status)}\n")
            print_table(plan, columns, out)
        return EXIT_OK
    if not args.json:
        out.write("plan:\n")
        print_table(plan, columns, out)
    epoch = store.start_epoch()
    store.reset_positions(epoch, targets)
    after = store.load_positions()
    for p in plan:
        p["after"] = after[p["key"]].offset if p["key"] in after else None
    if args.json:
        emit_json({"dry_run": False, "epoch": epoch, "plan": plan})
    else:
        out.write(f"applied with new epoch {epoch}: a driver still running with an older epoch is fenced and stops "
                  f"at its next batch; restart the app to read from the new positions\n")
        print_table(plan, ["key", "current", "after"], out)
    return EXIT_OK


def run_offsets(args: argparse.Namespace, store: Any) -> int:
    return show(args, store) if args.offsets_cmd == "show" else reset(args, store)

