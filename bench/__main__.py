"""``python3 -m bench [--only B1,B3] [--records N] [--quick]`` — see ``bench/cli.py``."""

import sys

from .cli import main

sys.exit(main())
