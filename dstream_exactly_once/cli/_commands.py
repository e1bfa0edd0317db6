"""What each ``dstream-eo`` verb runs: the parsers bind these with ``set_defaults(func=…)``.

Each takes the parsed arguments and returns the exit status. The verb's module is imported when
the verb runs, so parsing (``--help``, ``--version``, usage errors) imports neither Spark nor a
Kafka or store client.
"""

from __future__ import annotations

import argparse

__all__ = ["batches", "batches_skip", "chart", "delta_orphans", "delta_status", "demo", "in_doubt", "lag",
           "offsets_reset", "offsets_show", "retire"]


def demo(args: argparse.Namespace) -> int:
    """``dstream-eo demo``: the at-least-once vs exactly-once teaching demo."""
    from ..teaching._show import run_demo
    from ._chart import run_chart

    return run_demo(args, chart_progress=run_chart)


def chart(args: argparse.Namespace) -> int:
    """``dstream-eo chart``: a progress JSON-lines file as a PNG."""
    from ._chart import run_chart

    return run_chart(args)


def lag(args: argparse.Namespace) -> int:
    """``dstream-eo lag``: one line per app of the store."""
    from ._batches import run_lag

    return run_lag(args, args.store)


def batches_skip(args: argparse.Namespace) -> int:
    """``dstream-eo batches skip``: skip pending batches (dry run unless ``--execute``)."""
    from ._batches import run_skip

    return run_skip(args)


def batches(args: argparse.Namespace) -> int:
    """``dstream-eo batches``: the newest batches of the offset log and commit log."""
    from ._batches import check_batches_args, run_batches
    from ._store_access import open_cli_store

    check_batches_args(args)
    with open_cli_store(args.store, args.app) as store:
        return run_batches(args, store)


def in_doubt(args: argparse.Namespace) -> int:
    """``dstream-eo in-doubt``: Doris two-phase loads of uncommitted batches."""
    from ._batches import run_in_doubt
    from ._store_access import open_cli_store

    with open_cli_store(args.store, args.app) as store:
        return run_in_doubt(args, store)


def offsets_show(args: argparse.Namespace) -> int:
    """``dstream-eo offsets show``: positions, log ends, lag and last batch per partition."""
    from ._offsets import show
    from ._store_access import open_cli_store

    with open_cli_store(args.store, args.app) as store:
        return show(args, store)


def offsets_reset(args: argparse.Namespace) -> int:
    """``dstream-eo offsets reset``: plan new positions; ``--execute`` applies them."""
    from ._reset import run_reset
    from ._store_access import open_cli_store

    with open_cli_store(args.store, args.app) as store:
        return run_reset(args, store)


def offsets_export(args: argparse.Namespace) -> int:
    """``dstream-eo offsets export``: the committed Kafka offsets as Spark's Kafka source takes them."""
    from ..admin._export import export_offsets
    from ._store_access import open_cli_store

    with open_cli_store(args.store, args.app) as store:
        print(export_offsets(store, args.format))
    return 0


def retire(args: argparse.Namespace) -> int:
    """``dstream-eo retire``: delete everything stored of an app (dry run unless ``--execute``)."""
    from ._retire import run_retire
    from ._store_access import open_cli_store

    with open_cli_store(args.store, args.app) as store:
        return run_retire(args, store)


def delta_status(args: argparse.Namespace) -> int:
    """``dstream-eo delta status``: the last batch the Delta sink committed to a table."""
    from ._delta import run_delta_status

    return run_delta_status(args)


def delta_orphans(args: argparse.Namespace) -> int:
    """``dstream-eo delta orphans``: unreferenced data files of a Delta table (dry run unless ``--apply``)."""
    from ._delta import run_delta_orphans

    return run_delta_orphans(args)
