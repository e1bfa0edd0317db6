"""``dstream-eo``: the command line (``dstream-eo demo`` is what ``make demo`` runs).

Commands: ``offsets show|reset|export``, ``batches [skip]``, ``lag``, ``in-doubt``, ``chart``, ``demo`` (modules
``_cli_offsets``, ``_cli_reset``, ``_cli_batches`` with ``_cli_labels``, ``_cli_chart``, ``demo``;
``docs/operations.md``). A command refused for its input writes nothing: a missing SQLite file or an
unknown app is reported (with the apps the store holds), never created.
Parsing imports neither Spark nor Kafka clients, so ``dstream-eo --help`` and ``--version`` work
where pyspark is not installed. Exit status: 0 success (dry runs too), 1 the command failed (one
line on stderr, no traceback), 2 a usage error, 3 refused because a driver is live, 130 interrupted.
No command prints a password: store URLs are shown redacted.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._cli_args import parse
from ._cli_common import CliError
from .errors import DStreamExactlyOnceError
from .redaction import redact as redact_text


def _run(args: argparse.Namespace) -> int:
    if args.cmd == "demo":
        from .demo import run_demo

        return run_demo(args)
    if args.cmd == "chart":
        from ._cli_chart import run_chart

        return run_chart(args)
    if args.cmd == "lag":
        from ._cli_batches import run_lag

        return run_lag(args, args.store)
    if args.cmd == "batches":
        from ._cli_batches import check_batches_args, run_skip

        if getattr(args, "batches_cmd", None) == "skip":
            return run_skip(args)
        check_batches_args(args)
    from ._cli_common import open_cli_store

    with open_cli_store(args.store, args.app) as store:
        if args.cmd == "offsets" and args.offsets_cmd == "show":
            from ._cli_offsets import show

            return show(args, store)
        if args.cmd == "offsets" and args.offsets_cmd == "export":
            from .operators.export import export_offsets

            print(export_offsets(store, args.format))
            return 0
        if args.cmd == "offsets":
            from ._cli_reset import run_reset

            return run_reset(args, store)
        from ._cli_batches import run_batches, run_in_doubt

        return run_batches(args, store) if args.cmd == "batches" else run_in_doubt(args, store)


def main(argv: Optional[List[str]] = None, prog: str = "dstream-eo") -> int:
    """Run ``dstream-eo`` with ``argv`` (``sys.argv[1:]`` when None); return the exit status."""
    args = parse(prog, argv)
    try:
        return _run(args)
    except CliError as exc:
        sys.stderr.write(f"{prog}: error: {redact_text(str(exc))}\n")
        return exc.code
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return 130
    except (DStreamExactlyOnceError, OSError, ImportError) as exc:
        sys.stderr.write(f"{prog}: error: {type(exc).__name__}: {redact_text(str(exc))}\n")
        return 1
    except Exception as exc:  # noqa: BLE001 - a client library's error: one line, never a traceback
        where = type(exc).__module__.split(".")[0]
        sys.stderr.write(f"{prog}: error: {where}.{type(exc).__name__}: {redact_text(str(exc))}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
