"""The code blocks of README.md and docs/*.md, as the tests that run them see them.

A block is marked by an HTML comment on the line right before its opening fence:

- ``<!-- fragment -->``: a piece of a program (names defined elsewhere, a placeholder host, sample
  output): shown, never run;
- ``<!-- test: NAME -->``: run by the test that names ``NAME`` (a command line that needs a Spark
  cluster or a broker set up a particular way: tests/integration/test_deploy_routes.py,
  tests/integration/test_security_docs.py), with the substitutions that test lists;
- no marker: run by tests/integration/test_doc_snippets.py (Python blocks in one namespace per page,
  in page order; ``sh`` blocks with bash), its placeholders replaced by the local services.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)```(.*)$")
MARK = re.compile(r"^\s*<!--\s*(fragment|test:\s*([\w.-]+))\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str        # path relative to the repository root
    line: int        # 1-based line of the opening fence
    info: str        # the fence's info string ("python", "sh", "")
    mark: str        # "fragment", "test" or "" (run by the snippet test)
    test: str        # the NAME of <!-- test: NAME -->
    text: str        # the block's lines, the fence's indentation removed

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> List[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path) -> List[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    out: List[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, info = m.group(1), m.group(2).strip()
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page.name}:{i + 1}: a code block is never closed")
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                         for line in lines[i + 1:j])
        mark = MARK.match(lines[i - 1]) if i > 0 else None
        kind = "" if mark is None else ("fragment" if mark.group(1) == "fragment" else "test")
        out.append(Block(str(page.relative_to(ROOT)), i + 1, info, kind, (mark.group(2) or "") if mark else "",
                         body + "\n"))
        i = j + 1
    return out


def all_blocks() -> List[Block]:
    return [b for p in pages() for b in blocks(p)]


def named(test: str) -> List[Block]:
    """The blocks marked ``<!-- test: NAME -->`` with this name, in page order (at least one)."""
    found = [b for b in all_blocks() if b.mark == "test" and b.test == test]
    if not found:
        raise AssertionError(f"no code block is marked <!-- test: {test} -->")
    return found


def substitute(text: str, subs: Optional[Dict[str, str]]) -> str:
    """``text`` with each key of ``subs`` replaced (longest first); every key must occur."""
    for key in sorted(subs or {}, key=len, reverse=True):
        if key not in text:
            raise AssertionError(f"{key!r} does not occur in the block:\n{text}")
        text = text.replace(key, (subs or {})[key])
    return text
