"""Import rules of the plug-in layout, checked on the source text (the AST of every module, every
``import``/``from`` line, function-local ones included):

- nothing under ``core/`` or ``stores/``, nor the CLI modules, imports a source package
  (``dstream_exactly_once.kafka``, ``dstream_exactly_once.files``): the CLI asks a source's hooks
  by range kind (the live log of ``core/live_log.py``, ``SourceRange.reanchor_position``);
- nothing under ``kafka/`` or ``files/`` imports pyspark.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Set, Tuple

import dstream_exactly_once

PACKAGE = Path(dstream_exactly_once.__file__).parent
NAME = "dstream_exactly_once"
SOURCES = (f"{NAME}.kafka", f"{NAME}.files")

def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports (relative imports resolved; ``from x import y`` yields ``x``
    and ``x.y``, since ``y`` may be a submodule)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target
            yield from (f"{target}.{a.name}" for a in node.names)


def _modules(*folders: str) -> List[Path]:
    return sorted(p for f in folders for p in (PACKAGE / f).rglob("*.py"))


def _cli_modules() -> List[Path]:
    return _modules("cli")


def _hits(paths: List[Path], prefixes: Tuple[str, ...]) -> Set[Tuple[str, str]]:
    hits = set()
    for path in paths:
        for target in _imports(path):
            for prefix in prefixes:
                if target == prefix or target.startswith(prefix + "."):
                    hits.add((_module_name(path), target.rsplit(".", 1)[0] if target != prefix and
                              target.count(".") > prefix.count(".") + 1 else target))
    return hits


def test_the_import_walker_sees_relative_and_function_local_imports(tmp_path):
    # the walker itself must find what the rules look for, or every rule passes vacuously
    found = set(_imports(PACKAGE / "streaming" / "direct.py"))
    assert f"{NAME}.kafka.source" in found and "pyspark.streaming" in found
    assert f"{NAME}.files.identity" in set(_imports(PACKAGE / "files" / "ranges.py"))  # a function-local import


def test_core_and_stores_import_no_source():
    assert _hits(_modules("core", "stores"), SOURCES) == set()


def test_cli_modules_import_no_source():
    assert _hits(_cli_modules(), SOURCES) == set()


def test_sources_import_no_spark():
    assert _hits(_modules("kafka", "files"), ("pyspark", "py4j")) == set()
