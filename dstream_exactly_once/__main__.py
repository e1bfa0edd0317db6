"""``python -m dstream_exactly_once``: the ``dstream-eo`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m dstream_exactly_once"))
