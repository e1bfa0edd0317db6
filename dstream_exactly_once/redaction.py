"""Deprecated path: this module moved to a private one; import redact_url from dstream_exactly_once.stores.

It still imports, re-exporting MASK, SECRET_OPTIONS, SecretFilter, redact, redact_exception_chain, redact_url,
register_secret, registered_secrets, with a :class:`DeprecationWarning`; it will be removed in a later
release.
"""

from __future__ import annotations

import warnings

from ._redaction import (  # noqa: F401 - re-exported
    MASK,
    SECRET_OPTIONS,
    SecretFilter,
    redact,
    redact_exception_chain,
    redact_url,
    register_secret,
    registered_secrets,
)

__all__ = [
    "MASK",
    "SECRET_OPTIONS",
    "SecretFilter",
    "redact",
    "redact_exception_chain",
    "redact_url",
    "register_secret",
    "registered_secrets",
]

warnings.warn("dstream_exactly_once.redaction is deprecated: import redact_url from "
              "dstream_exactly_once.stores",
              DeprecationWarning, stacklevel=2)
