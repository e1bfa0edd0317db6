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
``include.file.name``      false        records carry the file's path (see :mod:`._reader`)
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
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from .._checks import is_int
from ..core._options import Option, table, unknown_option
from ..errors import ConfigurationError

__all__ = ["CONF_PREFIX", "FILE_LOSS_OPTION", "OPTIONS", "FileSourceOptions"]

#: Spark conf keys ``spark.aof.<name>`` set options for every file stream of the application.
CONF_PREFIX = "spark.aof."

#: How the skip data-loss policy of a file stream is chosen (named in data-loss errors).
FILE_LOSS_OPTION = "the file source option fail.on.data.loss=false (or Spark conf spark.aof.fail.on.data.loss=false)"

_INT_MAX = 2147483647
#: the longest UTF-8 character: a record of at least this many bytes can always be cut between characters
UTF8_MAX_CHAR = 4
_CUT_NOTE = f" (a smaller value would cut inside a UTF-8 character of up to {UTF8_MAX_CHAR} bytes)"

#: every option of the file source (the module docstring is their reference)
OPTIONS = table(
    Option("starting.offsets", "enum", "earliest", "where files present at the first start are read from",
           allowed=("earliest", "latest")),
    Option("bytes.max", "int", _INT_MAX, "most bytes read from one file in one batch",
           low=UTF8_MAX_CHAR + 1, high=_INT_MAX, low_note=_CUT_NOTE),
    Option("md5.check.enabled", "bool", True, "identify files by a content fingerprint"),
    Option("md5.sample.length", "int", 1024, "bytes the fingerprint covers", low=1, high=1 << 20),
    Option("path.syntax", "enum", "glob", "how the path is matched", allowed=("glob", "regex")),
    Option("exclude", "str", (), "comma-separated globs of ignored files"),
    Option("exclude.regex", "str", None, "a regular expression of ignored paths"),
    Option("line.decoding", "enum", "strict", "how lines are decoded", allowed=("strict", "replace", "bytes")),
    Option("line.max.bytes", "int", 1 << 20, "longest record in bytes", low=UTF8_MAX_CHAR, high=_INT_MAX - 1,
           low_note=_CUT_NOTE),
    Option("line.overflow", "enum", "split", "what a longer line does", allowed=("split", "fail")),
    Option("include.file.name", "bool", False, "records carry the file's path"),
    Option("include.byte.offset", "bool", False, "records carry the byte offset of their first byte"),
    Option("fail.on.data.loss", "bool", False, "whether lost bytes stop the stream"),
)
_CHECKED = [o for o in OPTIONS.values() if o.kind != "str"]


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
        for option in _CHECKED:
            option.check(getattr(self, _attr(option.key)))
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
                     conf: Optional[Mapping[str, Any]] = None, *, also: Iterable[str] = ()) -> FileSourceOptions:
        """Options from ``conf`` (``spark.aof.<name>`` keys; other keys ignored) overridden by ``options``
        (``<name>`` keys, or ``spark.aof.<name>``). Unknown ``<name>`` keys are refused, listing every
        option: these and ``also``, the options the caller took out before (a facade's own)."""
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
                if name not in OPTIONS:
                    raise unknown_option(key, [*OPTIONS, *also], "file source option", source)
                raw[name] = value
        parsed = {_attr(name): _parse(name, value) for name, value in raw.items()}
        bytes_max = parsed.get("bytes_max")
        if "line_max_bytes" not in parsed and is_int(bytes_max):
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
    if name == "exclude":
        if isinstance(value, str):
            return tuple(g.strip() for g in value.split(",") if g.strip())
        if isinstance(value, (list, tuple)):
            return tuple(value)
        raise ConfigurationError(f"option 'exclude' must be comma-separated globs, got {value!r}")
    if name == "exclude.regex":
        return value if value != "" else None
    return OPTIONS[name].parse(value)
