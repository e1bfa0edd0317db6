"""The options reference's tables, rendered from the registry and the ``dstream-eo`` parser
(:func:`~._option_entries.every_entry_point`).

``python -m dstream_exactly_once.cli._options_doc PATH`` rewrites the part of the reference file
``PATH`` between :data:`BEGIN` and :data:`END`; ``--check`` only says whether it is current (exit
status 1 when not). ``make options-doc`` runs the first on the project's reference.
"""

from __future__ import annotations

import sys
from typing import Any, List, Optional, Sequence

from ..core._options import Option
from ..option_registry import EntryPoint
from ._option_entries import every_entry_point

__all__ = ["BEGIN", "END", "render", "rewrite"]

BEGIN = "<!-- option tables: generated from dstream_exactly_once/option_registry (make options-doc) -->"
END = "<!-- end of the generated option tables -->"

_GROUPS = (
    ("Stream factories", "keywords", lambda e: "." in e.name or e.name == "exactly_once"),
    ("Output calls", "keywords", lambda e: e.name in ("commit_each_batch", "commit_each_partition", "foreach_batch",
                                                     "write_each_partition")),
    ("File options", "options", lambda e: e.name == "file options"),
    ("kafkaParams", "options", lambda e: e.name == "kafkaParams"),
    ("SparkConf keys read by the library", "conf", lambda e: True),
    ("Structured Streaming source and sinks", "options", lambda e: e.name in (
    "aof", "deo-store", "deo-doris", "deo-kafka", "deo-kafka source", "deo-delta")),
    ("Sink options builders", "keywords", lambda e: e.name.endswith("_sink_options")),
    ("Store URL query options", "query", lambda e: True),
    ("dstream-eo commands", "cli", lambda e: True),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: Any) -> str:
    return f"`{value}`" if value != "" else "`''`"


def _kind(o: Option) -> str:
    if o.kind == "int" or o.kind == "float":
        noun = "int" if o.kind == "int" else "number"
        if o.low is not None and o.high is not None:
            return f"{noun} {_num(o.low)}..{_num(o.high)}"
        if o.low is not None:
            return f"{noun} ≥ {_num(o.low)}"
        return noun
    if o.kind == "enum":
        return " / ".join(_code(a) for a in o.allowed)
    if o.kind == "duration":
        return "duration (`500ms`, `120s`, `2min`, plain seconds)"
    return {"bool": "bool", "str": "str", "url": "URL (str)", "list": "list of str", "mapping": "mapping",
            "callable": "callable", "object": "object"}[o.kind]


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _default(e: EntryPoint, o: Option) -> str:
    if o.required:
        return "**required**"
    if o.default is None or o.default == ():
        return "`None`" if e.form == "keywords" else "unset"
    if isinstance(o.default, bool):
        return _code(o.default if e.form == "keywords" else str(o.default).lower())
    return _code(o.default)


def _name(e: EntryPoint, o: Option) -> str:
    names = " / ".join(f"`{n}`" for n in (o.key, *o.aliases))
    notes = []
    if o.secret:
        notes.append("secret")
    if o.nullable and not o.required:
        notes.append("or None")
    return names + (f" ({', '.join(notes)})" if notes else "")


def _table(e: EntryPoint) -> List[str]:
    doc = _cell(e.doc[:1].upper() + e.doc[1:])
    lines = [f"#### `{e.name}`", "", doc if doc.endswith(".") else doc + ".", ""]
    if e.ignored or e.open_keys:
        extra = []
        if e.open_keys:
            extra.append("keys starting with " + ", ".join(f"`{p}`" for p in e.open_keys) + " go to kafkaParams")
        if e.ignored:
            extra.append("accepted and ignored: " + ", ".join(f"`{k}`" for k in e.ignored))
        lines += ["Also: " + "; ".join(extra) + ".", ""]
    lines += ["| option | type / allowed | default | meaning |", "|---|---|---|---|"]
    for o in e.options:
        lines.append(f"| {_name(e, o)} | {_cell(_kind(o))} | {_default(e, o)} | {_cell(o.doc)} |")
    return lines + [""]


def render(entries: Optional[Sequence[EntryPoint]] = None) -> str:
    """The generated part of the reference (between :data:`BEGIN` and :data:`END`, exclusive)."""
    entries = list(entries if entries is not None else every_entry_point())
    placed: List[str] = []
    lines: List[str] = []
    for title, form, test in _GROUPS:
        group = [e for e in entries if e.form == form and e.name not in placed and test(e)]
        if not group:
            continue
        lines += [f"### {title}", ""]
        for e in group:
            lines += _table(e)
            placed.append(e.name)
    missing = [e.name for e in entries if e.name not in placed]
    if missing:
        raise ValueError(f"entry points without a section in the options reference: {missing}")
    return "\n".join(lines)


def rewrite(text: str) -> str:
    """``text`` (the options reference) with its generated part rendered anew."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"the options reference needs the markers {BEGIN!r} and {END!r}")
    return f"{head}{BEGIN}\n\n{render()}\n{END}{tail}"


def main(argv: Sequence[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    if len(paths) != 1:
        sys.stderr.write("usage: python -m dstream_exactly_once.cli._options_doc [--check] PATH\n")
        return 2
    with open(paths[0], encoding="utf-8") as f:
        text = f.read()
    new = rewrite(text)
    if check:
        return 0 if new == text else 1
    with open(paths[0], "w", encoding="utf-8") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
