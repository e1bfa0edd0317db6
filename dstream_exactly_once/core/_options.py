"""Typed options from Spark conf strings or Python values: one declarative table per reader.

An :class:`Option` names its key, its kind (``int``, ``bool``, ``float``, ``duration``, ``enum``,
``str``; for Python arguments also ``url``, ``list``, ``mapping``, ``callable`` and ``object``), its
default (:data:`REQUIRED` when it has none), its old spellings (``aliases``), whether it holds a
secret, its bounds or allowed values and one doc line. :meth:`Option.parse` turns
a Python value or a conf string into the typed value; :meth:`Option.read` takes it from a Spark
conf (a ``SparkConf`` or any mapping with ``get``), the default when the key is unset. Every bad
value is refused with one :class:`~dstream_exactly_once.errors.ConfigurationError` shape,
``<label> must be <what is allowed>, got <value>``; an unknown key is refused by
:func:`check_known` with every known option listed. Spark-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Tuple

from .._checks import is_int, is_number
from ..errors import ConfigurationError

__all__ = ["KINDS", "REQUIRED", "Option",
           "check_known", "parse_bool", "parse_duration", "parse_float", "parse_int", "table",
           "unknown_option"]

#: the kinds an :class:`Option` may have
KINDS = ("int", "bool", "float", "duration", "enum", "str", "url", "list", "mapping", "callable", "object")


class _Required:
    """The default of an option that has none: the caller must give it."""

    def __repr__(self) -> str:
        return "required"


#: the ``default`` of a required option
REQUIRED: Any = _Required()

_INT_TEXT = re.compile(r"\s*[-+]?\d+\s*")
#: Spark's time-string suffixes, in seconds (``spark.network.timeout=120s``)
_DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_TEXT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|m|h|d)?\s*", re.IGNORECASE)


def _allowed(noun: str, low: Optional[float], high: Optional[float]) -> str:
    """``an integer in [1, 10]``, ``a number >= 0``, …: what a bounded value may be."""
    if low is not None and high is not None:
        return f"{noun} in [{low}, {high}]"
    if low is not None:
        return f"{noun} >= {low}"
    return f"{noun} <= {high}" if high is not None else noun


def _number(label: str, noun: str, out: Optional[float], shown: Any, low: Optional[float],
            high: Optional[float], low_note: str = "") -> None:
    """Refuse ``out`` (``None``: not a number at all) unless it is within ``[low, high]``."""
    if out is None or (low is not None and out < low) or (high is not None and out > high):
        note = low_note if out is not None and low is not None and out < low else ""
        raise ConfigurationError(f"{label} must be {_allowed(noun, low, high)}, got {shown!r}{note}")


def parse_bool(label: str, value: Any) -> bool:
    """``True``/``False`` or the strings ``true``/``false`` (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigurationError(f"{label} must be true or false, got {value!r}")


def parse_int(label: str, value: Any, low: Optional[int] = None, high: Optional[int] = None,
              low_note: str = "") -> int:
    """An int (or its decimal string) in ``[low, high]``; bools and floats are refused, not truncated."""
    out: Optional[int] = None
    if is_int(value):
        out = value
    elif isinstance(value, str) and _INT_TEXT.fullmatch(value):
        out = int(value)
    _number(label, "an integer", out, value, low, high, low_note)
    assert out is not None
    return out


def parse_float(label: str, value: Any, low: Optional[float] = None, high: Optional[float] = None) -> float:
    """A number (or its decimal string) in ``[low, high]``; NaN and bools are refused."""
    out: Optional[float] = None
    if is_number(value):
        out = float(value)
    elif isinstance(value, str):
        try:
            out = float(value)
        except ValueError:
            out = None
    _number(label, "a number", None if out is None or out != out else out, value, low, high)
    assert out is not None
    return out


def parse_duration(label: str, value: Any, default_unit: str = "s") -> float:
    """Seconds from a Spark time string (``500ms``, ``120s``, ``2min``, ``1h``; a bare number is in
    ``default_unit``) or a number of ``default_unit``."""
    if is_number(value) and value >= 0:
        return float(value) * _DURATION_UNITS[default_unit]
    match = _DURATION_TEXT.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigurationError(f"{label} must be a duration such as '500ms', '120s', '2min' or '1h' "
                                 f"(a bare number is in {default_unit}), got {value!r}")
    unit = (match.group(2) or default_unit).lower()
    return float(match.group(1)) * _DURATION_UNITS[unit]


@dataclass(frozen=True)
class Option:
    """One option of a reader's table: how its value is parsed and checked.

    ``low``/``high`` bound ``int``/``float`` values (``low_note`` explains a too-small value);
    ``allowed`` lists an ``enum``'s values (matched without regard to case and surrounding blanks);
    a ``duration`` parses to seconds. ``doc`` is the option's line in the reference. ``aliases``
    are older spellings of ``key`` still accepted; ``secret``: the value is a password (never shown);
    ``nullable``: ``None`` is accepted (the default then applies). ``url``, ``list``, ``mapping``,
    ``callable`` and ``object`` describe Python arguments (a non-empty URL string, a non-empty list
    of non-empty strings, a mapping, a callable, any value the entry point checks itself).
    """

    key: str
    kind: str
    default: Any = None
    doc: str = ""
    low: Optional[float] = None
    high: Optional[float] = None
    allowed: Tuple[str, ...] = ()
    low_note: str = ""
    aliases: Tuple[str, ...] = ()
    secret: bool = False
    nullable: bool = False

    @property
    def required(self) -> bool:
        """Whether the option has no default."""
        return self.default is REQUIRED

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigurationError(f"Option {self.key!r} kind must be one of {list(KINDS)}, got {self.kind!r}")
        if (self.kind == "enum") != bool(self.allowed):
            raise ConfigurationError(f"Option {self.key!r}: allowed values go with kind 'enum' only")

    def parse(self, value: Any, label: Optional[str] = None) -> Any:
        """``value`` (a Python value or a conf string) as this option's type, checked.

        ``label`` names the option in the error (default ``option '<key>'``)."""
        label = label or f"option {self.key!r}"
        if value is None and self.nullable:
            return self.default
        if self.kind in _PYTHON_KINDS:
            return _parse_python(self, label, value)
        if self.kind == "bool":
            return parse_bool(label, value)
        if self.kind == "int":
            return parse_int(label, value, _int_or_none(self.low), _int_or_none(self.high), self.low_note)
        if self.kind == "float":
            return parse_float(label, value, self.low, self.high)
        if self.kind == "duration":
            seconds = parse_duration(label, value)
            _number(label, "a duration in seconds", seconds, value, self.low, self.high)
            return seconds
        if self.kind == "enum":
            folded = value.strip().lower() if isinstance(value, str) else value
            if folded not in self.allowed:
                raise ConfigurationError(f"{label} must be one of {list(self.allowed)}, got {value!r}")
            return folded
        if not isinstance(value, str) or not value:
            shown = "a value (hidden)" if self.secret else repr(value)
            raise ConfigurationError(f"{label} must be a non-empty string, got {shown}")
        return value

    def check(self, value: Any, label: Optional[str] = None) -> None:
        """Refuse ``value`` unless it is already of this option's type and allowed (no conf strings)."""
        label = label or f"option {self.key!r}"
        if self.kind in _PYTHON_KINDS or (value is None and self.nullable):
            self.parse(value, label)
            return
        typed = {"bool": isinstance(value, bool), "int": is_int(value), "float": is_number(value),
                 "duration": is_number(value), "enum": value in self.allowed,
                 "str": isinstance(value, str)}[self.kind]
        if not typed:
            self.parse(value, label)  # its message says what is allowed
            raise ConfigurationError(f"{label} must be a {self.kind}, got {value!r}")
        self.parse(value, label)

    def read(self, conf: Any, label: Optional[str] = None) -> Any:
        """This option's value from Spark conf ``conf`` (``None``: no conf), or its default when unset."""
        raw = conf.get(self.key, None) if conf is not None else None
        if raw is None:
            return self.default
        return self.parse(raw, label or f"Spark conf {self.key!r}")


_PYTHON_KINDS = ("url", "list", "mapping", "callable", "object")


def _parse_python(option: Option, label: str, value: Any) -> Any:
    """A Python argument of kind ``url``/``list``/``mapping``/``callable``/``object``, checked."""
    kind = option.kind
    if kind == "url" and not (isinstance(value, str) and value.strip()):
        raise ConfigurationError(f"{label} must be a non-empty URL string, got {value!r}")
    if kind == "list" and not (isinstance(value, (list, tuple, set, frozenset)) and value
                               and all(isinstance(v, str) and v for v in value)):
        raise ConfigurationError(f"{label} must be a non-empty list of non-empty strings, got {value!r}")
    if kind == "mapping" and not isinstance(value, Mapping):
        raise ConfigurationError(f"{label} must be a mapping (dict), got {value!r}")
    if kind == "callable" and not callable(value):
        raise ConfigurationError(f"{label} must be callable (a function), got {value!r}")
    return value


def _int_or_none(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(value)


def unknown_option(key: str, known: Iterable[str], what: str, source: str) -> ConfigurationError:
    """The error for an unknown option ``key`` (as the user spelled it), listing every known option."""
    return ConfigurationError(f"unknown {what} {key!r} in {source}; known options: {sorted(known)}")


def check_known(keys: Iterable[str], known: Iterable[str], what: str, source: str) -> None:
    """Refuse the first key of ``keys`` not in ``known``, listing every known option."""
    allowed = sorted(known)
    for key in keys:
        if key not in allowed:
            raise unknown_option(key, allowed, what, source)


def table(*options: Option) -> Mapping[str, Option]:
    """``{key: option}`` for a reader's options, in the given order."""
    return {option.key: option for option in options}
