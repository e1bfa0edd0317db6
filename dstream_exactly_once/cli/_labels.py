"""The label options of ``dstream-eo in-doubt`` checked against what the store recorded: a
decision made for other labels than the sink's would commit or abort the wrong loads."""

from __future__ import annotations

import re
from typing import Any

from ..errors import CliError
from ._exit_codes import EXIT_USAGE
from ._store_access import read_batch

__all__ = ["OPTIONS_HINT", "check_label_options"]

_LABEL_TAIL = re.compile(r"_(\d+)_(\d+)$")
#: The fix named by every refusal of :func:`check_label_options`.
OPTIONS_HINT = ("--label-app-id, --strict-labels and --namespace must be the DorisSink's label_app_id, strict_labels "
                "and namespace")


def check_label_options(store: Any, sink: Any, gen: Any, table: str) -> None:
    """Refuse options that make other labels than the sink did. Evidence, newest first:

    * a load record of ``table`` in the sink's namespace whose label these options cannot make;
    * a committed batch of the offset log none of whose labels (as these options make them) the
      store recorded — the sink records one per partition of every batch it commits;
    * a recorded label without a load record in the namespace (the sink used another namespace).
    """
    records = sorted(k for k, v in store.get_values(sink.namespace).items()
                     if isinstance(v, dict) and v.get("table", table) == table)
    for label in records:
        m = _LABEL_TAIL.search(label)
        made = gen.label(int(m.group(1)), int(m.group(2))) if m else None
        if made != label:
            raise CliError(f"the store recorded Doris load label {label!r} for {table} in namespace "
                           f"{sink.namespace!r}, which these options cannot make (they make {made!r} for that "
                           f"batch and partition); {OPTIONS_HINT}", EXIT_USAGE)
    last = store.last_logged_batch_id()
    committed_seen = 0
    for bid in range(last if last is not None else -1, max(-1, (last or 0) - 50), -1):
        b, _ = read_batch(store, bid)
        if b is None or not b.ranges or not store.is_committed(bid):
            continue
        labels = [gen.label(bid, i) for i in range(len(b.ranges))]
        recorded = [label for label in labels if store.has_label(label)]
        if not recorded and committed_seen == 0:
            raise CliError(f"committed batch {bid} has none of the labels these options make (e.g. {labels[0]!r}) "
                           f"recorded in the store; {OPTIONS_HINT}", EXIT_USAGE)
        missing = [label for label in recorded if label not in records]
        if missing:
            raise CliError(f"the store recorded label {missing[0]!r} of batch {bid} but namespace "
                           f"{sink.namespace!r} holds no Doris load record of it; {OPTIONS_HINT}", EXIT_USAGE)
        committed_seen += 1
        if committed_seen >= 3:
            return
