"""Deterministic Doris load labels: ``(application id, batch id, partition id) → label``.

Doris accepts each label once per database, so a label that names a fixed piece of data makes a
re-sent load a no-op. The label is built only from stable inputs — the application / checkpoint
id, the batch id and the Spark partition id — never from attempt ids, wall-clock time or random
values, so a replayed batch produces the same labels as the attempt that crashed.

Two modes; both keep a label that fits in Doris's 128 characters exactly as the original design
built it (labels already in users' tables stay valid), and both give distinct application ids
distinct labels whenever something has to be cut:

``strict=False`` (default) — the original design's rule, kept byte for byte for labels that fit:
    the application id has ``-``, ``|``, ``/``, ``:`` and ``.`` replaced by ``_``; then
    ``_{batch_id}_{partition_id}`` is appended and runs of ``_`` collapse to one
    (``label___test`` → ``label_test``). Any other character Doris refuses (a space, ``=``,
    non-ASCII…) raises :class:`~dstream_exactly_once.errors.ConfigurationError`:
    such an application id needs ``strict=True`` (whatever its length). A label longer than 128
    characters is shortened the strict way (below), so it equals the strict label.

``strict=True`` — always a valid Doris label (``[-_A-Za-z0-9:]{1,128}``):
    the label equals the default one whenever the default one is valid and fits, so an
    application can switch modes without changing its labels. Otherwise characters outside the
    alphabet become ``_`` and the label becomes ``{readable tail of the app id}_{digest}_{batch}_
    {partition}``, where ``digest`` is the first 32 hex digits of SHA-256 over the UTF-8 application
    id — stable across calls, processes, Python versions and ``PYTHONHASHSEED`` values, and
    different for different application ids (the pattern of apache/doris-flink-connector PR #659).

The original design kept the *last* 128 characters of a long label, so two application ids that
differed only in their beginning shared labels and a label-idempotent sink skipped the second
one's loads. Upgrade note: a default-mode label longer than 128 characters
is now different from the one earlier versions used (and a long default-mode id with refused
characters in its cut-off part now raises instead of passing); let pending batches commit with
the old version before upgrading such an application. What is not
cut is not hashed: application ids that differ only in the design's replaced characters or in
runs of ``_`` (``a.b`` / ``a-b``, ``a_b`` / ``a__b``) still share labels, as they always did;
use ids that differ in letters or digits.

Doris forgets a Stream Load label about 12 hours after the load finished
(``streaming_label_keep_max_second``), so labels are a second line of defence; the offset store
is the first (see :mod:`dstream_exactly_once.sinks.doris`).
"""

from __future__ import annotations

import hashlib
import re

from .._checks import is_int
from ..errors import ConfigurationError

__all__ = ["MAX_LABEL_LENGTH", "LabelGenerator", "make_label"]

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
    if not is_int(value) or value < 0:
        raise ConfigurationError(f"label {name} must be an int >= 0, got {value!r}")
    return value


def _collapse(text: str) -> str:
    return _UNDERSCORE_RUNS.sub("_", text)


def _default_label(app_id: str, batch_id: int, partition_id: int) -> str:
    """The design's label, before any length check."""
    return _collapse(_DESIGN_REPLACED.sub("_", app_id) + f"_{batch_id}_{partition_id}")


def _digest_label(app_id: str, batch_id: int, partition_id: int) -> str:
    """``{readable tail}_{sha256(app_id)[:32]}_{batch}_{partition}``: valid, at most 128 characters.

    The digest covers the whole application id, so ids that differ anywhere (also in what the
    readable tail leaves out) get different labels.
    """
    digest = hashlib.sha256(app_id.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX_CHARS]
    suffix = f"_{digest}_{batch_id}_{partition_id}"
    if len(suffix) >= MAX_LABEL_LENGTH:  # absurdly large ids: hash everything
        whole = f"{app_id}\x00{batch_id}\x00{partition_id}".encode("utf-8", "surrogatepass")
        return "h_" + hashlib.sha256(whole).hexdigest()
    readable = _collapse(_OUTSIDE_ALPHABET.sub("_", _DESIGN_REPLACED.sub("_", app_id))).strip("_")
    head = readable[-(MAX_LABEL_LENGTH - len(suffix)):].lstrip("_")
    return (head + suffix) if head else suffix[1:]


def _build(app_id: str, batch_id: int, partition_id: int, strict: bool) -> str:
    """The label; raises in default mode when the app id has characters Doris refuses."""
    full = _default_label(app_id, batch_id, partition_id)
    bad = sorted(set(_OUTSIDE_ALPHABET.findall(full)))
    if bad and not strict:  # whatever the length: the same ids fail at every batch id
        raise ConfigurationError(
            f"Doris label built from app id {app_id!r} contains characters Doris refuses: "
            f"{''.join(bad)!r} (allowed: [-_A-Za-z0-9:]); use strict=True to replace them"
        )
    if bad or len(full) > MAX_LABEL_LENGTH:
        label = _digest_label(app_id, batch_id, partition_id)
    else:
        label = full  # the design's label, unchanged in both modes
    if not label or len(label) > MAX_LABEL_LENGTH or _OUTSIDE_ALPHABET.search(label):
        raise ConfigurationError(f"cannot make a valid Doris label from app id {app_id!r}")  # a guard
    return label


def make_label(app_id: str, batch_id: int, partition_id: int, *, strict: bool = False) -> str:
    """The Doris label of one partition of one batch of one application.

    ``app_id`` is the application / checkpoint id (unique per Doris database), ``batch_id`` the
    batch id from the offset log and ``partition_id`` the Spark partition id, both ``int >= 0``.
    Bad inputs, and a label that cannot be made valid, raise
    :class:`~dstream_exactly_once.errors.ConfigurationError`. The same inputs give the same
    label in every process and Python version; different application ids give different labels
    whenever the label had to be shortened (see the module docstring).
    """
    return _build(_check_app_id(app_id), _check_id("batch id", batch_id),
                  _check_id("partition id", partition_id), strict)


class LabelGenerator:
    """Labels of one application: ``generator(batch_id, partition_id) -> label``.

    Validates the application id once, up front (a default-mode id with characters Doris refuses
    raises here, before any batch runs), and pickles to executors as its two settings.
    """

    def __init__(self, app_id: str, *, strict: bool = False) -> None:
        self.app_id = _check_app_id(app_id)
        self.strict = bool(strict)
        _build(self.app_id, 0, 0, self.strict)  # fail fast on an unusable app id

    def label(self, batch_id: int, partition_id: int) -> str:
        """The label of ``partition_id`` of batch ``batch_id`` (see :func:`make_label`)."""
        return _build(self.app_id, _check_id("batch id", batch_id), _check_id("partition id", partition_id),
                      self.strict)

    __call__ = label

    def __repr__(self) -> str:
        return f"LabelGenerator({self.app_id!r}, strict={self.strict})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelGenerator):
            return NotImplemented
        return (self.app_id, self.strict) == (other.app_id, other.strict)

    def __hash__(self) -> int:
        return hash((self.app_id, self.strict))
