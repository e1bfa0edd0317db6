"""Argument parsing for ``dstream-eo`` and ``python -m dstream_exactly_once.demo`` (no Spark import).

Usage errors print one line (``<prog>: error: …``) and exit with status 2, as argparse does, but
without the usage block; every range check names the option, the bad value and what is allowed.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, Optional

from .._version import __version__
from .arg_types import int_at_least, non_empty

__all__ = ["OneLineParser", "cli_parser", "int_at_least", "non_empty", "parse", "probability"]

USAGE_ERROR = 2


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message> (see <prog> --help)`` and exit with status 2."""
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(USAGE_ERROR)


def probability(text: str) -> float:
    """An argparse ``type`` accepting a float in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def add_demo_arguments(demo: argparse.ArgumentParser) -> None:
    """The ``demo`` subcommand's options."""
    demo.add_argument("--n", type=int_at_least(1), default=10000,
                      help="sum the integers 1..N (N >= 1, default 10000)")
    demo.add_argument("--crashes", type=int_at_least(0), default=5,
                      help="drivers to SIGKILL, one per crash point in turn, before letting one finish "
                           "(>= 0, default 5: every crash point once)")
    demo.add_argument("--rate", type=int_at_least(1), default=250,
                      help="maxRatePerPartition in records/s, i.e. records per partition per batch "
                           "(>= 1, default 250)")
    demo.add_argument("--seed", type=int, default=0,
                      help="order of the crash points: 0 = the order of a batch, other values shuffle it (default 0)")
    demo.add_argument("--out", type=non_empty, default=None,
                      help="directory for the stores, trace.jsonl, summary.json and the PNG (default: a new "
                           "temporary directory)")
    demo.add_argument("--chart", type=non_empty, default=None,
                      help="where to write the PNG of both running totals (default: OUT/totals.png; needs "
                           "matplotlib, the 'charts' extra)")


def add_pipeline_arguments(pipe: argparse.ArgumentParser) -> None:
    """The internal ``pipeline`` subcommand's options (one driver of the demo pipeline)."""
    pipe.add_argument("--bootstrap", required=True, type=non_empty)
    pipe.add_argument("--topic", required=True, type=non_empty)
    pipe.add_argument("--store", required=True, type=non_empty)
    pipe.add_argument("--app-id", required=True, type=non_empty)
    pipe.add_argument("--pattern", choices=["batch", "partition", "both", "doris", "kafka"], default="batch")
    pipe.add_argument("--offset-log", choices=["ahead", "in_commit"], default="ahead",
                      help="commit_each_batch's offset_log mode (pattern batch)")
    pipe.add_argument("--out-topic", default=None, help="output topic (pattern kafka)")
    pipe.add_argument("--doris-fe", default=None, help="Doris FE URL (pattern doris)")
    pipe.add_argument("--rate", type=int_at_least(1), default=2000, help="maxRatePerPartition (records/s)")
    pipe.add_argument("--batch-seconds", type=int_at_least(1), default=1)
    pipe.add_argument("--master", default="local[2,4]", type=non_empty)  # local[N] never retries a task
    pipe.add_argument("--crash-prob", type=probability, default=0.0)
    pipe.add_argument("--seed", type=int, default=None)


def cli_parser(prog: str = "dstream-eo", *, with_pipeline: bool = False) -> OneLineParser:
    """The ``dstream-eo`` parser: ``--version`` and the ``demo`` subcommand (plus ``pipeline``
    when ``with_pipeline``, as ``python -m dstream_exactly_once.demo`` offers)."""
    from .exit_codes import EXIT_CODES_HELP

    p = OneLineParser(prog=prog, description="dstream-exactly-once: WAL-free direct Kafka DStreams for "
                      "PySpark with exactly-once output.", epilog=EXIT_CODES_HELP,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=OneLineParser)
    if with_pipeline:
        add_pipeline_arguments(sub.add_parser("pipeline", help="run one driver of the exactly-once sum pipeline"))
    add_demo_arguments(sub.add_parser("demo", help="sum 1..N through a local Kafka broker and Spark twice "
                                      "(at-least-once and exactly-once), SIGKILL the driver at each crash "
                                      "point, compare"))
    if not with_pipeline:
        from .operator_parsers import add_operator_commands

        add_operator_commands(sub)
    return p


def parse(prog: str, argv: Optional[list[str]], *, with_pipeline: bool = False) -> argparse.Namespace:
    """Parse ``argv`` (``sys.argv[1:]`` when None); usage errors exit with status 2."""
    return cli_parser(prog, with_pipeline=with_pipeline).parse_args(argv)
