"""The testing helpers' Spark home: the same Spark, its ``pyspark.zip`` with bytecode beside each module."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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


def test_the_home_is_made_once_and_again_when_unfinished(tmp_path, monkeypatch):
    from dstream_exactly_once.testing import _spark

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = _home(tmp_path)
    made = []
    compile_zip = _spark._compile_zip
    monkeypatch.setattr(_spark, "_compile_zip", lambda src, dst: (made.append(dst), compile_zip(src, dst)))
    home = compiled_spark_home(real)
    assert compiled_spark_home(real) == home and len(made) == 1  # made once
    (home / _spark._COMPLETE).unlink()  # a build cut short (its marker is written last)
    assert compiled_spark_home(real) == home and len(made) == 2
    (real / "conf").mkdir()  # the install changed: a home of its own, with the new entry linked
    other = compiled_spark_home(real)
    assert other != home and (other / "conf").is_symlink() and len(made) == 3


def test_without_a_writable_cache_spark_is_used_as_installed(tmp_path, monkeypatch):
    real = _home(tmp_path)
    (tmp_path / "ro").write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ro"))
    with pytest.warns(RuntimeWarning, match="compile PySpark anew"):
        assert compiled_spark_home(real) == real


def test_a_home_without_pyspark_zip_is_used_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    assert compiled_spark_home(tmp_path / "spark") == tmp_path / "spark"
    assert not (tmp_path / "cache").exists()
