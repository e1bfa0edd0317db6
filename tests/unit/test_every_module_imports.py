"""Every module of the package imports: a renamed or moved module leaves no stale import behind
(mypy's ``ignore_missing_imports`` would not report a missing module of the package itself)."""

import importlib
import pkgutil

import dstream_exactly_once
from dstream_exactly_once.errors import ConfigurationError


def test_every_module_of_the_package_imports():
    broken = []
    for info in pkgutil.walk_packages(dstream_exactly_once.__path__, "dstream_exactly_once."):
        try:
            importlib.import_module(info.name)
        except ConfigurationError as exc:  # a module that needs a newer PySpark says so on import
            assert "needs PySpark 4.0 or newer" in str(exc), f"{info.name}: {exc}"
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("dstream_exactly_once"):
                broken.append(f"{info.name}: {exc}")
        except ImportError as exc:  # an optional dependency or a PySpark line without the API: said by name
            if "dstream_exactly_once" in str(exc) and "No module named" in str(exc):
                broken.append(f"{info.name}: {exc}")
    assert broken == []
