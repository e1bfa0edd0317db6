"""The label options of ``dstream-eo in-doubt`` checked against what the store recorded: a
decision made for other labels than the sink's would commit or abort the wrong loads."""

from __future__ import annotations

import re
from typing import Any

from ._cli_common import CliError, read_batch

__all__ = ["check_label_options"]

_LABEL_TAIL = re.compile(r"_(\d+)_(\d+)$")
_OPTIONS = "--label-app-id, --strict-labels and --namespace must be the DorisSink's label_app_id, strict_labels and " \
           "namespace"


def check_label_options(store: Any, sink: Any, gen: Any, table: str) -> None:
    """Refuse options that make other labels than the sink did: a load record of ``table`` in the
    sink's namespace whose label these options cannot produce, or (no record there) a label of a
    logged batch that the store recorded without a load record in that namespace."""
    records = sorted(k for k, v in store.get_values(sink.namespace).items()
                     if isinstance(v, dict) and v.get("table") == table)
    for label in records:
        m = _LABEL_TAIL.search(label)
        if m is None or gen.label(int(m.group(1)), int(m.group(2))) != label:
            made = gen.label(int(m.group(1)), int(m.group(2))) if m else None
            raise CliError(f"the store recorded Doris load label {label!r} for {table} in namespace "
                           f"{sink.namespace!r}, which these options cannot make (they make {made!r} for that "
                           f"batch and partition); {_OPTIONS}")
    if records:
        return
    last = store.last_logged_batch_id()
    for bid in range(last if last is not None else -1, max(-1, (last or 0) - 20), -1):
        b, _ = read_batch(store, bid)
        for i in range(len(b.ranges) if b is not None else 0):
            if store.has_label(gen.label(bid, i)):
                raise CliError(f"the store recorded label {gen.label(bid, i)!r} of batch {bid} but namespace "
                               f"{sink.namespace!r} holds no Doris load record of {table}; {_OPTIONS}")
