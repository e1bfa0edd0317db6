"""Modules' earlier paths import as the modules they became (``dstream_exactly_once._moved``): a Spark
checkpoint written before a module moved names it by its old path, and must still load."""

from __future__ import annotations

import importlib
import pickle
import sys
import warnings
from pathlib import Path

import pytest

import dstream_exactly_once
from dstream_exactly_once._moved import MOVED, MovedModuleFinder
from dstream_exactly_once.errors import ConfigurationError

PACKAGE = Path(dstream_exactly_once.__file__).parent


def _exists(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_the_finder_is_installed_once_and_after_the_real_finders():
    from dstream_exactly_once._moved import install

    install()
    finders = [f for f in sys.meta_path if isinstance(f, MovedModuleFinder)]
    assert len(finders) == 1
    assert sys.meta_path.index(finders[0]) > 0  # a module that exists is found by the real finders first


def test_every_old_path_is_gone_and_every_new_one_exists():
    assert len(MOVED) > 100
    assert [old for old in MOVED if _exists(old)] == []  # an old path that exists again is that module
    assert [new for new in MOVED.values() if not _exists(new)] == []


def test_an_old_path_imports_as_the_same_module_object_quietly():
    faces = {name: dict(vars(module)) for name, module in sys.modules.items()
             if name.startswith("dstream_exactly_once") and hasattr(module, "__path__")}
    loaded = 0
    for old, new in MOVED.items():
        with warnings.catch_warnings():  # a parent package may be a documented, deprecated one: it warns
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                importlib.import_module(old.rpartition(".")[0])
            except ConfigurationError:
                pass
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # internal moves do not warn: a checkpoint load stays quiet
            try:
                module = importlib.import_module(old)
            except ConfigurationError as exc:  # a module that needs a newer PySpark says so on import
                assert "needs PySpark 4.0 or newer" in str(exc), f"{old}: {exc}"
                continue
        assert module is sys.modules[new], old
        assert module.__spec__.name == new and module.__name__ == new  # its own identity is kept
        loaded += 1
    assert loaded > 100
    for name, before in faces.items():  # no package's own names were overwritten by an old path's module
        now = vars(sys.modules[name])
        assert {k: v for k, v in before.items() if now.get(k) is not v} == {}, name


def test_an_old_path_never_replaces_a_name_its_parent_package_defines():
    import dstream_exactly_once.cli as cli_face

    main = cli_face.main
    MOVED["dstream_exactly_once.cli.main"] = "dstream_exactly_once.cli._main"
    try:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("dstream_exactly_once.cli.main")
    finally:
        del MOVED["dstream_exactly_once.cli.main"]
    assert cli_face.main is main and callable(main)


def test_a_pickle_naming_a_released_module_path_loads_as_todays_object():
    from dstream_exactly_once import OffsetRange

    assert MOVED["dstream_exactly_once.offsets"] == OffsetRange.__module__  # its home in the 0.2.0 release
    # protocol 0 writes module paths as plain text: the same pickle as a release before the move wrote
    today = pickle.dumps(OffsetRange("t", 3, 10, 20), protocol=0)
    assert OffsetRange.__module__.encode() in today
    released = today.replace(OffsetRange.__module__.encode(), b"dstream_exactly_once.offsets")
    assert pickle.loads(released) == OffsetRange("t", 3, 10, 20)
    assert pickle.loads(b"cdstream_exactly_once.core.committer\nBatchCommitter\n.") is \
        importlib.import_module("dstream_exactly_once.engine._committer").BatchCommitter
