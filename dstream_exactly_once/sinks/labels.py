"""Deterministic Doris load labels: ``(application id, batch id, partition id) → label``.

Doris accepts each label once per database, so a label that names a fixed piece of data makes a
re-sent load a no-op. The label is built only from stable inputs — the application / checkpoint
id, the batch id and the Spark partition id — never from attempt ids, wall-clock time or random
values, so a replayed batch produces the same labels as the attempt that crashed.

Two modes:

``strict=False`` (default) — the original design's rule, kept byte for byte:
    the application id has ``-``, ``|``, ``/``, ``:`` and ``.`` replaced by ``_``; then
    ``_{batch_id}_{partition_id}`` is appended, runs of ``_`` collapse to one (``label___test``
    → ``label_test``) and a label longer than 128 characters keeps its **last** 128 characters
    (with a warning). Any other character Doris refuses (a space, ``=``, non-ASCII…) raises
    :class:`~dstream_exactly_once.errors.ConfigurationError`: such an application id needs
    ``strict=True``. Truncation can make two long application ids share labels — which would make
    Doris silently drop one application's loads — hence the warning.

``strict=True`` — always a valid Doris label (``[-_A-Za-z0-9:]{1,128}``):
    the label equals the default one whenever the default one is valid and short enough, so an
    application can switch modes without changing its labels. Otherwise characters outside the
    alphabet become ``_`` and the label becomes ``{readable tail of the app id}_{digest}_{batch}_
    {partition}``, where ``digest`` is the first 32 hex digits of SHA-256 over the UTF-8 application
    id — stable across calls, processes and ``PYTHONHASHSEED`` values, and different for different
    application ids (the pattern of apache/doris-flink-connector PR #659).

Doris forgets a Stream Load label about 12 hours after the load finished
(``streaming_label_keep_max_second``), so labels are a second line of defence; the offset store
is the first (see :mod:`dstream_exactly_once.sinks.doris`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import warnings

from ..errors import ConfigurationError

__all__ = ["MAX_LABEL_LENGTH", "LabelGenerator", "make_label"]

logger = logging.getLogger(__name__)

#: Doris's ``label_regex_length`` default: the longest label a load may carry.
MAX_LABEL_LENGTH = 128

_DESIGN_REPLACED = re.compile(r"[-|/:.]")  # the original design's ``replaceAll("[-|/|:|.]", "_")``
_OUTSIDE_ALPHABET = re.compile(r"[^-_A-Za-z0-9:]")  # Doris FeNameFormat LABEL_REGEX, inverted
_UNDERSCORE_RUNS = re.compile(r"_{2,}")
_DIGEST_HEX_CHARS = 32


def _check_app_id(app_id: object) -> str:
    if not isinstance(app_id, str) or not app_id:
        raise ConfigurationError(f"label app id must be a non-empty str, got {app_id!r}")
    return app_id


def _check_id(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"label {name} must be an int >= 0, got {value!r}")
    return value


def _collapse(text: str) -> str:
    return _UNDERSCORE_RUNS.sub("_", text)


def _truncation_message(app_id: str, full: str, label: str) -> str:
    return (
        f"Doris label for app id {app_id!r} is {len(full)} characters, more than {MAX_LABEL_LENGTH}; "
        f"keeping its last {MAX_LABEL_LENGTH} ({label!r}). Application ids that differ only in their "
        "beginning now share labels; use strict=True for hash-based labels that keep them apart."
    )


def _default_label(app_id: str, batch_id: int, partition_id: int) -> tuple[str, str]:
    """The design's label and the untruncated form it came from."""
    full = _collapse(_DESIGN_REPLACED.sub("_", app_id) + f"_{batch_id}_{partition_id}")
    return full[-MAX_LABEL_LENGTH:], full


def _strict_label(app_id: str, batch_id: int, partition_id: int) -> str:
    label, full = _default_label(app_id, batch_id, partition_id)
    if len(full) <= MAX_LABEL_LENGTH and not _OUTSIDE_ALPHABET.search(full):
        return full  # identical to the default mode whenever that one is valid
    digest = hashlib.sha256(app_id.encode("utf-8")).hexdigest()[:_DIGEST_HEX_CHARS]
    suffix = f"_{digest}_{batch_id}_{partition_id}"
    if len(suffix) >= MAX_LABEL_LENGTH:  # absurdly large ids: hash everything
        whole = f"{app_id}\x00{batch_id}\x00{partition_id}".encode()
        return "h_" + hashlib.sha256(whole).hexdigest()
    readable = _collapse(_OUTSIDE_ALPHABET.sub("_", _DESIGN_REPLACED.sub("_", app_id))).strip("_")
    head = readable[-(MAX_LABEL_LENGTH - len(suffix)):].lstrip("_")
    return (head + suffix) if head else suffix[1:]


def _build(app_id: str, batch_id: int, partition_id: int, strict: bool) -> tuple[str, str | None]:
    """``(label, truncation warning or None)``; raises when the label cannot be made valid."""
    if strict:
        label = _strict_label(app_id, batch_id, partition_id)
        note = None
    else:
        label, full = _default_label(app_id, batch_id, partition_id)
        note = _truncation_message(app_id, full, label) if len(full) > MAX_LABEL_LENGTH else None
        bad = sorted(set(_OUTSIDE_ALPHABET.findall(label)))
        if bad:
            raise ConfigurationError(
                f"Doris label {label!r} built from app id {app_id!r} contains characters Doris "
                f"refuses: {''.join(bad)!r} (allowed: [-_A-Za-z0-9:]); use strict=True to replace them"
            )
    if not label or len(label) > MAX_LABEL_LENGTH:  # cannot happen; a guard, not a code path
        raise ConfigurationError(f"cannot make a valid Doris label from app id {app_id!r}")
    return label, note


def _warn(note: str) -> None:
    logger.warning("%s", note)
    warnings.warn(note, UserWarning, stacklevel=3)


def make_label(app_id: str, batch_id: int, partition_id: int, *, strict: bool = False) -> str:
    """The Doris label of one partition of one batch of one application.

    ``app_id`` is the application / checkpoint id (unique per Doris database), ``batch_id`` the
    batch id from the offset log and ``partition_id`` the Spark partition id, both ``int >= 0``.
    Bad inputs, and a label that cannot be made valid, raise
    :class:`~dstream_exactly_once.errors.ConfigurationError`. A truncated default-mode label
    warns (``UserWarning`` and a log record) on every call.
    """
    label, note = _build(_check_app_id(app_id), _check_id("batch id", batch_id),
                         _check_id("partition id", partition_id), strict)
    if note:
        _warn(note)
    return label


class LabelGenerator:
    """Labels of one application: ``generator(batch_id, partition_id) -> label``.

    Validates the application id once, up front (a default-mode id with characters Doris refuses
    raises here, before any batch runs), warns about truncation once per generator, and pickles
    to executors as its two settings.
    """

    def __init__(self, app_id: str, *, strict: bool = False) -> None:
        self.app_id = _check_app_id(app_id)
        self.strict = bool(strict)
        self._warned = False
        _build(self.app_id, 0, 0, self.strict)  # fail fast on an unusable app id

    def label(self, batch_id: int, partition_id: int) -> str:
        """The label of ``partition_id`` of batch ``batch_id`` (see :func:`make_label`)."""
        label, note = _build(self.app_id, _check_id("batch id", batch_id),
                             _check_id("partition id", partition_id), self.strict)
        if note and not self._warned:
            self._warned = True
            _warn(note)
        return label

    __call__ = label

    def __repr__(self) -> str:
        return f"LabelGenerator({self.app_id!r}, strict={self.strict})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelGenerator):
            return NotImplemented
        return (self.app_id, self.strict) == (other.app_id, other.strict)

    def __hash__(self) -> int:
        return hash((self.app_id, self.strict))
