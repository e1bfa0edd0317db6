"""``dstream-eo batches``, ``batches skip``, ``lag`` and ``in-doubt``: the offset/commit log, skipping
a batch that fails every time, every app's lag, and Doris two-phase loads left in doubt by a crash.
No Spark import."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List

from .._redaction import redact_url
from ..errors import CliError
from ._driver_check import describe_driver, driver_status, refuse_if_live
from ._exit_codes import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from ._kafka_args import open_broker
from ._output import emit_json, fmt_time, print_table, unit_column
from ._store_access import open_cli_store, read_batch

__all__ = ["check_batches_args", "run_batches", "run_in_doubt", "run_lag", "run_skip"]


def _labels(store: Any, batch: Any, source: str) -> List[str]:
    """The sink labels of ``batch``'s partitions that the store recorded as applied, for the label
    source ``source`` (a DorisSink's is ``<app>.<table>``)."""
    from ..sinks._labels import LabelGenerator

    gen = LabelGenerator(source)
    return [label for i in range(len(batch.ranges)) if store.has_label(label := gen.label(batch.batch_id, i))]


def check_batches_args(args: argparse.Namespace) -> None:
    """The listing needs ``--store`` and ``--app`` (a sub-verb brings its own)."""
    missing = [flag for flag, value in (("--store", args.store), ("--app", args.app)) if value is None]
    if missing:
        raise CliError(f"batches: the following arguments are required: {', '.join(missing)} (or an action: "
                       f"batches skip; see dstream-eo batches --help)", EXIT_USAGE)


def run_batches(args: argparse.Namespace, store: Any) -> int:
    from ..admin._skip import skipped_batches

    last_logged = store.last_logged_batch_id()
    last_committed = store.last_committed_batch_id()
    rows: List[Dict[str, Any]] = []
    skipped = skipped_batches(store) if last_logged is not None else {}
    if last_logged is not None:
        first = max(0, last_logged - args.limit + 1)
        for bid in range(last_logged, first - 1, -1):
            b, damage = read_batch(store, bid)
            if damage is not None:
                rows.append({"batch": bid, "state": "DAMAGED", "detail": damage})
                continue
            if b is None:
                continue
            ranges = [r for r in b.ranges if r.count()]
            rows.append({"batch": bid, "time": fmt_time(b.batch_time_ms / 1000),
                         "state": ("SKIPPED" if bid in skipped else "committed") if store.is_committed(bid)
                         else "PENDING",
                         "skipped": _skip_note(skipped[bid]) if bid in skipped else None,
                         "ranges": len(ranges), "positions": sum(r.count() for r in ranges),
                         "unit": unit_column(r.position_unit for r in ranges),
                         "detail": "; ".join(r.describe() for r in ranges) if args.ranges or args.json else None,
                         "labels": (", ".join(_labels(store, b, args.label_source)) or None)
                         if args.label_source else None})
    status = driver_status(store)
    if args.json:
        for r in rows:  # the whole incident record: who, when, reason, ranges, epoch
            r["skipped"] = skipped.get(r["batch"])
        emit_json({"store": store.display_url, "app": store.app_id, "last_logged": last_logged,
                   "last_committed": last_committed, "driver": status, "batches": rows})
        return EXIT_OK
    out = sys.stdout
    out.write(f"app {store.app_id} in {store.display_url}: {_log_summary(last_logged, last_committed)}\n"
              f"{describe_driver(status)}\n")
    damaged = [r["batch"] for r in rows if r["state"] == "DAMAGED"]
    # what a batch's count counts: Kafka offsets, file bytes (one unit for the table, else per cell)
    counted = unit_column((r["unit"] for r in rows if r.get("ranges")), plural=True)
    for r in rows:
        if "positions" in r:
            r[counted] = r["positions"] if counted != "positions" else f"{r['positions']} {r['unit']}s"
    cols = (["batch", "time", "state", "ranges", counted] + (["labels"] if args.label_source else [])
            + (["skipped"] if any(r.get("skipped") for r in rows) else [])
            + (["detail"] if args.ranges or damaged else []))
    print_table(rows, cols, out)
    if damaged:
        sys.stderr.write(f"warning: the offset-log entries of batch(es) {damaged} are damaged and were skipped "
                         f"(DAMAGED rows above)\n")
    return EXIT_OK


def _log_summary(last_logged: Any, last_committed: Any) -> str:
    """The offset log and commit log in one line, saying what an empty offset log means."""
    if last_logged is None and last_committed is None:
        return "no batch logged or committed yet"
    if last_logged is None:
        return (f"last committed batch {last_committed}; the offset log is empty: this app's batches are planned "
                f"outside the store (a Structured Streaming query with Spark's own source commits only batch ids "
                f"here), so there are no ranges to list")
    return (f"last logged {last_logged}, last committed {'none' if last_committed is None else last_committed}; "
            f"PENDING batches are replayed with their ranges at the next start")


def _skip_note(doc: Dict[str, Any]) -> str:
    return f"by {doc.get('by')} at {doc.get('at')}" + (f": {doc['reason']}" if doc.get("reason") else "")


def run_skip(args: argparse.Namespace) -> int:
    """``batches skip``: print the plan (dry run) or skip the batches (``--execute``)."""
    from ..admin._skip import skip_batch
    from ..errors import ConfigurationError, DriverLiveError, OffsetConflictError

    with open_cli_store(args.store, args.app):  # a missing store file or an unknown app, each named
        pass
    try:
        plan = skip_batch(args.store, args.app, args.batch, execute=args.execute, force=args.force,
                          reason=args.reason)
    except DriverLiveError as exc:
        raise CliError(str(exc), EXIT_REFUSED) from exc
    except (ConfigurationError, OffsetConflictError) as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        emit_json(plan.to_dict())
        return EXIT_OK
    out = sys.stdout
    ids = plan.batch_ids
    cols = ["batch", "key", "before", "after", "state", "range"]
    if not plan.executed:
        out.write(f"DRY RUN for app {plan.app_id} in {plan.store} (nothing written; add --execute)\n"
                  f"{describe_driver(plan.driver)}\n"
                  f"would skip batch(es) {ids} (pending: {list(plan.pending)}): the records of the ranges in state "
                  f"'skip' are never output; the positions move to AFTER and the batches are marked committed\n")
        print_table(plan.rows, cols, out)
        return EXIT_OK
    out.write(f"skipped batch(es) {[b for b, o in plan.outcomes.items() if o == 'skipped']} of app {plan.app_id} "
              f"with new epoch {plan.epoch}: a driver still running with an older epoch is fenced and stops at its "
              f"next batch\n")
    print_table(plan.rows, cols, out)
    for bid, doc in plan.incidents.items():
        out.write(f"incident record skip:{bid:020d}: {_skip_note(doc)}; {doc['positions']} position(s) never "
                  f"output\n")
    for bid, outcome in plan.outcomes.items():
        if outcome != "skipped":
            out.write(f"batch {bid}: {outcome} before the skip took its epoch; nothing of it was skipped\n")
    out.write("restart the app: it plans from the positions after the skipped batch(es)\n")
    return EXIT_OK


def run_lag(args: argparse.Namespace, store_url: str) -> int:
    from ..stores import open_store
    from ._offsets import gather

    with open_cli_store(store_url, None) as any_app:
        apps = any_app.list_apps()
    if not apps:
        raise CliError(f"no application has state in {redact_url(store_url)}")
    broker = open_broker(args)
    rows = []
    try:
        for app in apps:
            try:
                with open_store(store_url, app) as store:
                    parts = gather(store, broker, live=True)  # files: their size now, where readable here
                    status = driver_status(store)
                    lags = [p["lag"] for p in parts if p.get("lag") is not None]
                    doc = status["heartbeat"] or {}
                    rows.append({"app": app, "partitions": sum(p.get("position") is not None for p in parts),
                                 "lag": sum(lags) if lags else None,
                                 "last_committed": store.last_committed_batch_id(), "epoch": status["epoch"],
                                 "driver": ("live" if status["live"] else "dead" if status.get("dead") else "-") + (
                                     f" {doc.get('host')}:{doc.get('pid')}" if doc else ""),
                                 "heartbeat_age_s": None if status["age_s"] is None else round(status["age_s"])})
            except Exception as exc:  # noqa: BLE001 - one unreadable app (damaged, newer) does not hide the others
                rows.append({"app": app, "partitions": None, "lag": None, "last_committed": None, "epoch": None,
                             "driver": "-", "heartbeat_age_s": None, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        if broker is not None:
            broker.close()
    if args.json:
        emit_json({"store": redact_url(store_url), "apps": rows})
        return EXIT_OK
    sys.stdout.write(f"{len(rows)} app(s) in {redact_url(store_url)}" +
                     ("" if broker is not None else " (no broker given: Kafka lag not shown)") + "\n")
    print_table(rows, ["app", "partitions", "lag", "last_committed", "epoch", "driver", "heartbeat_age_s"]
                + (["error"] if any("error" in r for r in rows) else []))
    return EXIT_OK


def run_in_doubt(args: argparse.Namespace, store: Any) -> int:
    """List (and with ``--resolve``, finish as the store decided) the Doris 2PC loads of pending batches."""
    from ..errors import ConfigurationError
    from ..sinks.doris import DorisSink, DorisStreamLoadClient
    from ._labels import OPTIONS_HINT, check_label_options

    password = ""
    if args.password_env:
        if args.password_env not in os.environ:
            raise CliError(f"--password-env {args.password_env}: no such environment variable is set; set it to "
                           f"the Doris password (or leave --password-env out for an empty password)", EXIT_USAGE)
        password = os.environ[args.password_env]
    client = DorisStreamLoadClient(args.fe, args.db, args.table, user=args.user, password=password)
    try:
        sink = DorisSink(client, label_app_id=args.label_app_id, strict_labels=args.strict_labels,
                         namespace=args.namespace)
        gen = sink.labels(store.app_id)
    except ConfigurationError as exc:
        raise CliError(f"{exc}; {OPTIONS_HINT}", EXIT_USAGE) from exc
    check_label_options(store, sink, gen, f"{args.db}.{args.table}")
    pending = store.pending_batches()
    rows = []
    for b in pending:
        for i in range(len(b.ranges)):
            label = gen.label(b.batch_id, i)
            recorded = store.has_label(label)
            rows.append({"batch": b.batch_id, "partition": i, "label": label,
                         "store": "committed" if recorded else "not recorded",
                         "decision": "commit" if recorded else "abort",
                         "doris": client.get_load_state(label).value})
    resolved: Dict[str, str] = {}
    if args.resolve and pending:
        refuse_if_live(store, args.force, "resolve in-doubt loads")
        store.start_epoch()  # the crashed driver (and any zombie) is fenced before loads are decided
        for b in pending:
            resolved.update({k: v.value for k, v in sink.recover(store, b).items()})
        for r in rows:
            r["result"] = resolved.get(r["label"])
    if args.json:
        emit_json({"app": store.app_id, "doris": client.describe(None), "in_doubt": rows, "resolved": bool(resolved)})
        return EXIT_OK
    out = sys.stdout
    out.write(f"app {store.app_id}: {len(pending)} pending batch(es), {client.describe(None)}\n"
              f"{describe_driver(driver_status(store))}\n")
    print_table(rows, ["batch", "partition", "label", "store", "decision", "doris"] + (["result"] if resolved else []),
                out)
    if rows and not args.resolve:
        out.write("dry run: add --resolve to commit/abort them as the store decided\n")
    return EXIT_OK


def check_doris_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise CliError(f"--fe must be an http(s):// URL of a Doris FE, got {redact_url(url)!r}", EXIT_USAGE)
    return url
