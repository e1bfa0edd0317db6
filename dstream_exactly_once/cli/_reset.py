"""``dstream-eo offsets reset``: plan new positions, check every one, then (``--execute``) apply them.

Every mode checks its targets against the app's known positions and the broker's partitions (or a
file's length) and clamps each to ``[earliest, latest]`` (the plan shows where it did), and every
check — unknown keys, a missing file, a file whose content changed, a pending batch, the 64-bit
bounds — runs before the new epoch is taken: a refused reset writes nothing and fences no driver.
A file position keeps its identity document, re-anchored at the new byte, so the app restarts.
"""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..core._live_log import LiveLog
from ..errors import CliError, ConfigurationError
from ._driver_check import describe_driver, driver_status, refuse_if_live
from ._exit_codes import EXIT_OK, EXIT_USAGE
from ._kafka_args import BROKER_KIND, open_broker
from ._offsets import gather, parse_scope
from ._output import emit_json, print_table

__all__ = ["run_reset"]


def _requested(args: argparse.Namespace, rows: List[Dict[str, Any]], broker: Optional[LiveLog]) -> Dict[str, int]:
    """The position each row's key is asked to move to, before clamping."""
    if args.from_file:
        return _from_csv(args.from_file, rows)
    found: Dict[str, Optional[int]] = {}
    if args.to_datetime is not None or args.by_duration is not None:
        at_ms = _at_ms(args)
        kafka_rows = [r for r in rows if r["source"] == BROKER_KIND]
        if len(kafka_rows) != len(rows):
            raise CliError("--to-datetime/--by-duration apply to Kafka partitions only; narrow the scope with --topic",
                           EXIT_USAGE)
        if broker is not None:
            found = _positions_at(broker, [r["key"] for r in kafka_rows], at_ms)
    out: Dict[str, int] = {}
    for r in rows:
        lo, hi, cur = r.get("earliest"), r.get("latest"), r.get("position")
        if args.to_earliest:
            new = lo
        elif args.to_latest:
            new = hi
        elif args.to_datetime is not None or args.by_duration is not None:
            hit = found.get(r["key"])
            new = hi if hit is None else hit
        elif args.shift_by is not None:
            if cur is None:
                raise CliError(f"--shift-by needs a stored position; {r['key']} has none (use --to-offset)")
            new = cur + args.shift_by
        else:
            new = args.to_offset
        if new is None:
            raise CliError(f"no earliest/latest known for {r['key']} (file missing?)")
        out[r["key"]] = int(new)
    return out


def _positions_at(broker: LiveLog, keys: List[str], at_ms: int) -> Dict[str, Optional[int]]:
    """The first offset of each key at or after ``at_ms``, a failed look-up answered as one line."""
    try:
        return broker.positions_at(keys, at_ms)
    except Exception as exc:  # noqa: BLE001 - the broker client's errors, answered as one line
        raise CliError(f"cannot look up offsets by time at {broker.where}: {type(exc).__name__}: {exc}") from exc


def _at_ms(args: argparse.Namespace) -> int:
    """The time of ``--to-datetime``/``--by-duration`` in ms since the epoch (Kafka's record times)."""
    option = "--to-datetime" if args.to_datetime is not None else "--by-duration"
    try:
        when = args.to_datetime if args.to_datetime is not None else datetime.now(timezone.utc) - args.by_duration
        at_ms = int(when.timestamp() * 1000)
    except (OverflowError, ValueError):
        at_ms = -1
    if at_ms < 0:
        given = args.to_datetime.isoformat() if args.to_datetime is not None else f"({args.by_duration} back)"
        raise CliError(f"{option} {given}: the time must be at or after 1970-01-01T00:00:00Z (Kafka record times "
                       f"start there)", EXIT_USAGE)
    return at_ms


def read_positions_file(path: str) -> Dict[str, Tuple[int, int]]:
    """The rows of a ``--from-file`` CSV: ``{key: (position, line)}`` from ``topic,partition,offset``
    (Kafka) or ``position key,position`` rows; blank lines and ``#`` comments are skipped. Checked
    before the store or the broker is asked anything: an unreadable, empty or malformed file is a
    usage error (exit status 2) naming the file (and the line)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(enumerate(csv.reader(f), 1))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CliError(f"cannot read --from-file {path!r}: {exc}", EXIT_USAGE) from exc
    out: Dict[str, Tuple[int, int]] = {}
    for n, row in lines:
        if not row or not "".join(row).strip() or row[0].startswith("#"):
            continue
        try:
            if len(row) not in (2, 3):
                raise ValueError
            key, pos = (f"{row[0]}/{int(row[1])}", int(row[2])) if len(row) == 3 else (row[0], int(row[1]))
        except (ValueError, IndexError):
            raise CliError(f"--from-file {path}:{n}: expected topic,partition,offset or key,position, "
                           f"got {','.join(row)!r}", EXIT_USAGE) from None
        if pos < 0:
            raise CliError(f"--from-file {path}:{n}: position of {key} must be >= 0, got {pos}", EXIT_USAGE)
        if key in out:
            raise CliError(f"--from-file {path}:{n}: {key} is named twice (first on line {out[key][1]})", EXIT_USAGE)
        out[key] = (pos, n)
    if not out:
        what = "the file is empty" if not lines else "only blank lines and # comments"
        raise CliError(f"--from-file {path} holds no positions ({what}): write one topic,partition,offset or "
                       f"position key,position per line", EXIT_USAGE)
    return out


def _from_csv(path: str, rows: List[Dict[str, Any]]) -> Dict[str, int]:
    """The positions of ``path`` (:func:`read_positions_file`), each key one of ``rows``."""
    known = {r["key"] for r in rows}
    read = read_positions_file(path)
    unknown = [f"{key} (line {n})" for key, (_pos, n) in read.items() if key not in known]
    if unknown:
        raise CliError(f"--from-file {path}: unknown position(s) {', '.join(unknown)}: neither a stored position "
                       f"of the app nor a partition of its topics at the broker; known: "
                       f"{', '.join(sorted(known)) or '(none)'}")
    return {key: pos for key, (pos, _n) in read.items()}


def _clamp(rows: Mapping[str, Dict[str, Any]], requested: Dict[str, int]) -> List[Dict[str, Any]]:
    """One plan row per key: current, requested, the new position within [earliest, latest] and the clamp, if any."""
    from ..stores._writes import INT64_MAX

    plan = []
    for key, want in sorted(requested.items()):
        row = rows[key]
        lo, hi, cur = row.get("earliest"), row.get("latest"), row.get("position")
        if lo is None or hi is None:
            raise CliError(f"no earliest/latest known for {key}: pass --bootstrap-servers/--kafka-params "
                           f"(Kafka) or make the file readable here (files)")
        new, clamped = want, None
        if want < lo:
            new, clamped = lo, "earliest"
        elif want > hi:
            new, clamped = hi, "latest"
        if not 0 <= new <= INT64_MAX:
            raise CliError(f"position of {key} must be in 0..2**63-1, got {new}")
        plan.append({"key": key, "current": cur, "requested": want, "new": new,
                     "delta": None if cur is None else new - cur, "earliest": lo, "latest": hi,
                     "clamped": None if clamped is None else f"to {clamped} ({want} -> {new})"})
    return plan


def _documents(rows: Mapping[str, Dict[str, Any]], plan: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The document each planned position keeps at its new position, from its range kind (a file's
    identity re-anchored at the new byte, read on this host); a position that cannot move there is
    refused, naming its key."""
    from ..core._ranges import range_kind_of_key

    docs: Dict[str, Dict[str, Any]] = {}
    for p in plan:
        kind = range_kind_of_key(p["key"])
        if kind is None:
            continue
        try:
            doc = kind.reanchor_position(p["key"], rows[p["key"]].get("meta"), p["new"])
        except ConfigurationError as exc:
            raise CliError(str(exc)) from exc
        if doc is not None:
            docs[p["key"]] = doc
    return docs


def _check_writable(targets: Dict[str, int], docs: Dict[str, Dict[str, Any]]) -> None:
    """The store's own argument checks of :meth:`reset_positions`, run before the epoch is taken."""
    from ..errors import ConfigurationError
    from ..stores._commit_args import check_documents_arg, check_positions_arg

    try:
        check_documents_arg(docs, check_positions_arg(targets))
    except ConfigurationError as exc:
        raise CliError(f"cannot reset: {exc}") from exc


def _plan(args: argparse.Namespace, store: Any) -> Tuple[List[Dict[str, Any]], Dict[str, Dict[str, Any]]]:
    if args.from_file:
        read_positions_file(args.from_file)  # an empty or malformed file is named before anything is asked
    broker = open_broker(args)
    try:
        rows = gather(store, broker, parse_scope(args.topic), with_meta=True)
        if broker is None and any(r["source"] == BROKER_KIND for r in rows):
            raise CliError("resetting Kafka positions needs the broker (to check the partitions and clamp to "
                           "earliest/latest): pass --bootstrap-servers or --kafka-params", EXIT_USAGE)
        requested = _requested(args, rows, broker)
    finally:
        if broker is not None:
            broker.close()
    if not requested:
        raise CliError(f"nothing to reset: app {store.app_id!r} has no positions in the scope")
    by_key = {r["key"]: r for r in rows}
    plan = _clamp(by_key, requested)
    return plan, _documents(by_key, plan)


def run_reset(args: argparse.Namespace, store: Any) -> int:
    """``offsets reset``: every check first; a dry run prints the plan, ``--execute`` applies it."""
    out = sys.stdout
    plan, docs = _plan(args, store)
    targets = {p["key"]: p["new"] for p in plan}
    _check_writable(targets, docs)
    if args.execute:
        refuse_if_live(store, args.force, "reset positions")
    pending = [b for b in store.pending_batches() if {r.position_key for r in b.ranges if r.count()} & set(targets)]
    if pending:
        ids = [b.batch_id for b in pending]
        raise CliError(f"batch(es) {ids} are uncommitted in the offset log and would be replayed from their logged "
                       f"ranges; start the app once (or stop it gracefully) so they commit, then reset; a batch that "
                       f"fails every time is skipped with: dstream-eo batches skip --store {store.display_url} "
                       f"--app {store.app_id} --batch {ids[0]} --execute")
    columns = ["key", "current", "new", "delta", "earliest", "latest"] + (
        ["clamped"] if any(p["clamped"] for p in plan) else [])
    if not args.execute:
        status = driver_status(store)
        if args.json:
            emit_json({"dry_run": True, "plan": plan, "driver": status})
        else:
            out.write(f"DRY RUN for app {store.app_id} in {store.display_url} (nothing written; add --execute)\n"
                      f"{describe_driver(status)}\n")
            print_table(plan, columns, out)
        return EXIT_OK
    if not args.json:
        out.write("plan:\n")
        print_table(plan, columns, out)
    epoch = store.start_epoch()
    store.reset_positions(epoch, targets, docs)
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
