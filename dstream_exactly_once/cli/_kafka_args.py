"""The broker of a command, from ``--bootstrap-servers`` and ``--kafka-params FILE``.

The CLI imports no source: the broker is the live log of the range kind :data:`BROKER_KIND`,
opened by kind (:func:`~dstream_exactly_once.core._live_log.open_live_log`) with these settings,
which the source checks as it checks a stream's.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, Optional

from ..core._live_log import LiveLog, open_live_log
from ..errors import CliError
from ._exit_codes import EXIT_USAGE

__all__ = ["BROKER_KIND", "broker_settings", "open_broker"]

#: The range kind whose live log ``--bootstrap-servers`` and ``--kafka-params`` reach.
BROKER_KIND = "kafka"


def broker_settings(args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """The kafkaParams of ``--kafka-params FILE`` (JSON) with ``--bootstrap-servers`` over them, or None."""
    params: Dict[str, Any] = {}
    path = getattr(args, "kafka_params", None)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                loaded = json.load(f)
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read --kafka-params {path!r}: {exc}") from exc
        if not isinstance(loaded, dict):
            raise CliError(f"--kafka-params {path!r} must hold a JSON object of kafkaParams, "
                           f"got {type(loaded).__name__}", EXIT_USAGE)
        params.update(loaded)
    if getattr(args, "bootstrap_servers", None):
        params["bootstrap.servers"] = args.bootstrap_servers
    return params or None


def open_broker(args: argparse.Namespace) -> Optional[LiveLog]:
    """The broker named by the command's options (the caller closes it), or None when none is."""
    params = broker_settings(args)
    return None if params is None else open_live_log(BROKER_KIND, params)
