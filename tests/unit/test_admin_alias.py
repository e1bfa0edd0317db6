"""``dstream_exactly_once.operators`` is the deprecated name of ``dstream_exactly_once.admin``."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize("module, new_module", [("", ""), (".export", "._export"), (".retire", "._retire"),
                                                (".skip", "._skip")])
def test_the_old_paths_import_the_same_names_with_a_deprecation_warning(module, new_module):
    for name in [n for n in sys.modules if n.startswith("dstream_exactly_once.operators")]:
        del sys.modules[name]
    with pytest.warns(DeprecationWarning, match="dstream_exactly_once.admin"):
        old = importlib.import_module("dstream_exactly_once.operators" + module)
    new = importlib.import_module("dstream_exactly_once.admin" + new_module)
    assert old.__all__ and list(old.__all__) == list(new.__all__)
    for name in new.__all__:
        assert getattr(old, name) is getattr(new, name), name
