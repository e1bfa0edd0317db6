"""The built wheel holds everything the package loads at run time, and its licence files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_holds_every_package_file_and_the_licence(tmp_path: Path) -> None:
    tracked = subprocess.run(["git", "ls-files", "dstream_exactly_once"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    data_files = {f for f in tracked if not f.endswith(".py")}
    assert "dstream_exactly_once/testing/jvm/yarn-pom.xml" in data_files  # the check can fail
    # Build from a copy of the tracked files only: a checkout's leftovers (an egg-info from an editable
    # install) would otherwise add files that a clean build leaves out.
    src = tmp_path / "src"
    every = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in every:
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                   check=True, capture_output=True)
    (wheel,) = out.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(f for f in data_files | {f for f in tracked if f.endswith(".py")} if f not in names)
    assert missing == [], f"files the package ships in git but the wheel lacks: {missing}"
    licences = {n.rsplit("/", 1)[-1] for n in names if "/licenses/" in n}
    assert {"LICENSE", "NOTICE"} <= licences
