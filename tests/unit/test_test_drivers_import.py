"""Every module of the integration suite imports: a fault driver runs in a child process, where a
broken import shows only as that child's exit long after it started (and only in the slow suite)."""

from __future__ import annotations

import importlib
import pathlib

import pytest

INTEGRATION = pathlib.Path(__file__).resolve().parent.parent / "integration"
#: the integration suite runs on PySpark 4 only (several of its modules import its Python Data Source API)
pytestmark = pytest.mark.pyspark4
MODULES = sorted(p.stem for p in INTEGRATION.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", MODULES)
def test_integration_module_imports(name):
    importlib.import_module(f"tests.integration.{name}")
