"""``dstream-eo``: the command line (``dstream-eo demo`` is what ``make demo`` runs).

Parsing imports neither Spark nor Kafka clients, so ``dstream-eo --help`` and ``--version`` work
where pyspark is not installed. Exit status: 0 success, 1 the command failed (one line on stderr,
no traceback), 2 a usage error, 130 interrupted.
"""

from __future__ import annotations

import sys
from typing import List, Optional

from ._cli_args import parse
from .errors import DStreamExactlyOnceError


def main(argv: Optional[List[str]] = None, prog: str = "dstream-eo") -> int:
    """Run ``dstream-eo`` with ``argv`` (``sys.argv[1:]`` when None); return the exit status."""
    args = parse(prog, argv)
    try:
        from .demo import run_demo

        return run_demo(args)
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return 130
    except (DStreamExactlyOnceError, OSError, ImportError) as exc:
        sys.stderr.write(f"{prog}: error: {type(exc).__name__}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
