"""The broker connection of a command, from ``--bootstrap-servers`` and ``--kafka-params FILE``."""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict

from ..errors import CliError

__all__ = ["kafka_config"]


def kafka_config(args: argparse.Namespace) -> Any:
    """The :class:`KafkaConfig` from ``--bootstrap-servers`` or ``--kafka-params FILE`` (JSON), or None."""
    from ..kafka.params import parse_kafka_params

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
                           f"got {type(loaded).__name__}")
        params.update(loaded)
    if getattr(args, "bootstrap_servers", None):
        params["bootstrap.servers"] = args.bootstrap_servers
    if not params:
        return None
    return parse_kafka_params(params)
