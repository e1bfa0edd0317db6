"""argparse pieces shared by the package's command-line programs (``dstream-eo``, the teaching drivers):
value types and :class:`OneLineParser`, whose usage errors are one line."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn, Optional, Tuple

__all__ = ["EXIT_USAGE", "OneLineParser", "int_at_least", "non_empty", "probability", "topic_partitions"]

#: the exit status of a usage error (argparse's)
EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message> (see <prog> --help)`` and exit with status 2."""
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(EXIT_USAGE)


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


def probability(text: str) -> float:
    """An argparse ``type`` accepting a float in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def topic_partitions(text: str) -> Tuple[str, Optional[Tuple[int, ...]]]:
    """An argparse ``type`` for ``T`` (every partition of topic ``T``) or ``T:P[,P…]`` (those
    partitions, integers >= 0): ``(topic, None)`` or ``(topic, sorted partitions)``."""
    topic, colon, parts = text.strip().partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected a topic name, optionally with :partition[,partition…] "
                                         f"(events or events:0,2), got {text!r}")
    if not colon:
        return topic, None
    try:
        ids = {int(p) for p in parts.split(",")}
    except ValueError:
        ids = {-1}
    if not parts or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"expected partitions as integers >= 0 separated by commas after "
                                         f"'{topic}:' (events:0,2), got {text!r}")
    return topic, tuple(sorted(ids))
