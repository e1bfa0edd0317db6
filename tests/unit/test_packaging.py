"""The built wheel holds everything the package loads at run time, and its licence files; the sdist
holds the licence, notice, README and CHANGELOG and builds the same wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Iterator, Set

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _git_files(*paths: str) -> list:
    return subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def _tracked_copy(dest: Path) -> Path:
    """A copy of the tracked files only: a checkout's leftovers (an egg-info from an editable install)
    would otherwise add files that a clean build leaves out."""
    for f in _git_files():
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    return dest


def _wheel(source: Path, out: Path) -> Path:
    """``pip wheel`` of ``source`` (a source tree or an sdist) into ``out``."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
                   check=True, capture_output=True)
    (wheel,) = out.glob("*.whl")
    return wheel


def _package_files(names: Set[str]) -> Set[str]:
    return {n for n in names if n.startswith("dstream_exactly_once/")}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _tracked_copy(tmp_path_factory.mktemp("src"))


@pytest.fixture(scope="module")
def wheel(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _wheel(tree, tmp_path_factory.mktemp("dist"))


def test_wheel_holds_every_package_file_and_the_licence(wheel: Path) -> None:
    tracked = _git_files("dstream_exactly_once")
    data_files = {f for f in tracked if not f.endswith(".py")}
    assert "dstream_exactly_once/testing/jvm/yarn-pom.xml" in data_files  # the check can fail
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(f for f in data_files | {f for f in tracked if f.endswith(".py")} if f not in names)
    assert missing == [], f"files the package ships in git but the wheel lacks: {missing}"
    licences = {n.rsplit("/", 1)[-1] for n in names if "/licenses/" in n}
    assert {"LICENSE", "NOTICE"} <= licences


def test_sdist_holds_the_project_files_and_builds_the_same_wheel(tree: Path, wheel: Path, tmp_path: Path) -> None:
    dist = tmp_path / "sdist"
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(dist)], cwd=tree, check=True,
                   capture_output=True)
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    tracked = set(_git_files("dstream_exactly_once"))
    data_files = {f for f in tracked if not f.endswith(".py")}
    assert {"dstream_exactly_once/py.typed", "dstream_exactly_once/stores/redis/lua/commit.lua",
            "dstream_exactly_once/testing/jvm/pom.xml"} <= data_files  # the check can fail
    missing = sorted(({"LICENSE", "NOTICE", "README.md", "CHANGELOG.md", "setup.py", "pyproject.toml"} | tracked)
                     - members)
    assert missing == [], f"files the sdist lacks: {missing}"
    from_sdist = _wheel(sdist, tmp_path / "from-sdist")
    assert _package_files(set(zipfile.ZipFile(from_sdist).namelist())) == \
        _package_files(set(zipfile.ZipFile(wheel).namelist()))


def test_wheel_declares_the_pytest_plugin_and_one_chart_extra(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "[pytest11]\ndstream_exactly_once = dstream_exactly_once.testing.pytest_plugin" in entry_points
    assert "Provides-Extra: chart" in metadata and "Provides-Extra: charts" in metadata  # charts: the old alias
    readme, help_text = (ROOT / "README.md").read_text(), subprocess.run(
        [sys.executable, "-m", "dstream_exactly_once.cli", "demo", "--help"], capture_output=True, text=True,
        cwd=ROOT, check=True).stdout
    assert "[charts]" not in readme and "'charts'" not in help_text and "'chart' extra" in help_text
