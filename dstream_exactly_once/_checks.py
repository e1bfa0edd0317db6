"""Argument checks shared by every module (kept tiny and dependency-free)."""

from __future__ import annotations

from typing import Any, TypeGuard

__all__ = ["is_int"]


def is_int(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` proper: ``True``/``False`` are ints to Python, never to us."""
    return isinstance(value, int) and not isinstance(value, bool)
