"""What ships (the package, its docs, the README and the examples) explains the code as it is: it
names no document outside the package, no issue number and no set-up step only a checkout has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["README.md", "docs", "dstream_exactly_once", "examples"]
PATTERN = re.compile(r"\.\./shared|DESIGN\.md|STYLE\.md|\bissue #?\d+|\bseed 0\d\d|the seed's|\bseeds/|make deps",
                     re.IGNORECASE)


def test_pattern_finds_what_it_is_for() -> None:
    for bad in ("see ../shared/DESIGN.md", "(issue #12)", "seed 001", "the seed's names", "run make deps"):
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
