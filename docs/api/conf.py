"""Sphinx configuration of the API reference: ``sphinx-build -W --keep-going -b html docs/api <out>``.

The pages are generated from the docstrings by autodoc; the checkout holding this file is put first
on ``sys.path``, so the reference describes this copy of the package, not an installed one.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dstream_exactly_once import __version__  # noqa: E402

project = "dstream-exactly-once"
author = "dstream-exactly-once contributors"
copyright = "dstream-exactly-once contributors, Apache License 2.0"  # noqa: A001
release = version = __version__

extensions = ["sphinx.ext.autodoc"]
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
html_theme = "alabaster"
html_static_path: list = []
exclude_patterns = ["_build"]
