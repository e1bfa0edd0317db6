"""Doris Stream Load: an HTTP client for the protocol and an exactly-once DStream sink on top of it.

Modules: ``_transport.py`` (HTTP on a raw socket: ``Expect: 100-continue``, redirects to the BE,
timeouts), ``_protocol.py`` (states, results, bodies, answer patterns), ``_settings.py`` and
``_retry.py`` (attempt outcomes, retried by the core retry policy), ``_client.py``
(:class:`DorisStreamLoadClient`: loads, label state, commit/abort, in-doubt resolution) and
``_sink.py`` (:class:`DorisSink`, which uses only the client's public methods).

Protocol (Apache Doris "Stream Load" and "Stream Load 2PC" docs)
----------------------------------------------------------------
``PUT http://fe/api/{db}/{table}/_stream_load`` with the rows as the body and the load options as
headers (``label``, ``format``, ``columns``, ``column_separator``, ``timeout``, …), basic auth and
``Expect: 100-continue``. The FE answers ``307`` with a BE address *before* the body is sent; the
client re-sends the request — credentials and body included, like ``curl --location-trusted`` —
to the BE, which loads the rows and answers a JSON document whose ``Status`` is:

- ``Success`` / ``Publish Timeout`` — loaded (the latter becomes visible shortly);
- ``Label Already Exists`` — this label was used before; ``ExistingJobStatus`` says whether that
  job is ``FINISHED`` (its rows are in: a replay, nothing loaded now), ``RUNNING`` (another attempt
  is loading it: wait) or ``PRECOMMITTED`` (a two-phase transaction holds it: in doubt);
- ``Fail`` — nothing loaded; the label may be used again.

With ``two_phase_commit: true`` a successful load is only *pre-committed*: invisible, holding its
label, with a ``TxnId``. ``PUT /api/{db}/_stream_load_2pc`` with ``txn_operation: commit|abort``
and ``txn_id`` (or ``label``) finishes it. Doris aborts a pre-committed transaction after
``stream_load_default_precommit_timeout_second`` (1 h) and forgets finished labels after
``streaming_label_keep_max_second`` (12 h). ``GET /api/{db}/get_load_state?label=…`` reports a
label's state: ``PREPARE``, ``PRECOMMITTED``, ``COMMITTED``, ``VISIBLE``, ``ABORTED`` or ``UNKNOWN``.

Who decides (two-phase mode)
----------------------------
The offset store is the single source of truth. For each partition of a batch:

1. the label's store record is checked: already recorded → the partition was committed before; make
   sure its Doris transaction is committed and report a replay;
2. the rows are pre-committed under the deterministic label (one Stream Load per partition);
3. ONE store transaction records the label, the transaction id and the partition's new offsets
   (offset compare-and-set + epoch check) — this is the commit point;
4. the Doris transaction is committed (``already committed`` counts as success).

A crash between 2 and 3 leaves a pre-committed transaction the store does not know: it is aborted
(by the failing writer itself, or by :meth:`DorisSink.recover` after a restart took a new epoch,
or by Doris after the pre-commit timeout) and the replay loads the rows again. A crash between 3
and 4 leaves one the store recorded: the next attempt or :meth:`DorisSink.recover` commits it.
Only the writer that created a transaction records it, and other parties abort only transactions
of fenced (older-epoch) writers, so a transaction the store recorded is never aborted by us.

Delivery guarantee
------------------
- two-phase mode (default): exactly-once, provided an in-doubt transaction is resolved within
  Doris's pre-commit timeout (1 h). Past it Doris has aborted data the store counted; recovery
  then raises :class:`~dstream_exactly_once.errors.LoadRejectedError` (a ``SinkError``) naming
  the label (loud, not silent).
- labels only (``two_phase_commit=False``): exactly-once while a replay happens within Doris's
  label memory (12 h): a re-sent load finds ``Label Already Exists`` and is counted as a replay.
  An older replay loads the rows again (at-least-once for that partition).
- labels disabled (``use_labels=False``): at-least-once — a crash between the load and the store
  commit loads the partition twice on replay.
"""

from __future__ import annotations

from ._client import DorisStreamLoadClient
from ._protocol import LoadResult, LoadState, TxnOutcome
from ._sink import DorisSink, PartitionWrite
from ._transport import HttpResponse, HttpTransport

__all__ = [
    "DorisSink",
    "DorisStreamLoadClient",
    "HttpResponse",
    "HttpTransport",
    "LoadResult",
    "LoadState",
    "PartitionWrite",
    "TxnOutcome",
]
