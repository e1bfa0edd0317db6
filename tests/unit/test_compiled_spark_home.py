"""The testing helpers' Spark home: the same Spark, its ``pyspark.zip`` with bytecode beside each module."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from dstream_exactly_once.testing._spark import compiled_spark_home


def _home(tmp_path: Path) -> Path:
    real = tmp_path / "spark"
    (real / "jars").mkdir(parents=True)
    (real / "jars" / "spark-core.jar").write_bytes(b"jar")
    (real / "bin").mkdir()
    (real / "python" / "lib").mkdir(parents=True)
    (real / "python" / "lib" / "py4j-src.zip").write_bytes(b"py4j")
    with zipfile.ZipFile(real / "python" / "lib" / "pyspark.zip", "w") as z:
        z.writestr("fakespark/__init__.py", "VALUE = 41 + 1\n")
        z.writestr("fakespark/broken.py", "def (:\n")  # a module that does not compile stays as it was
    return real


def test_the_zip_gains_bytecode_that_python_imports_and_the_rest_is_linked(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = _home(tmp_path)
    home = compiled_spark_home(real)
    assert home != real and home.parent == tmp_path / "cache" / "dstream-exactly-once"
    assert (home / "jars").is_symlink() and (home / "jars" / "spark-core.jar").read_bytes() == b"jar"
    assert (home / "python" / "lib" / "py4j-src.zip").is_symlink()
    zip_path = home / "python" / "lib" / "pyspark.zip"
    assert not zip_path.is_symlink()
    with zipfile.ZipFile(zip_path) as z:
        names = set(z.namelist())
    assert {"fakespark/__init__.py", "fakespark/__init__.pyc", "fakespark/broken.py"} <= names
    assert "fakespark/broken.pyc" not in names
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(zip_path)!r}); import fakespark; "
                          "print(fakespark.VALUE, fakespark.__file__)"], capture_output=True, text=True, check=True)
    value, file = out.stdout.split()
    assert value == "42" and file.endswith("fakespark/__init__.pyc")  # imported from the bytecode
    assert compiled_spark_home(real) == home  # made once


def test_a_home_without_pyspark_zip_is_used_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    assert compiled_spark_home(tmp_path / "spark") == tmp_path / "spark"
    assert not (tmp_path / "cache").exists()
