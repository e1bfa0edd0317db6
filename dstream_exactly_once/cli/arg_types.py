"""argparse value types shared by the ``dstream-eo`` parsers."""

from __future__ import annotations

import argparse
from typing import Callable

__all__ = ["int_at_least", "non_empty"]


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting an integer ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def non_empty(text: str) -> str:
    """An argparse ``type`` accepting a non-empty, non-blank string."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty value, got {text!r}")
    return text
