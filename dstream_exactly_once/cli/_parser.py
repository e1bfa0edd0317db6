"""The ``dstream-eo`` parser: ``--version``, ``demo`` and the operator commands (no Spark import).

Usage errors print one line (``<prog>: error: …``) and exit with status 2, as argparse does, but
without the usage block; every range check names the option, the bad value and what is allowed.
"""

from __future__ import annotations

import argparse
from typing import Optional

from .._command_line import OneLineParser, int_at_least, non_empty
from .._version import __version__
from . import _commands as commands
from ._exit_codes import EXIT_CODES_HELP
from ._operator_parsers import add_operator_commands

__all__ = ["OneLineParser", "cli_parser", "parse"]


def add_demo_arguments(demo: argparse.ArgumentParser) -> None:
    """The ``demo`` subcommand's options."""
    demo.set_defaults(func=commands.demo)
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
                           "matplotlib, the 'chart' extra)")


def cli_parser(prog: str = "dstream-eo") -> OneLineParser:
    """The ``dstream-eo`` parser; each command's ``func`` default is what it runs (:mod:`._commands`)."""

    p = OneLineParser(prog=prog, description="dstream-exactly-once: WAL-free direct Kafka DStreams for "
                      "PySpark with exactly-once output.", epilog=EXIT_CODES_HELP,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=OneLineParser)
    add_demo_arguments(sub.add_parser("demo", help="sum 1..N through a local Kafka broker and Spark twice "
                                      "(at-least-once and exactly-once), SIGKILL the driver at each crash "
                                      "point, compare"))
    add_operator_commands(sub)
    return p


def parse(prog: str, argv: Optional[list[str]]) -> argparse.Namespace:
    """Parse ``argv`` (``sys.argv[1:]`` when None); usage errors exit with status 2."""
    return cli_parser(prog).parse_args(argv)
