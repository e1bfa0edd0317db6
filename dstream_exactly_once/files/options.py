"""Options of the append-only file source, with the ss-aof design's names and defaults.

Every option may be given in the ``options`` mapping of the stream or as Spark conf
``spark.aof.<name>`` (the mapping wins). Conf is taken as a plain mapping so this module stays
Spark-free. Unknown keys and bad values are refused with a
:class:`~dstream_exactly_once.errors.ConfigurationError` naming the key, the value and what is allowed.

=========================  ===========  ===========================================================
name                       default      meaning
=========================  ===========  ===========================================================
``starting.offsets``       earliest     files present at the first start: ``earliest`` (from byte 0)
                                        or ``latest`` (after their last complete line)
``bytes.max``              2147483647   most bytes read from one file in one batch, at least 5 (a
                                        line piece of a whole UTF-8 character and its ``\\n``)
``md5.check.enabled``      true         identify files by a content fingerprint (off: by
                                        device/inode only; replacement and copies go unnoticed)
``md5.sample.length``      1024         bytes the fingerprint covers (the hash is BLAKE2b-128, not
                                        MD5; the ss-aof names are kept)
``path.syntax``            glob         ``glob`` (the whole absolute path) or ``regex`` (a Python
                                        regular expression matched against the file *names* of
                                        the literal directory before the last ``/``)
``exclude``                (none)       comma-separated globs; a file whose name or path matches one
                                        is ignored
``exclude.regex``          (none)       a regular expression; a file whose path it finds is ignored
``line.decoding``          strict       ``strict`` (UTF-8, an undecodable line fails the task
                                        naming file and byte), ``replace`` (U+FFFD) or ``bytes``
``line.max.bytes``         1048576      longest record in bytes (without its ``\\n``), at least 4
                                        (one UTF-8 character of any length); must be less than
                                        ``bytes.max`` (when only ``bytes.max`` is set, at most
                                        ``bytes.max - 1``)
``line.overflow``          split        a longer line is ``split`` into records of at most
                                        ``line.max.bytes`` (never inside a UTF-8 character), or
                                        ``fail`` stops the stream naming the file and byte offset
``include.file.name``      false        records carry the file's path (see :mod:`.reader`)
``include.byte.offset``    false        records carry the byte offset of their first byte
``fail.on.data.loss``      false        a planned range whose bytes are gone when it is read (or
                                        replayed): ``true`` stops the stream with a
                                        ``DataLossError`` naming the batch, the range and the
                                        command that continues; ``false`` commits what still
                                        exists and records the loss in the store beside the commit
=========================  ===========  ===========================================================

``split`` is the default deliberately: it loses nothing and never stalls the stream; ``fail``
stops it until an operator intervenes (no tailer skips silently here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import ConfigurationError

__all__ = ["CONF_PREFIX", "FILE_LOSS_OPTION", "FileSourceOptions"]

#: Spark conf keys ``spark.aof.<name>`` set options for every file stream of the application.
CONF_PREFIX = "spark.aof."

#: How the skip data-loss policy of a file stream is chosen (named in data-loss errors).
FILE_LOSS_OPTION = "the file source option fail.on.data.loss=false (or Spark conf spark.aof.fail.on.data.loss=false)"

_INT_MAX = 2147483647
_CHOICES = {
    "starting.offsets": ("earliest", "latest"),
    "path.syntax": ("glob", "regex"),
    "line.decoding": ("strict", "replace", "bytes"),
    "line.overflow": ("split", "fail"),
}
_BOOLS = ("md5.check.enabled", "include.file.name", "include.byte.offset", "fail.on.data.loss")
#: name -> (lowest allowed, highest allowed)
#: the longest UTF-8 character: a record of at least this many bytes can always be cut between characters
UTF8_MAX_CHAR = 4
_INTS = {"bytes.max": (UTF8_MAX_CHAR + 1, _INT_MAX), "md5.sample.length": (1, 1 << 20),
         "line.max.bytes": (UTF8_MAX_CHAR, _INT_MAX - 1)}
_STRS = ("exclude", "exclude.regex")


@dataclass(frozen=True)
class FileSourceOptions:
    """The validated options of one file stream (a small picklable value, shipped to executors)."""

    starting_offsets: str = "earliest"
    bytes_max: int = _INT_MAX
    md5_check_enabled: bool = True
    md5_sample_length: int = 1024
    path_syntax: str = "glob"
    exclude: Tuple[str, ...] = ()
    exclude_regex: Optional[str] = None
    line_decoding: str = "strict"
    line_max_bytes: int = 1 << 20
    line_overflow: str = "split"
    include_file_name: bool = False
    include_byte_offset: bool = False
    fail_on_data_loss: bool = False

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            _choice(name, getattr(self, _attr(name)), allowed)
        for name in _BOOLS:
            if not isinstance(getattr(self, _attr(name)), bool):
                raise ConfigurationError(f"option {name!r} must be true or false, got {getattr(self, _attr(name))!r}")
        for name, (low, high) in _INTS.items():
            _int(name, getattr(self, _attr(name)), low, high)
        if self.line_max_bytes >= self.bytes_max:
            raise ConfigurationError(
                f"option 'line.max.bytes' ({self.line_max_bytes!r}) must be less than 'bytes.max' "
                f"({self.bytes_max!r}) so that a longest line and its newline fit in one batch")
        if not isinstance(self.exclude, tuple) or not all(isinstance(g, str) and g for g in self.exclude):
            raise ConfigurationError(f"option 'exclude' must be comma-separated non-empty globs, got {self.exclude!r}")
        if self.exclude_regex is not None:
            _regex("exclude.regex", self.exclude_regex)

    @property
    def sample_length(self) -> int:
        """Bytes fingerprinted: ``md5.sample.length``, or 0 when ``md5.check.enabled`` is false."""
        return self.md5_sample_length if self.md5_check_enabled else 0

    @classmethod
    def from_mapping(cls, options: Optional[Mapping[str, Any]] = None,
                     conf: Optional[Mapping[str, Any]] = None) -> FileSourceOptions:
        """Options from ``conf`` (``spark.aof.<name>`` keys; other keys ignored) overridden by ``options``
        (``<name>`` keys, or ``spark.aof.<name>``). Unknown ``<name>`` keys are refused."""
        raw: Dict[str, Any] = {}
        for source, values, prefixed_only in (("Spark conf", conf, True), ("options", options, False)):
            if values is None:
                continue
            if not isinstance(values, Mapping):
                raise ConfigurationError(f"{source} must be a mapping of option names to values, got {values!r}")
            for key, value in values.items():
                if not isinstance(key, str):
                    raise ConfigurationError(f"{source} keys must be str, got {key!r}")
                name = key[len(CONF_PREFIX):] if key.startswith(CONF_PREFIX) else key
                if prefixed_only and not key.startswith(CONF_PREFIX):
                    continue
                if name not in _KNOWN:
                    raise ConfigurationError(f"unknown file source option {key!r} in {source}; "
                                             f"known options: {sorted(_KNOWN)}")
                raw[name] = value
        parsed = {_attr(name): _parse(name, value) for name, value in raw.items()}
        bytes_max = parsed.get("bytes_max")
        if "line_max_bytes" not in parsed and isinstance(bytes_max, int) and not isinstance(bytes_max, bool):
            # follows a small bytes.max
            parsed["line_max_bytes"] = max(UTF8_MAX_CHAR, min(cls.line_max_bytes, bytes_max - 1))
        return cls(**parsed)

    def to_mapping(self) -> Dict[str, Any]:
        """``{name: value}`` with the option names (for messages and docs)."""
        out: Dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name.replace("_", ".")] = ",".join(value) if isinstance(value, tuple) else value
        return out


def _attr(name: str) -> str:
    return name.replace(".", "_")


_KNOWN = frozenset(f.name.replace("_", ".") for f in fields(FileSourceOptions))


def _choice(name: str, value: Any, allowed: Tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ConfigurationError(f"option {name!r} must be one of {list(allowed)}, got {value!r}")
    return value


def _int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        why = _WHY_LOW.get(name, "") if isinstance(value, int) and not isinstance(value, bool) and value < low else ""
        raise ConfigurationError(f"option {name!r} must be an integer in [{low}, {high}], got {value!r}{why}")
    return value


_WHY_LOW = {name: f" (a smaller value would cut inside a UTF-8 character of up to {UTF8_MAX_CHAR} bytes)"
            for name in ("bytes.max", "line.max.bytes")}


def _regex(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"option {name!r} must be a non-empty regular expression, got {value!r}")
    try:
        re.compile(value)
    except re.error as exc:
        raise ConfigurationError(f"option {name!r} is not a valid regular expression: {value!r} ({exc})") from None
    return value


def _parse(name: str, value: Any) -> Any:
    """``value`` (a Python value or a conf string) as the type option ``name`` holds."""
    if name in _BOOLS:
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise ConfigurationError(f"option {name!r} must be true or false, got {value!r}")
        return value
    if name in _INTS:
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return int(value)
        return value  # validated (and refused if not an int) by FileSourceOptions
    if name in _CHOICES:
        return value.strip().lower() if isinstance(value, str) else value
    if name == "exclude":
        if isinstance(value, str):
            return tuple(g.strip() for g in value.split(",") if g.strip())
        if isinstance(value, (list, tuple)):
            return tuple(value)
        raise ConfigurationError(f"option 'exclude' must be comma-separated globs, got {value!r}")
    if name in _STRS:
        return value if value != "" else None
    return value
