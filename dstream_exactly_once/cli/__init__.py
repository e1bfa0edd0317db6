"""``dstream-eo``: the command line (:func:`main`; ``python -m dstream_exactly_once.cli`` runs it too)."""

from ._main import main

__all__ = ["main"]
