"""The sources' ``starting.positions.store`` / ``starting.positions.app`` options, checked alike for
every source (``deo-kafka``, ``aof``): both or neither, a store URL ``open_store`` takes, a valid
application id. Nothing is opened or written here."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ..errors import ConfigurationError

__all__ = ["POSITIONS_APP", "POSITIONS_STORE", "check_starting_positions"]

POSITIONS_STORE = "starting.positions.store"
POSITIONS_APP = "starting.positions.app"


def check_starting_positions(store: Any, app: Any, source: str) -> Tuple[Optional[str], Optional[str]]:
    """``(store, app)`` of a source's options (``(None, None)`` when neither is given), checked;
    ``source`` names the source in the error (e.g. ``"deo-kafka source"``)."""
    from .._redaction import redact_url
    from ..stores import check_store_url, store_schemes
    from ..stores._app_id import check_app_id
    from ..stores._url import url_scheme

    if store is None and app is None:
        return None, None
    if store is None or app is None:
        given, missing = (POSITIONS_STORE, POSITIONS_APP) if app is None else (POSITIONS_APP, POSITIONS_STORE)
        shown = redact_url(store) if isinstance(store, str) else app
        raise ConfigurationError(f"{source} option {given!r} ({shown!r}) needs {missing!r} too, which is missing: "
                                 f"the store URL and the application id (the deo-store sink's 'store' and "
                                 f"'app_id') go together")
    if not isinstance(store, str) or url_scheme(store) not in store_schemes():
        shown = redact_url(store) if isinstance(store, str) else store
        raise ConfigurationError(f"{source} option {POSITIONS_STORE!r} must be a store URL "
                                 f"({', '.join(store_schemes())}://…), got {shown!r}")
    try:
        check_app_id(app)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{source} option {POSITIONS_APP!r}: {exc}") from None
    check_store_url(store, str(app))
    return store, str(app)
