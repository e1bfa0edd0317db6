"""``dstream-eo``: the command line.

Commands: ``offsets show|reset`` (:mod:`._offsets`, :mod:`._reset`), ``batches [skip]``, ``lag`` and
``in-doubt`` (:mod:`._batches` with :mod:`._labels`), ``delta status|orphans`` (:mod:`._delta`), ``retire``
(:mod:`._retire`), ``chart`` (:mod:`._chart`) and ``demo`` (:mod:`..teaching`); :mod:`._parser` and
:mod:`._operator_parsers` build the parsers, and each command's ``func`` (:mod:`._commands`) is what
runs (the operations guide explains them). A command refused for its input writes nothing: a
missing SQLite file or an unknown app is reported (with the apps the store holds), never created.
Parsing imports neither Spark nor Kafka clients, so ``dstream-eo --help`` and ``--version`` work
where pyspark is not installed. Exit status: 0 success (dry runs too), 1 the command failed (one
line on stderr, no traceback), 2 a usage error, 3 refused because a driver is live, 130 interrupted.
No command prints a password: store URLs are shown redacted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, List, Optional

from .._redaction import redact as redact_text
from ..errors import CliError, DStreamExactlyOnceError
from ._exit_codes import EXIT_FAILED, EXIT_INTERRUPTED
from ._parser import parse


def main(argv: Optional[List[str]] = None, prog: str = "dstream-eo") -> int:
    """Run ``dstream-eo`` with ``argv`` (``sys.argv[1:]`` when None); return the exit status."""
    args = parse(prog, argv)
    command: Callable[[argparse.Namespace], int] = args.func  # bound by the parser (set_defaults)
    try:
        return command(args)
    except CliError as exc:
        sys.stderr.write(f"{prog}: error: {redact_text(str(exc))}\n")
        return exc.code
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return EXIT_INTERRUPTED
    except (DStreamExactlyOnceError, OSError, ImportError) as exc:
        sys.stderr.write(f"{prog}: error: {type(exc).__name__}: {redact_text(str(exc))}\n")
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - a client library's error: one line, never a traceback
        where = type(exc).__module__.split(".")[0]
        sys.stderr.write(f"{prog}: error: {where}.{type(exc).__name__}: {redact_text(str(exc))}\n")
        return EXIT_FAILED
