"""Argument parsing of the ``dstream-eo`` operator commands (``offsets``, ``batches``, ``retire``,
``lag``, ``in-doubt``, ``delta``, ``chart``). No Spark import."""

from __future__ import annotations

import argparse
from typing import Any

from .._command_line import int_at_least, non_empty, topic_partitions
from . import _commands as commands
from ._exit_codes import EXIT_CODES_HELP

__all__ = ["add_operator_commands"]


def _store(p: argparse.ArgumentParser, app: bool = True, required: bool = True) -> None:
    p.add_argument("--store", required=required, type=non_empty, metavar="URL",
                   help="store URL (sqlite:///…, postgresql://…, redis://…); shown redacted")
    if app:
        p.add_argument("--app", required=required, type=non_empty, metavar="ID", help="application id in the store")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _broker(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-servers", metavar="HOST:PORT[,…]", type=non_empty,
                   help="Kafka brokers, for earliest/latest offsets and lag")
    p.add_argument("--kafka-params", metavar="FILE", type=non_empty,
                   help="JSON file of kafkaParams (security settings, isolation.level); instead of or with "
                        "--bootstrap-servers")


def _sub(sub: Any, name: str, help_: str, description: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=description, epilog=EXIT_CODES_HELP,
                                                formatter_class=argparse.RawDescriptionHelpFormatter)
    return p


def add_operator_commands(sub: Any) -> None:
    """Add the operator subcommands to the ``dstream-eo`` subparsers ``sub``."""
    from ._offsets import parse_datetime, parse_duration

    offsets = _sub(sub, "offsets", "show or reset an app's stored positions",
                   "Show or reset the positions an application resumes from (the store is the source of truth).")
    osub = offsets.add_subparsers(dest="offsets_cmd", required=True, metavar="ACTION", parser_class=type(offsets))
    show = _sub(osub, "show", "positions, log ends, lag and last batch per partition",
                "Per stream partition: stored position, broker earliest/latest (file length), lag, last batch.")
    show.set_defaults(func=commands.offsets_show)
    _store(show)
    _broker(show)
    show.add_argument("--topic", action="append", type=topic_partitions, metavar="T[:P,…]",
                      help="only these topics/partitions")
    reset = _sub(osub, "reset", "move an app's positions (dry run unless --execute)",
                 "Plan new positions and print them; --execute applies them in one store transaction after "
                 "taking a new epoch (a running driver is fenced). Refused while a driver is live unless --force.")
    reset.set_defaults(func=commands.offsets_reset)
    _store(reset)
    _broker(reset)
    reset.add_argument("--topic", action="append", type=topic_partitions, metavar="T[:P,…]",
                       help="scope (repeatable); default: all")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the oldest offset still in the log (files: 0)")
    to.add_argument("--to-latest", action="store_true", help="the end of the log (files: their length)")
    to.add_argument("--to-datetime", type=parse_datetime, metavar="ISO",
                    help="the first offset at or after this time (2024-05-01T12:00:00Z; no zone = UTC)")
    to.add_argument("--by-duration", type=parse_duration, metavar="PnDTnHnMnS",
                    help="the first offset at or after now minus this duration (PT15M, P1DT2H)")
    to.add_argument("--shift-by", type=int, metavar="N", help="move each position by N (negative: back)")
    to.add_argument("--to-offset", type=int_at_least(0), metavar="N", help="this position for every partition")
    to.add_argument("--from-file", metavar="CSV", type=non_empty,
                    help="rows topic,partition,offset (or key,position)")
    reset.add_argument("--execute", action="store_true", help="apply the plan (default: dry run)")
    reset.add_argument("--force", action="store_true", help="apply even though a driver's heartbeat is fresh")
    export = _sub(osub, "export", "print committed Kafka offsets for another consumer",
                  "Print the committed offsets as Spark's Kafka source takes them (startingOffsets).")
    export.set_defaults(func=commands.offsets_export)
    _store(export)
    export.add_argument("--format", choices=["structured-streaming"], default="structured-streaming")

    batches = _sub(sub, "batches", "the offset log and commit log of an app; skip a batch that always fails",
                   "Newest batches of the offset log: committed, PENDING (replayed at the next start) or SKIPPED "
                   "(by an operator: `batches skip`).")
    batches.set_defaults(func=commands.batches)
    _store(batches, required=False)  # required unless a sub-verb is given (checked when the command runs)
    batches.add_argument("--limit", type=int_at_least(1), default=20, help="newest N batches (default 20)")
    batches.add_argument("--ranges", action="store_true", help="show each batch's ranges")
    batches.add_argument("--label-source", metavar="S", type=non_empty,
                         help="show the sink labels recorded for this label source (DorisSink: <app>.<table>)")
    bsub = batches.add_subparsers(dest="batches_cmd", required=False, metavar="[ACTION]", parser_class=type(batches))
    skip = _sub(bsub, "skip", "skip pending batches that fail every time (dry run unless --execute)",
                "Move an app past pending batches whose output fails every time: their records are never output. "
                "Dry run by default (the batches, their ranges, the positions before and after). --execute takes "
                "a new epoch (a running driver is fenced) and commits each batch without output, with an incident "
                "record (who, when, ranges, reason), in one store transaction. Only the oldest pending batches can "
                "be skipped (repeat --batch to name several). Refused while a driver is live unless --force.")
    skip.set_defaults(func=commands.batches_skip)
    _store(skip)
    skip.add_argument("--batch", required=True, action="append", type=int_at_least(0), metavar="N",
                      help="the batch id (see `dstream-eo batches`); repeatable")
    skip.add_argument("--reason", type=non_empty, metavar="TEXT", help="why, kept in the incident record")
    skip.add_argument("--execute", action="store_true", help="apply the skip (default: dry run)")
    skip.add_argument("--force", action="store_true", help="apply even though a driver's heartbeat is fresh")

    retire = _sub(sub, "retire", "delete everything stored of an app that will not run again (dry run unless "
                  "--execute)",
                  "Delete everything the store holds of one application: its epoch, positions and position log, "
                  "offset log, commit log, values (every namespace), batch rows, labels, heartbeat and incident "
                  "records. Dry run by default: what would be deleted, per kind and namespace, with counts. "
                  "--execute takes a new epoch (a running driver is fenced) and deletes it all in one store "
                  "transaction (one script on Redis); a driver of the app still running is then refused at its "
                  "next write. Other applications are not touched. Fails when the app has nothing stored. "
                  "Refused while a driver is live unless --force.")
    retire.set_defaults(func=commands.retire)
    _store(retire)
    retire.add_argument("--execute", action="store_true", help="delete it (default: dry run)")
    retire.add_argument("--force", action="store_true", help="delete even though a driver's heartbeat is fresh")

    lag = _sub(sub, "lag", "every app in a store: lag, last batch, driver",
               "One line per application found in the store.")
    lag.set_defaults(func=commands.lag)
    _store(lag, app=False)
    _broker(lag)

    doubt = _sub(sub, "in-doubt", "list/resolve Doris 2PC loads of uncommitted batches",
                 "Doris two-phase loads of the batches a crash left uncommitted: the store decides (label "
                 "recorded: commit; else abort). Dry run unless --resolve.")
    doubt.set_defaults(func=commands.in_doubt)
    _store(doubt)
    doubt.add_argument("--fe", required=True, type=non_empty, metavar="URL", help="Doris FE URL (http://host:8030)")
    doubt.add_argument("--db", required=True, type=non_empty)
    doubt.add_argument("--table", required=True, type=non_empty)
    doubt.add_argument("--user", default="root", type=non_empty)
    doubt.add_argument("--password-env", metavar="VAR", type=non_empty,
                       help="environment variable holding the Doris password")
    doubt.add_argument("--label-app-id", metavar="S", type=non_empty,
                       help="the DorisSink's label_app_id, if it set one")
    doubt.add_argument("--strict-labels", action="store_true", help="the DorisSink has strict_labels=True")
    doubt.add_argument("--namespace", default="__doris__", type=non_empty, metavar="NS",
                       help="the DorisSink's namespace (default __doris__)")
    doubt.add_argument("--resolve", action="store_true", help="commit/abort them as the store decided")
    doubt.add_argument("--force", action="store_true", help="resolve even though a driver's heartbeat is fresh")

    _add_delta(sub)

    chart = _sub(sub, "chart", "plot a progress JSON-lines file (needs matplotlib)",
                 "Throughput, lag and durations per batch from stream.progress_to(path) output.")
    chart.set_defaults(func=commands.chart)
    chart.add_argument("progress", metavar="PROGRESS.jsonl")
    chart.add_argument("-o", "--output", required=True, metavar="OUT.png", type=non_empty)
    chart.add_argument("--dpi", type=int_at_least(30), default=100)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def _add_delta(sub: Any) -> None:
    delta = _sub(sub, "delta", "the exactly-once Delta sink's last batch and unreferenced files of a table",
                 "What a Delta table's log says about the exactly-once Delta sink (needs deltalake).")
    dsub = delta.add_subparsers(dest="delta_cmd", required=True, metavar="ACTION", parser_class=type(delta))
    status = _sub(dsub, "status", "the last batch the sink committed, with its input positions",
                  "The newest commit of the sink: application transaction, batch id, rows, input positions.")
    status.set_defaults(func=commands.delta_status)
    orphans = _sub(dsub, "orphans", "data files no commit names (dry run unless --apply)",
                   "Data files under the table root that no add or remove action of the log names: files of batch "
                   "attempts that crashed before their table commit. Dry run by default; --apply deletes them. "
                   "A running batch's files are unreferenced until its commit: keep --min-age above the longest "
                   "batch, or run it while the application is stopped.")
    orphans.set_defaults(func=commands.delta_orphans)
    orphans.add_argument("--min-age", type=_seconds, default=3600.0, metavar="SECONDS",
                         help="only files at least this old (default 3600)")
    orphans.add_argument("--apply", action="store_true", help="delete them (default: dry run)")
    status.add_argument("--app-id", type=non_empty, metavar="ID",
                        help="the sink's application transaction id (default: the newest commit of any)")
    status.add_argument("--scan", type=int_at_least(1), default=1000, metavar="N",
                        help="look at the newest N commits (default 1000)")
    for p in (status, orphans):
        p.add_argument("--table", required=True, type=non_empty, metavar="URI", help="the Delta table's path or URI")
        p.add_argument("--json", action="store_true", help="machine-readable JSON output")
