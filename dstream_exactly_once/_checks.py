"""Argument checks shared by every module (kept tiny and dependency-free)."""

from __future__ import annotations

from typing import Any, TypeGuard

__all__ = ["is_int", "is_number"]


def is_int(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` proper: ``True``/``False`` are ints to Python, never to us."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is an ``int`` or ``float`` proper (never a ``bool``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
