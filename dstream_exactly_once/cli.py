"""``dstream-eo``: the command line (``dstream-eo demo`` is what ``make demo`` runs)."""

from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from .demo import main as demo_main

    return demo_main(argv)


if __name__ == "__main__":
    sys.exit(main())
