"""Store URLs' query options (``sqlite:///state.db?timeout=10``): what each backend reads itself."""

from __future__ import annotations

from typing import Tuple

from ..core._options import Option
from . import EntryPoint

_TIMEOUT = "a positive number of seconds"

ENTRY_POINTS: Tuple[EntryPoint, ...] = (
    EntryPoint("sqlite:// URL", "query", "query options of a SQLite store URL", (
        Option("timeout", "float", 30.0, f"how long a write waits for the file's lock ({_TIMEOUT})", low=0),
        Option("create_dirs", "bool", False, "let the first write create the file's missing directories "
               "(otherwise a path in a missing directory is refused)"),
    )),
    EntryPoint("postgresql:// URL", "query", "query options of a PostgreSQL store URL (every other libpq "
               "connection parameter is passed to libpq, which checks it)", (
        Option("connect_timeout", "float", 5.0, f"connection timeout ({_TIMEOUT}; at least 2 is used)", low=0),
        Option("password", "str", None, "the password (better in the URL's user part)", secret=True),
    )),
    EntryPoint("redis:// URL", "query", "query options of a Redis or Redis Cluster store URL (redis://, rediss://, "
               "redis+cluster://, rediss+cluster://)", (
        Option("connect_timeout", "float", 5.0, f"connection timeout ({_TIMEOUT})", low=0),
        Option("timeout", "float", 30.0, f"socket timeout of each command ({_TIMEOUT})", low=0),
        Option("ssl_ca_certs", "str", None, "CA file for rediss:// only (a readable file)"),
        Option("ssl_cert_reqs", "enum", "required", "whether the server's certificate is checked (rediss:// only)",
               allowed=("none", "optional", "required")),
        Option("wait_replicas", "int", 0, "after each write, WAIT for this many replicas", low=0),
        Option("wait_timeout", "int", 1000, "how long WAIT waits, in ms", low=1),
    )),
)
