"""``python -m dstream_exactly_once.cli``: the ``dstream-eo`` command."""

import sys

from ._main import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m dstream_exactly_once.cli"))
