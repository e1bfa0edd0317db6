"""Import rules of the plug-in layout, checked on the source text (the AST of every module, every
``import``/``from`` line, function-local ones included):

- nothing under ``core/``, ``stores/`` or ``engine/``, nor the CLI modules, imports a source package
  (``dstream_exactly_once.kafka``, ``dstream_exactly_once.files``): the CLI asks a source's hooks
  by range kind (the live log of ``core/_live_log.py``, ``SourceRange.reanchor_position``);
- nothing under ``kafka/`` or ``files/`` imports pyspark, but each plug-in's Spark glue in its
  sub-rooms ``spark/`` (DStream) and ``structured/`` (Structured Streaming);
- the sub-packages form layers: no import cycle between folders (each sub-package, and each module of
  the package root, is one node; a plug-in's sub-room is drawn in the layer it plugs into, ``SUB_ROOMS``),
  so every arrow between two folders points one way only; the deprecated re-export modules (``SHIMS``)
  are left out of it; a plug-in's own modules import none of its sub-rooms;
- every Spark conf key of the Kafka source (``spark.streaming.kafka.*``) is declared in
  ``kafka/_spark_conf.py`` and nowhere else in the library.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, FrozenSet, Iterator, List, Mapping, Set, Tuple

import pytest

import dstream_exactly_once

PACKAGE = Path(dstream_exactly_once.__file__).parent
NAME = "dstream_exactly_once"
SOURCES = (f"{NAME}.kafka", f"{NAME}.files")
#: a plug-in's sub-rooms and the layer (node of the folder graph) each plugs into: a plug-in's DStream
#: glue (``spark/``) sits above ``streaming/``, its Structured Streaming forms (``structured/``) are
#: registered by ``structured.register()``, and Kafka's DStream sink is exported by ``sinks/``
SUB_ROOMS = {("kafka", "spark"): "kafka.spark", ("kafka", "structured"): "structured", ("kafka", "sinks"): "sinks",
             ("files", "spark"): "files.spark", ("files", "structured"): "structured"}
SPARK_GLUE = (("kafka", "spark"), ("kafka", "structured"), ("files", "spark"), ("files", "structured"))
#: deprecated modules that only re-export names from their new home (they warn when imported)
SHIMS = ("streaming/kafka_rdd.py", "sinks/kafka_tx.py", "structured/aof.py", "kafka/offsets.py", "stores/writes.py",
         "redaction.py", "structured/store_sink.py", "structured/delta_sink.py", "structured/sinks.py",
         "files/structured/aof.py", "operators/export.py", "operators/retire.py", "operators/skip.py")
#: the modules whose path has no ``_private`` part: package faces (``__init__.py``), ``python -m`` entry points,
#: the exception tree, the pytest plugin (an entry point), the documented ``structured/anchor.py``, and the shims.
#: Any other module is private: adding a public module is an API change made here.
PUBLIC_MODULES = sorted({
    "__init__.py", "__main__.py", "errors.py", "admin/__init__.py", "cli/__init__.py", "cli/__main__.py",
    "core/__init__.py", "engine/__init__.py", "files/__init__.py", "files/spark/__init__.py",
    "files/structured/__init__.py", "kafka/__init__.py", "kafka/sinks/__init__.py", "kafka/spark/__init__.py",
    "kafka/structured/__init__.py", "operators/__init__.py", "option_registry/__init__.py", "sinks/__init__.py",
    "sinks/delta/__init__.py", "sinks/doris/__init__.py", "stores/__init__.py", "stores/redis/__init__.py",
    "stores/sql/__init__.py", "streaming/__init__.py", "structured/__init__.py", "structured/anchor.py",
    "teaching/__init__.py", "testing/__init__.py", "testing/pytest_plugin.py", *SHIMS})


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
    found = set(_imports(PACKAGE / "kafka" / "spark" / "_direct.py"))
    assert f"{NAME}.kafka._source" in found and "pyspark.streaming" in found and f"{NAME}.streaming._dstream" in found
    assert f"{NAME}.files._identity" in set(_imports(PACKAGE / "files" / "_ranges.py"))  # a function-local import


def test_core_stores_and_engine_import_no_source():
    assert _hits(_modules("core", "stores", "engine"), SOURCES) == set()


def test_cli_modules_import_no_source():
    assert _hits(_cli_modules(), SOURCES) == set()


def test_sources_import_no_spark():
    glue = [p for p in _modules("kafka", "files") if p.relative_to(PACKAGE).parts[:2] in SPARK_GLUE]
    assert len(glue) > 8, "the plug-ins' Spark glue must be found"
    outside = [p for p in _modules("kafka", "files") if p not in glue]
    assert _hits(outside, ("pyspark", "py4j")) == set()
    assert _hits(glue, ("pyspark",)), "the walker must see the glue's pyspark imports"


def _node(target: str) -> str:
    """The folder (sub-package) or package-root module an imported name belongs to; ``""`` for the package
    itself and for what is not this package."""
    parts = target.split(".")
    if parts[0] != NAME or len(parts) == 1:
        return ""
    if tuple(parts[1:3]) in SUB_ROOMS:
        return SUB_ROOMS[(parts[1], parts[2])]
    if (PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file():
        return parts[1]
    return "__init__"  # a name defined by the package root itself


def _folder_graph() -> Dict[str, Set[str]]:
    """``{folder: folders it imports}`` over every module, function-local imports included."""
    graph: Dict[str, Set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.as_posix() in SHIMS:  # an old import path kept working; no layer of its own
            continue
        source = (SUB_ROOMS[(rel.parts[0], rel.parts[1])] if rel.parts[:2] in SUB_ROOMS else
                  rel.parts[0] if len(rel.parts) > 1 else rel.stem)
        graph.setdefault(source, set())
        for target in _imports(path):
            node = _node(target)
            if node and node != source:
                graph[source].add(node)
    return graph


def _cycles(graph: Mapping[str, Set[str]]) -> List[FrozenSet[str]]:
    """The strongly connected components of more than one node (Tarjan), each an import cycle."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[FrozenSet[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_folder_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    graph = _folder_graph()
    assert "teaching" in graph["cli"] and "core" in graph["streaming"]  # function-local and top-level arrows
    assert {"streaming", "kafka"} <= graph["kafka.spark"] and {"streaming", "files"} <= graph["files.spark"]
    assert {"kafka", "files"} <= graph["structured"]  # the sub-rooms drawn in the layer they plug into


def test_a_plugin_imports_none_of_its_sub_rooms():
    rooms = tuple(f"{NAME}.{a}.{b}" for a, b in SUB_ROOMS)
    own = [p for p in _modules("kafka", "files") if p.relative_to(PACKAGE).parts[:2] not in SUB_ROOMS]
    assert len(own) > 20 and _hits(own, rooms) == set()
    glue = [p for p in _modules("kafka") if p.relative_to(PACKAGE).parts[:2] in SUB_ROOMS]
    assert _hits(glue, (f"{NAME}.kafka._offsets",)), "the walker must see the sub-rooms' imports of the plug-in"


def test_no_import_cycle_between_folders():
    graph = _folder_graph()
    cycles = _cycles(graph)
    arrows = [f"{a} -> {b}" for c in cycles for a in sorted(c) for b in sorted(graph[a] & c)]
    assert cycles == [], f"import cycles between folders: {arrows}"


def test_the_engine_sits_above_the_stores_and_the_stores_above_the_core():
    graph = _folder_graph()
    assert {"core", "stores"} <= graph["engine"]
    assert "core" in graph["stores"]
    assert not {"engine", "stores"} & graph["core"]
    assert "engine" not in graph["stores"]


@pytest.mark.parametrize("shim", [pytest.param(s, marks=pytest.mark.pyspark4) if "structured/" in s else s
                                  for s in SHIMS])
def test_the_deprecated_shims_exist_and_warn(shim):
    """(A ``structured`` shim imports a Data Source, which on PySpark 3.5 refuses as documented.)"""
    import importlib
    import sys
    import warnings

    assert (PACKAGE / shim).is_file(), shim
    name = f"{NAME}." + shim[:-3].replace("/", ".")
    sys.modules.pop(name, None)
    if shim.startswith("operators/"):  # the deprecated package warns, once, for its modules
        sys.modules.pop(f"{NAME}.operators", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.import_module(name)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught), shim


def test_modules_are_private_unless_listed_public():
    """Private by default: a module users are not documented to import has a ``_`` in its path."""
    public = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                    if not any(part.startswith("_") and part not in ("__init__.py", "__main__.py")
                               for part in p.relative_to(PACKAGE).parts))
    assert len(public) > 20
    assert public == PUBLIC_MODULES, f"new public: {sorted(set(public) - set(PUBLIC_MODULES))}, " \
        f"gone: {sorted(set(PUBLIC_MODULES) - set(public))}"


def _string_constants(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def test_the_kafka_spark_conf_keys_are_declared_in_one_module():
    import re

    key = re.compile(r"spark\.streaming\.kafka\.[A-Za-z.]+")
    home = PACKAGE / "kafka" / "_spark_conf.py"
    declared = {v for v in _string_constants(home) if key.fullmatch(v)}
    assert len(declared) >= 9, declared
    # the library's code (the demo in teaching/ sets keys as an application does) names no key elsewhere
    elsewhere = {(str(p.relative_to(PACKAGE)), v) for p in PACKAGE.rglob("*.py")
                 if p != home and p.relative_to(PACKAGE).parts[0] != "teaching"
                 for v in _string_constants(p) if key.fullmatch(v)}
    assert elsewhere == set()
