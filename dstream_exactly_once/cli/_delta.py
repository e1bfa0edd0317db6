"""``dstream-eo delta``: what a Delta table's log says about the exactly-once Delta sink.

``status`` prints the last batch the sink committed (its application transaction, batch id, rows
and input positions, from the commit's custom metadata); ``orphans`` lists the data files no
commit names — files of batch attempts that crashed before their table commit — and with
``--apply`` deletes them. Both only read the table unless ``--apply`` is given.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from ..errors import CliError, ConfigurationError
from ._exit_codes import EXIT_OK, EXIT_USAGE
from ._output import emit_json, fmt_time, print_table

__all__ = ["run_delta_orphans", "run_delta_status"]


def _require_delta() -> None:
    try:
        import deltalake  # noqa: F401
    except ImportError as exc:
        raise CliError("dstream-eo delta needs the deltalake package: pip install 'dstream-exactly-once[delta]'",
                       EXIT_USAGE) from exc


def run_delta_status(args: argparse.Namespace) -> int:
    """Print the last batch the sink committed to ``--table`` (of ``--app-id`` if given)."""
    _require_delta()
    from ..sinks.delta._log import last_committed_batch

    try:
        last = last_committed_batch(args.table, args.app_id, scan=args.scan)
    except ConfigurationError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    if args.json:
        emit_json({"table": args.table, "last_batch": last})
        return EXIT_OK
    out = sys.stdout
    who = f" of application transaction {args.app_id!r}" if args.app_id else ""
    if last is None:
        out.write(f"{args.table}: no batch{who} committed by the exactly-once sink in the last {args.scan} commits\n")
        return EXIT_OK
    ts = last.get("timestamp")
    out.write(f"{args.table}: last batch {last['batch_id']} of application transaction {last['app_id']!r} "
              f"(table version {last['version']}, {fmt_time(ts / 1000 if ts else None)}, {last['rows']} rows; "
              f"the table's transaction version: {last.get('transaction_version')})\n")
    print_table(last.get("positions") or [], ["partition", "start", "end"], out)
    return EXIT_OK


def run_delta_orphans(args: argparse.Namespace) -> int:
    """List (and with ``--apply``, delete) the table's unreferenced data files older than ``--min-age``."""
    _require_delta()
    from ..sinks.delta._log import remove_files, unreferenced_files

    try:
        files = unreferenced_files(args.table, min_age_s=args.min_age)
    except ConfigurationError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    removed: List[str] = remove_files(args.table, files) if args.apply else []
    rows: List[Dict[str, Any]] = [{"path": f.path, "bytes": f.size, "age_s": int(f.age_s),
                                   "removed": f.path in removed} for f in files]
    if args.json:
        emit_json({"table": args.table, "min_age_s": args.min_age, "unreferenced": rows, "applied": args.apply})
        return EXIT_OK
    out = sys.stdout
    out.write(f"{args.table}: {len(files)} unreferenced data file(s) older than {args.min_age:g} s "
              f"({sum(f.size for f in files)} bytes)\n")
    print_table(rows, ["path", "bytes", "age_s"] + (["removed"] if args.apply else []), out)
    if files and not args.apply:
        out.write("dry run: add --apply to delete them\n")
    return EXIT_OK
