"""``make dist``: the artifacts a cluster deployment uses, written to ``dist/`` (or the directory given).

- ``dstream_exactly_once-<v>-py3-none-any.whl``: the wheel, for ``pip install`` on every node or into a
  virtualenv that is packed and shipped with ``--archives``;
- ``dstream_exactly_once-<v>.zip``: for ``spark-submit --py-files``. PySpark's workers put only ``.zip``,
  ``.egg`` and ``.jar`` files of ``--py-files`` on ``sys.path`` (a ``.whl`` is shipped but never
  imported), so the package goes in a zip, together with kafka-python, its one required pure-Python
  dependency (taken from this Python's install, the version the package was tested with). crc32c is
  compiled and cannot be imported from a zip: without it kafka-python checks CRCs in pure Python.

Usage: python scripts/build_dist.py [DIST_DIR]
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_wheel(dist: Path) -> Path:
    for old in dist.glob("dstream_exactly_once-*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                    "-w", str(dist), str(ROOT)], check=True)
    (wheel,) = dist.glob("dstream_exactly_once-*.whl")
    return wheel


def kafka_python_files() -> list[tuple[Path, str]]:
    """(file, name in the zip) for every file of the installed kafka-python, byte code left out."""
    dist = importlib.metadata.distribution("kafka-python")
    files = []
    for f in dist.files or []:
        name = str(f)
        if "__pycache__" in name or name.endswith(".pyc") or name.startswith(".."):
            continue
        path = Path(str(dist.locate_file(f)))
        if path.is_file():
            files.append((path, name))
    if not any(name == "kafka/__init__.py" for _p, name in files):
        raise SystemExit("kafka-python is installed without its kafka/ package: cannot build the --py-files zip")
    return files


def build_zip(wheel: Path, dist: Path) -> Path:
    version = wheel.name.split("-")[1]
    target = dist / f"dstream_exactly_once-{version}.zip"
    with zipfile.ZipFile(wheel) as whl, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in whl.infolist():
            out.writestr(info, whl.read(info))
        for path, name in kafka_python_files():
            out.write(path, name)
    return target


def main(argv: list[str]) -> int:
    dist = Path(argv[0] if argv else ROOT / "dist").resolve()
    dist.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(dist)
    archive = build_zip(wheel, dist)
    print(f"{wheel}\n{archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
