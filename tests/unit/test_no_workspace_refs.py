"""What ships (the package, its docs, the README and the examples) explains the code as it is: it
names no document outside the package, no issue number and no set-up step only a checkout has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["README.md", "docs", "dstream_exactly_once", "examples"]
PATTERN = re.compile(r"\.\./shared|DESIGN\.md|STYLE\.md|\bissue #?\d+|\bseed 0\d\d|the seed's|\bseeds/|make deps|"
                     r"\bthis machine\b", re.IGNORECASE)


def test_pattern_finds_what_it_is_for() -> None:
    for bad in ("see ../shared/DESIGN.md", "(issue #12)", "seed 001", "the seed's names", "run make deps",
                "measured on this machine"):
        assert PATTERN.search(bad), bad
    for fine in ("random.Random(seed)", "--seed N", "an issue with the broker"):
        assert not PATTERN.search(fine), fine


def test_nothing_shipped_cites_the_workspace_or_history() -> None:
    files = subprocess.run(["git", "ls-files", *SHIPPED], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert any(f.endswith(".py") for f in files)
    hits = []
    for f in files:
        path = ROOT / f
        if path.suffix not in {".py", ".md", ".txt", ".lua", ".xml", ".toml", ".cfg"} or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if PATTERN.search(line):
                hits.append(f"{f}:{n}: {line.strip()[:120]}")
    assert hits == [], "\n".join(hits)


# Runtime messages (every string literal of the package that is not a docstring) point to what an
# installed copy has: `dstream-eo <verb> --help` or a docstring (`help(...)`), never a path of a
# checkout (docs/…, scripts/…, tests/…), a make target or a documentation page (`files.md`: the
# wheel ships no docs).
CHECKOUT_PATH = re.compile(r"\b(?:docs|scripts|tests|examples|bench)/|\bmake (?:deps|demo|test|unit|integration|lint|"
                           r"docs|bench|clean)\b|[\w-]\.md\b")


def _message_literals(source: str) -> list:
    """``(line, text)`` of each string literal of ``source`` that is not a docstring."""
    import ast

    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_message_check_finds_what_it_is_for() -> None:
    source = ('"""Module docs may cite docs/files.md."""\n'
              'def f(x):\n    """So may docs/options.md here."""\n'
              '    raise ValueError(f"bad {x!r}; see docs/files.md")\n'
              'HINT = "run make test first"\nPAGE = "make the file readable; see files.md"\n'
              'FINE = "see dstream-eo offsets reset --help, or help(FileUtils)"\n')
    hits = [text for _, text in _message_literals(source) if CHECKOUT_PATH.search(text)]
    assert sorted(hits) == ["; see docs/files.md", "make the file readable; see files.md", "run make test first"]


def test_runtime_messages_name_no_checkout_path() -> None:
    hits = []
    for path in sorted((ROOT / "dstream_exactly_once").rglob("*.py")):
        for line, text in _message_literals(path.read_text(encoding="utf-8")):
            if CHECKOUT_PATH.search(text):
                hits.append(f"{path.relative_to(ROOT)}:{line}: {text.strip()[:120]}")
    assert hits == [], "\n".join(hits)
