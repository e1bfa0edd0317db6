"""The one rule for application ids, shared by every store.

An ``app_id`` scopes every key and row a store writes (SQL ``app`` column, Redis hash tag
``{deo:<app_id>}``) and is reused in labels, Kafka transactional ids and group ids. So it must be
safe in all of them: **1 to 200 characters, each an ASCII letter, digit, ``.``, ``_``, ``:`` or
``-``** (``^[A-Za-z0-9._:-]{1,200}$``). That accepts the usual names (``wordcount``,
``orders-v2``, ``app_3f2a…`` uuid-suffixed names, ``team.job:prod``) and refuses what would break
a backend: ``{``/``}`` (Redis Cluster hash tags), ``/`` and ``*`` (key patterns and paths),
whitespace, control characters and non-ASCII text (whose length and comparison differ between
stores).
"""

from __future__ import annotations

import re

from ..errors import ConfigurationError

__all__ = ["APP_ID_PATTERN", "check_app_id"]

#: The allowed application ids, as a regular expression matched against the whole id.
APP_ID_PATTERN = r"[A-Za-z0-9._:-]{1,200}"
_APP_ID = re.compile(APP_ID_PATTERN)


def check_app_id(app_id: object) -> str:
    """``app_id`` if it follows the rule; otherwise :class:`ConfigurationError` naming it and the rule."""
    if not isinstance(app_id, str) or _APP_ID.fullmatch(app_id) is None:
        shown = app_id if not isinstance(app_id, str) or len(app_id) <= 240 else app_id[:240] + "…"
        raise ConfigurationError(
            f"app_id must be 1 to 200 characters of A-Z a-z 0-9 . _ : - (pattern {APP_ID_PATTERN}), "
            f"got {shown!r}" + (f" ({len(app_id)} characters)" if isinstance(app_id, str) else ""))
    return app_id
