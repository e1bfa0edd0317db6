"""Shared pieces of the ``dstream-eo`` operator commands: exit codes, the error type, tables, JSON,
opening a store, the broker connection and the live-driver check. No Spark import."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple

from ..core.heartbeat import driver_status  # noqa: F401 - the verbs take it from here
from ..errors import DStreamExactlyOnceError

__all__ = [
    "EXIT_FAILED", "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "CliError", "driver_status", "emit_json", "fmt_time",
    "kafka_config", "open_cli_store", "print_table",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit status:
  0    success (a dry run included)
  1    the command failed (one line on stderr: store, broker or file error)
  2    usage error (bad or missing option, bad value)
  3    refused: a driver of the app is live (fresh heartbeat); stop it or pass --force
  130  interrupted"""


class CliError(DStreamExactlyOnceError):
    """A command's one-line failure; ``code`` is its exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def fmt_time(epoch_s: Optional[float]) -> str:
    if epoch_s is None:
        return "-"
    try:
        return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):  # a time no calendar date holds: shown as the number
        return f"{epoch_s}s"


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], out: Optional[TextIO] = None) -> None:
    """A plain aligned table (``-`` for missing values) on ``out`` (default: the current stdout)."""
    out = sys.stdout if out is None else out
    if not rows:
        out.write("(none)\n")
        return
    cells = [[("-" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    for row in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")


def emit_json(doc: Any, out: Optional[TextIO] = None) -> None:
    out = sys.stdout if out is None else out
    out.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")


def open_cli_store(url: str, app_id: Optional[str]) -> Any:
    """The store of ``app_id`` (read-only until a command applies a change), after checking that it
    exists: a missing SQLite file is refused (never created), and so is an app with no state there
    (the error lists the apps that have). ``app_id`` None: any app (for :meth:`list_apps`)."""
    from ..stores import open_store
    from ..stores.url import redact_url

    store = open_store(url, app_id or "_")
    try:
        path = getattr(store, "path", None)
        if store.scheme == "sqlite" and isinstance(path, str) and path != ":memory:" and not os.path.exists(path):
            raise CliError(f"no store at {redact_url(url)}: the SQLite file {path!r} does not exist")
        if app_id is not None:
            apps = store.list_apps()
            if app_id not in apps:
                raise CliError(f"app {app_id!r} not found in {redact_url(url)}; apps there: "
                               f"{', '.join(apps) if apps else '(none)'}")
    except BaseException:
        store.close()
        raise
    return store


def kafka_config(args: argparse.Namespace) -> Any:
    """The :class:`KafkaConfig` from ``--bootstrap-servers`` or ``--kafka-params FILE`` (JSON), or None."""
    from ..kafka.params import parse_kafka_params

    params: Dict[str, Any] = {}
    path = getattr(args, "kafka_params", None)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                loaded = json.load(f)
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read --kafka-params {path!r}: {exc}") from exc
        if not isinstance(loaded, dict):
            raise CliError(f"--kafka-params {path!r} must hold a JSON object of kafkaParams, "
                           f"got {type(loaded).__name__}")
        params.update(loaded)
    if getattr(args, "bootstrap_servers", None):
        params["bootstrap.servers"] = args.bootstrap_servers
    if not params:
        return None
    return parse_kafka_params(params)


def describe_driver(status: Mapping[str, Any]) -> str:
    doc = status["heartbeat"]
    if not doc:
        return f"driver: no heartbeat (epoch {status['epoch']})"
    state = "LIVE" if status["live"] else "not live"
    age = status["age_s"]
    return (f"driver: {state} - epoch {doc.get('epoch')} (store epoch {status['epoch']}), host {doc.get('host')}, "
            f"pid {doc.get('pid')}, last batch {doc.get('last_batch')}, heartbeat "
            f"{'-' if age is None else f'{age:.0f}s'} ago")


def refuse_if_live(store: Any, force: bool, what: str) -> Dict[str, Any]:
    status = driver_status(store)
    if status["live"] and not force:
        doc = status["heartbeat"]
        raise CliError(f"refusing to {what}: a driver of app {store.app_id!r} is live (host {doc.get('host')}, pid "
                       f"{doc.get('pid')}, epoch {doc.get('epoch')}, heartbeat {status['age_s']:.0f}s ago); stop it "
                       f"first or pass --force", EXIT_REFUSED)
    return status


def read_batch(store: Any, batch_id: int) -> Tuple[Any, Optional[str]]:
    """``(offset-log entry or None, None)``, or ``(None, why)`` when the stored entry is damaged (torn
    JSON, wrong types, a range no reader accepts): read commands list the others and say so."""
    from ..errors import StoreUnavailableError

    try:
        return store.get_batch(batch_id), None
    except StoreUnavailableError:
        raise
    except (DStreamExactlyOnceError, ValueError, TypeError, KeyError, IndexError) as exc:
        return None, f"damaged offset-log entry of batch {batch_id}: {type(exc).__name__}: {exc}"


def ranges_text(ranges: List[Any]) -> str:
    return ", ".join(r.describe() for r in ranges)
