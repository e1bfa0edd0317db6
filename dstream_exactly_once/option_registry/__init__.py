"""One option registry: every entry point of the library and every option it takes.

An entry point is something a user calls or configures: a stream factory (``KafkaUtils.createDirectStream``),
an output call (``commit_each_batch``), a Structured Streaming source or sink (``aof``, ``deo-store``), an
options builder (``store_sink_options``), a mapping the library checks (``kafkaParams``, the file options,
``tasks.*``, the Spark conf keys it reads), a store URL's query options, or a ``dstream-eo`` command (the
commands' entry points are read from the CLI's parser, above the library:
``cli/_option_entries.py``). Each :class:`EntryPoint` lists its options as
:class:`Option` values: name, kind, range or allowed values, default, one
doc line, older spellings (``aliases``) and whether the value is a secret. ``docs/options.md``'s tables are
generated from here (``make options-doc``) and a test checks they are
current.

How option names are spelled (one convention):

- keyword arguments of Python functions are ``snake_case`` (PEP 8), except the Spark 2.4 API's own
  camelCase names (``kafkaParams``, ``fromOffsets``, ``failOnDataLoss``, …), which keep Spark's spelling;
- string-keyed options (``.option()`` of the Structured Streaming source and sinks, a file stream's
  ``options`` mapping, Spark conf keys, ``tasks.*``) are lower-case words joined by dots, as Spark's and
  Kafka's own keys are (``max.bytes.per.trigger``, ``transaction.timeout.ms``); Spark-compatible names
  keep Spark's spelling (``checkpointLocation``, ``spark.streaming.kafka.maxRatePerPartition``);
- names owned by another system keep that system's spelling: ``kafkaParams`` and ``kafka.*`` (Kafka's
  client settings), store URL query options (libpq's and redis-py's), Doris Stream Load settings
  (``column_separator``), ``dstream-eo`` flags (``--kebab-case``).

An older spelling stays accepted as an alias (:meth:`EntryPoint.canonical`); giving both spellings with
different values is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, Iterable, Mapping, Tuple

from ..core._options import REQUIRED, Option, unknown_option
from ..errors import ConfigurationError

__all__ = ["FORMS", "REQUIRED", "EntryPoint", "entry_point", "entry_points", "keyword_checks", "option_count"]

#: how an entry point takes its options: Python keyword arguments, a string-keyed mapping (``.option()``,
#: an options dict, kafkaParams), Spark conf keys, a store URL's query string, or command-line flags
FORMS = ("keywords", "options", "conf", "query", "cli")


@dataclass(frozen=True)
class EntryPoint:
    """One entry point and its options (in the order the reference lists them).

    ``name`` is how a user calls it (``KafkaUtils.createDirectStream``, ``deo-store``, ``dstream-eo
    offsets reset``); ``form`` one of :data:`FORMS`; ``case_insensitive``: keys match without regard
    to case (Spark's ``.option()`` keys); ``open_keys``: key prefixes whose options another entry
    point checks (``kafka.`` of the ``deo-kafka`` sink: ``kafkaParams``).
    """

    name: str
    form: str
    doc: str
    options: Tuple[Option, ...]
    case_insensitive: bool = False
    open_keys: Tuple[str, ...] = ()
    ignored: Tuple[str, ...] = ()
    _index: Dict[str, Option] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.form not in FORMS:
            raise ConfigurationError(f"entry point {self.name!r} form must be one of {list(FORMS)}, got {self.form!r}")
        for option in self.options:
            for spelling in (option.key, *option.aliases):
                folded = self._fold(spelling)
                if folded in self._index:
                    raise ConfigurationError(f"entry point {self.name!r} lists {spelling!r} twice")
                self._index[folded] = option

    def _fold(self, key: str) -> str:
        return key.lower() if self.case_insensitive else key

    @property
    def keys(self) -> Tuple[str, ...]:
        """The option names (canonical spellings)."""
        return tuple(o.key for o in self.options)

    def option(self, key: str) -> Option:
        """The option ``key`` names (its canonical name or an alias); an unknown key is refused,
        listing every option of this entry point."""
        found = self._index.get(self._fold(key)) if isinstance(key, str) else None
        if found is None:
            raise unknown_option(key, self.keys, "option", self.name)
        return found

    def knows(self, key: str) -> bool:
        """Whether ``key`` is an option (or an alias, an ignored key, an open prefix) of this entry point."""
        folded = self._fold(key)
        return (folded in self._index or folded in {self._fold(k) for k in self.ignored}
                or any(folded.startswith(self._fold(p)) for p in self.open_keys))

    def canonical(self, values: Mapping[str, Any]) -> Dict[str, Any]:
        """``values`` with every alias replaced by its option's canonical name (other keys as given).

        Both spellings of one option with different values are refused."""
        out: Dict[str, Any] = {}
        spelled: Dict[str, str] = {}
        for key, value in values.items():
            option = self._index.get(self._fold(key)) if isinstance(key, str) else None
            name = option.key if option is not None else key
            if name in out and out[name] != value:
                raise ConfigurationError(f"{self.name} options {spelled[name]!r} and {key!r} name one option "
                                         f"({name!r}) with different values; give one of them")
            out[name] = value
            spelled[name] = key
        return out

    def check(self, values: Mapping[str, Any]) -> Dict[str, Any]:
        """Each of ``values`` checked through its option (unknown keys refused); the parsed values."""
        return {self.option(k).key: self.option(k).parse(v, f"{self.name} option {k!r}")
                for k, v in values.items()}


def keyword_checks(name: str, **values: Any) -> None:
    """Check keyword arguments ``values`` of entry point ``name`` through the registry: each must be of
    its option's kind and within its range (``None`` where the option allows it)."""
    entry = entry_point(name)
    for key, value in values.items():
        entry.option(key).parse(value, f"{name}() option {key!r}")


@lru_cache(maxsize=1)
def _all() -> Dict[str, EntryPoint]:
    from . import _stores, _streams, _structured

    out: Dict[str, EntryPoint] = {}
    for group in (_streams.ENTRY_POINTS, _structured.ENTRY_POINTS, _stores.ENTRY_POINTS):
        for entry in group:
            if entry.name in out:
                raise ConfigurationError(f"entry point {entry.name!r} is registered twice")
            out[entry.name] = entry
    return out


def entry_points() -> Tuple[EntryPoint, ...]:
    """Every entry point of the library, in the reference's order (the ``dstream-eo`` commands, read from the
    CLI's parser, join them in ``cli/_option_entries.py``)."""
    return tuple(_all().values())


def entry_point(name: str) -> EntryPoint:
    """The entry point called ``name``; an unknown name is refused listing every one."""
    found = _all().get(name)
    if found is None:
        raise unknown_option(name, _all(), "entry point", "the option registry")
    return found


def option_count(entries: Iterable[EntryPoint] = ()) -> int:
    """How many options ``entries`` (default: every entry point) list together."""
    return sum(len(e.options) for e in (tuple(entries) or entry_points()))
