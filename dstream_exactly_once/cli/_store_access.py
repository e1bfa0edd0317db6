"""Opening an app's store for a command, and reading its offset log without tripping on damage."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from ..errors import CliError, DStreamExactlyOnceError

if TYPE_CHECKING:
    from ..stores._base import TransactionalStore
    from ..stores._interfaces import BatchLog

__all__ = ["open_cli_store", "ranges_text", "read_batch"]


def open_cli_store(url: str, app_id: Optional[str]) -> TransactionalStore:
    """The store of ``app_id`` (read-only until a command applies a change), after checking that it
    exists: a missing SQLite file is refused (never created), and so is an app with no state there
    (the error lists the apps that have). ``app_id`` None: any app (for :meth:`list_apps`)."""
    from .._redaction import redact_url
    from ..stores import open_store
    from ..stores._url import url_scheme
    from ..stores.sql._sqlite import SQLiteStore

    if isinstance(url, str) and url_scheme(url) == "sqlite":  # before opening: reading a missing path is refused
        path = SQLiteStore(url, app_id or "_").path  # constructing reads nothing
        if not os.path.exists(path):
            raise CliError(f"no store at {redact_url(url)}: the SQLite file {path!r} does not exist")
    store = open_store(url, app_id or "_")
    try:
        if app_id is not None:
            apps = store.list_apps()
            if app_id not in apps:
                raise CliError(f"app {app_id!r} not found in {redact_url(url)}; apps there: "
                               f"{', '.join(apps) if apps else '(none)'}")
    except BaseException:
        store.close()
        raise
    return store


def read_batch(store: BatchLog, batch_id: int) -> Tuple[Any, Optional[str]]:
    """``(offset-log entry or None, None)``, or ``(None, why)`` when the stored entry is damaged (torn
    JSON, wrong types, a range no reader accepts): read commands list the others and say so."""
    from ..errors import StoreUnavailableError

    try:
        return store.get_batch(batch_id), None
    except StoreUnavailableError:
        raise
    except (DStreamExactlyOnceError, ValueError, TypeError, KeyError, IndexError) as exc:
        return None, f"damaged offset-log entry of batch {batch_id}: {type(exc).__name__}: {exc}"


def ranges_text(ranges: List[Any]) -> str:
    """The ranges of a batch, each as :meth:`describe` writes it, comma-separated."""
    return ", ".join(r.describe() for r in ranges)
