"""The ``dstream-eo`` commands as option-registry entry points, read from the command-line parser itself (one
source of truth), and every entry point of the library with them.

The registry (:mod:`dstream_exactly_once.option_registry`) holds the entry points of the library's Python API,
its Spark forms and its stores, which the library checks its arguments through; the CLI sits above the
library, so its commands join them here. :func:`every_entry_point` is what the options reference lists.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any, Dict, Iterator, List, Tuple

from ..core._options import REQUIRED, Option
from ..errors import ConfigurationError
from ..option_registry import EntryPoint
from ..option_registry import entry_points as library_entry_points

__all__ = ["entry_points", "every_entry_point"]


def _commands(parser: argparse.ArgumentParser, path: str) -> Iterator[Tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _commands(child, f"{path} {name}")


def _option(action: argparse.Action) -> Option:
    key = max(action.option_strings, key=len) if action.option_strings else action.dest
    doc = (action.help or "").replace("%(default)s", str(action.default))
    default = REQUIRED if action.required or not action.option_strings else action.default
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return Option(key, "bool", bool(action.default), doc)
    if action.choices is not None:
        return Option(key, "enum", default, doc, allowed=tuple(str(c) for c in action.choices))
    kind, low, high = _kind(action.type)
    return Option(key, kind, default, doc, low=low, high=high, nullable=default is None)


def _kind(parse: Any) -> Tuple[str, Any, Any]:
    """The kind and bounds of an argparse ``type``: ``int_at_least(n)`` knows its ``n``."""
    if parse is int:
        return "int", None, None
    name = getattr(parse, "__name__", "")
    if name == "probability":
        return "float", 0, 1
    if name == "_seconds":
        return "float", 0, None
    if name.startswith("integer >= "):
        return "int", inspect.getclosurevars(parse).nonlocals["minimum"], None
    return "str", None, None


def entry_points() -> List[EntryPoint]:
    """One entry point per ``dstream-eo`` command (form ``cli``), its options read from the parser."""
    from ._parser import cli_parser

    out = []
    for name, parser in _commands(cli_parser(), "dstream-eo"):
        options = tuple(_option(a) for a in parser._actions
                        if not isinstance(a, (argparse._HelpAction, argparse._VersionAction)) and a.dest != "cmd")
        out.append(EntryPoint(name, "cli", parser.description or (parser.format_usage().strip()), options))
    return out


def every_entry_point() -> Tuple[EntryPoint, ...]:
    """The library's entry points, then the ``dstream-eo`` commands: everything the options reference lists."""
    out: Dict[str, EntryPoint] = {}
    for entry in (*library_entry_points(), *entry_points()):
        if entry.name in out:
            raise ConfigurationError(f"entry point {entry.name!r} is registered twice")
        out[entry.name] = entry
    return tuple(out.values())
