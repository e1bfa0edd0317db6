"""``python3 -m bench.files [FLAGS]`` = ``python3 -m bench --only B6 [FLAGS]``: the file source benchmark alone.

B6 lives in ``bench/file_read.py`` (timing, ratios, targets) and ``bench/file_cases.py`` (the
files and the four ways to read them); its rows, targets, notes and chart go into the harness's
report like every other benchmark's. ``--mb N`` is accepted for ``--file-mb N`` (MiB per file).
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence


def harness_argv(argv: Sequence[str]) -> List[str]:
    """The ``python3 -m bench`` arguments that run B6 alone with ``argv``'s flags."""
    out = ["--only", "B6"]
    for arg in argv:
        out.append("--file-mb" if arg == "--mb" else "--file-mb=" + arg[5:] if arg.startswith("--mb=") else arg)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .cli import main as bench_main

    return bench_main(harness_argv(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
