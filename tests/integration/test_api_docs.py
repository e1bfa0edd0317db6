"""The API reference (docs/api) builds from the docstrings with warnings as errors, and covers every
public name of the package root, the stores, the sinks and the testing helpers. It needs Sphinx (the
``dev`` extra), so it sits with the tests `make test` runs rather than the core suite re-run on
PySpark 3.5 (tests/unit)."""

from __future__ import annotations

import importlib
import posixpath
import subprocess
import sys
from pathlib import Path

from sphinx.util.inventory import InventoryFile

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
MODULES = ["dstream_exactly_once", "dstream_exactly_once.stores", "dstream_exactly_once.sinks",
           "dstream_exactly_once.testing"]
BUILD_TIMEOUT_S = 120


def sphinx_build(source: Path, out: Path) -> subprocess.CompletedProcess:
    """``sphinx-build -W --keep-going -b html`` of ``source`` with docs/api's configuration."""
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-c", str(API), "-d", str(out / ".doctrees"), str(source), str(out)],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)


def documented_names(out: Path) -> set[str]:
    with open(out / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", posixpath.join)
    return {name for objects in inventory.values() for name in objects}


def test_api_reference_builds_without_warnings_and_covers_every_public_name(tmp_path: Path) -> None:
    out = tmp_path / "html"
    proc = sphinx_build(API, out)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr[-6000:]
    names = documented_names(out)
    missing = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        assert module.__all__
        for name in module.__all__:
            # a re-exported name is described once, with the package root
            if f"{module_name}.{name}" not in names and f"dstream_exactly_once.{name}" not in names:
                missing.append(f"{module_name}.{name}")
    assert missing == [], f"public names the API reference does not describe: {missing}"
    assert "createExactlyOnceStream" in (out / "package.html").read_text(encoding="utf-8")


def test_a_stale_name_fails_the_build(tmp_path: Path) -> None:
    """The same configuration with a page naming something the package does not have: the build fails."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "index.rst").write_text("Stale\n=====\n\n.. autofunction:: dstream_exactly_once.no_such_function\n")
    proc = sphinx_build(source, tmp_path / "html")
    assert proc.returncode != 0
    assert "no_such_function" in proc.stderr
