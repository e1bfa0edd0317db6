"""``dstream-eo batches``, ``lag`` and ``in-doubt``: the offset/commit log, every app's lag, and
Doris two-phase loads left in doubt by a crash. No Spark import."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List

from ._cli_common import (
    EXIT_OK,
    CliError,
    describe_driver,
    driver_status,
    emit_json,
    fmt_time,
    kafka_config,
    open_cli_store,
    print_table,
    read_batch,
    refuse_if_live,
)
from .stores.url import redact_url

__all__ = ["run_batches", "run_in_doubt", "run_lag"]


def _labels(store: Any, batch: Any, source: str) -> List[str]:
    """The sink labels of ``batch``'s partitions that the store recorded as applied, for the label
    source ``source`` (a DorisSink's is ``<app>.<table>``)."""
    from .sinks.labels import LabelGenerator

    gen = LabelGenerator(source)
    return [label for i in range(len(batch.ranges)) if store.has_label(label := gen.label(batch.batch_id, i))]


def run_batches(args: argparse.Namespace, store: Any) -> int:
    last_logged = store.last_logged_batch_id()
    last_committed = store.last_committed_batch_id()
    rows: List[Dict[str, Any]] = []
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
                         "state": "committed" if store.is_committed(bid) else "PENDING",
                         "ranges": len(ranges), "positions": sum(r.count() for r in ranges),
                         "detail": "; ".join(r.describe() for r in ranges) if args.ranges or args.json else None,
                         "labels": (", ".join(_labels(store, b, args.label_source)) or None)
                         if args.label_source else None})
    status = driver_status(store)
    if args.json:
        emit_json({"store": redact_url(store.url), "app": store.app_id, "last_logged": last_logged,
                   "last_committed": last_committed, "driver": status, "batches": rows})
        return EXIT_OK
    out = sys.stdout
    out.write(f"app {store.app_id} in {redact_url(store.url)}: last logged {last_logged}, last committed "
              f"{last_committed}; PENDING batches are replayed with their ranges at the next start\n"
              f"{describe_driver(status)}\n")
    damaged = [r["batch"] for r in rows if r["state"] == "DAMAGED"]
    cols = (["batch", "time", "state", "ranges", "positions"] + (["labels"] if args.label_source else [])
            + (["detail"] if args.ranges or damaged else []))
    print_table(rows, cols, out)
    if damaged:
        sys.stderr.write(f"warning: the offset-log entries of batch(es) {damaged} are damaged and were skipped "
                         f"(DAMAGED rows above)\n")
    return EXIT_OK


def run_lag(args: argparse.Namespace, store_url: str) -> int:
    from ._cli_offsets import Broker, gather
    from .stores import open_store

    with open_cli_store(store_url, None) as any_app:
        apps = any_app.list_apps()
    if not apps:
        raise CliError(f"no application has state in {redact_url(store_url)}")
    config = kafka_config(args)
    broker = Broker(config) if config is not None else None
    rows = []
    try:
        for app in apps:
            try:
                with open_store(store_url, app) as store:
                    parts = gather(store, broker)
                    status = driver_status(store)
                    lags = [p["lag"] for p in parts if p.get("lag") is not None]
                    doc = status["heartbeat"] or {}
                    rows.append({"app": app, "partitions": len(parts), "lag": sum(lags) if lags else None,
                                 "last_committed": store.last_committed_batch_id(), "epoch": status["epoch"],
                                 "driver": ("live" if status["live"] else "-") + (
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
    from ._cli_labels import OPTIONS_HINT, check_label_options
    from .errors import ConfigurationError
    from .sinks.doris import DorisSink, DorisStreamLoadClient

    password = ""
    if args.password_env:
        if args.password_env not in os.environ:
            raise CliError(f"--password-env {args.password_env}: no such environment variable is set; set it to "
                           f"the Doris password (or leave --password-env out for an empty password)")
        password = os.environ[args.password_env]
    client = DorisStreamLoadClient(args.fe, args.db, args.table, user=args.user, password=password)
    try:
        sink = DorisSink(client, label_app_id=args.label_app_id, strict_labels=args.strict_labels,
                         namespace=args.namespace)
        gen = sink.labels(store.app_id)
    except ConfigurationError as exc:
        raise CliError(f"{exc}; {OPTIONS_HINT}") from exc
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
        raise CliError(f"--fe must be an http(s):// URL of a Doris FE, got {url!r}")
    return url
