"""``dstream-eo retire``: what an app has stored (dry run), or delete all of it (``--execute``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import CliError, ConfigurationError, DriverLiveError
from ._driver_check import describe_driver
from ._exit_codes import EXIT_OK, EXIT_REFUSED
from ._output import emit_json, print_table

__all__ = ["run_retire"]

_COLUMNS = ["kind", "namespace", "count"]


def run_retire(args: argparse.Namespace, store: Any) -> int:
    """``retire``: print the inventory (dry run) or delete it (``--execute``)."""
    from ..admin._retire import retire_app

    try:
        plan = retire_app(store, store.app_id, execute=args.execute, force=args.force)
    except DriverLiveError as exc:
        raise CliError(str(exc), EXIT_REFUSED) from exc
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        emit_json(plan.to_dict())
        return EXIT_OK
    out = sys.stdout
    if not plan.executed:
        out.write(f"DRY RUN for app {plan.app_id} in {plan.store} (nothing written; add --execute)\n"
                  f"{describe_driver(plan.driver)}\n"
                  f"would delete {plan.total} entries of app {plan.app_id}, and nothing of any other app:\n")
        print_table(plan.items, _COLUMNS, out)
        return EXIT_OK
    out.write(f"retired app {plan.app_id} in {plan.store}: deleted {plan.total} entries in one transaction, fenced "
              f"with epoch {plan.epoch}; a driver of the app still running is refused at its next write\n")
    print_table(plan.items, _COLUMNS, out)
    return EXIT_OK
