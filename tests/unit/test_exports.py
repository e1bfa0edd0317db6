"""Lock the public surface (httpx's ``test_exported_members`` style).

Adding or removing a public name is an API change: update ``EXPECTED`` in the same commit. The user
docs (README.md, docs/*.md, docs/api/*.rst, examples/) name only the public faces (``FACES``) and names
those export: a ``dstream_exactly_once.x.y`` path into the package's insides fails here (point to the source file,
``kafka/_planner.py``, when a page explains how the code works).
"""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import dstream_exactly_once

EXPECTED = [
    "Assign",
    "BatchIdSink",
    "Broker",
    "CanCommitOffsets",
    "CommitOutcome",
    "ConfigurationError",
    "ConsumerStrategies",
    "DStreamExactlyOnceError",
    "DataLossError",
    "DecodeError",
    "DriverLiveError",
    "ExactlyOnceDStream",
    "FencedError",
    "FileUtils",
    "HasOffsetRanges",
    "KafkaAuthError",
    "KafkaClosedError",
    "KafkaDStream",
    "KafkaMessageAndMetadata",
    "KafkaRDD",
    "KafkaReadStalledError",
    "KafkaRejectedError",
    "KafkaUnavailableError",
    "KafkaUtils",
    "LoadRejectedError",
    "LocationStrategies",
    "OffsetConflictError",
    "OffsetRange",
    "OffsetRangeError",
    "OutputError",
    "PlannedBatch",
    "RetryPolicy",
    "RowRejectedError",
    "ServiceError",
    "SinkError",
    "SkipPlan",
    "SparkConnectUnsupportedError",
    "StoreAuthError",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "StoreVersionError",
    "Subscribe",
    "SubscribePattern",
    "TableConflictError",
    "TopicAndPartition",
    "TransactionalStore",
    "UnknownKafkaParamError",
    "Writes",
    "__version__",
    "await_termination",
    "current_offset_range",
    "current_pieces",
    "current_ranges",
    "exactly_once",
    "open_store",
    "skip_batch",
    "stop_gracefully_on_signals",
    "utf8_decoder",
]

# The Spark 2.4 ``pyspark.streaming.kafka.__all__``: a ported app's imports must keep working.
SPARK_24_NAMES = ["Broker", "KafkaMessageAndMetadata", "KafkaUtils", "OffsetRange", "TopicAndPartition",
                  "utf8_decoder"]


def test_all_is_exactly_the_locked_sorted_list():
    assert dstream_exactly_once.__all__ == EXPECTED
    assert EXPECTED == sorted(EXPECTED)


def test_every_exported_name_is_importable():
    namespace: dict = {}
    exec("from dstream_exactly_once import *", namespace)  # noqa: S102 - the star import users write
    for name in EXPECTED:
        assert getattr(dstream_exactly_once, name) is not None, name
        if not name.startswith("_"):
            assert name in namespace, name


def test_every_public_attribute_is_exported():
    public = {name for name in dir(dstream_exactly_once)
              if not name.startswith("_") and not isinstance(getattr(dstream_exactly_once, name), types.ModuleType)}
    assert public == {name for name in EXPECTED if not name.startswith("_")}


def test_spark_24_names_are_exported():
    assert set(SPARK_24_NAMES) <= set(EXPECTED)


def test_exported_errors_share_one_root():
    for name in EXPECTED:
        value = getattr(dstream_exactly_once, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, dstream_exactly_once.DStreamExactlyOnceError), name


def test_version_is_a_string():
    assert isinstance(dstream_exactly_once.__version__, str) and dstream_exactly_once.__version__


ROOT = Path(__file__).resolve().parents[2]
#: the modules users import from
FACES = ("dstream_exactly_once", "dstream_exactly_once.admin", "dstream_exactly_once.sinks",
         "dstream_exactly_once.sinks.delta", "dstream_exactly_once.sinks.doris", "dstream_exactly_once.stores",
         "dstream_exactly_once.structured", "dstream_exactly_once.testing")
#: dotted names the docs give that are not imported: a logger's name, and the pytest plugin's module for ``-p``
NOT_IMPORTED = {"dstream_exactly_once.core.progress", "dstream_exactly_once.testing.pytest_plugin"}
#: public modules the API reference shows as a whole (their docstring explains a protocol)
DOCUMENTED_MODULES = {"dstream_exactly_once.structured.anchor"}
_DOTTED = re.compile(r"dstream_exactly_once(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _is_public(dotted: str) -> bool:
    """``dotted`` is a face, or a name a face exports (listed in its ``__all__``)."""
    if dotted in FACES or dotted in DOCUMENTED_MODULES:
        return True
    face, _, name = dotted.rpartition(".")
    return face in FACES and (name == "__all__" or name in getattr(importlib.import_module(face), "__all__", ()))


def test_the_face_check_tells_a_face_from_a_deep_path():
    assert _is_public("dstream_exactly_once.current_ranges") and _is_public("dstream_exactly_once.stores.redact_url")
    assert not _is_public("dstream_exactly_once.streaming._task_context.current_ranges")
    assert not _is_public("dstream_exactly_once.stores._url.redact_url")
    assert not _is_public("dstream_exactly_once.admin.no_such_name")


def test_the_docs_name_only_public_faces():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "api").glob("*.rst")),
             *sorted((ROOT / "examples").glob("*"))]
    assert len(pages) > 5
    deep = sorted({f"{page.relative_to(ROOT)}: {dotted}" for page in pages
                   for dotted in _DOTTED.findall(page.read_text(encoding="utf-8"))
                   if dotted not in NOT_IMPORTED and not _is_public(dotted)})
    assert deep == [], "docs name a module path that is not a public face (export the name from a face):\n" + \
        "\n".join(deep)
