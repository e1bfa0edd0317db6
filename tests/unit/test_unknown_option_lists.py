"""An unknown option is refused with the list of EVERY option the reader takes: the file source's own
options and the ones ``FileUtils`` takes itself (``shared.filesystem``, ``hosts``, ``tasks.*``), and the
``aof`` Structured Streaming source's own options. (kafkaParams: ``test_params.py``.)"""

from __future__ import annotations

import ast
from typing import Any, Dict, List

import pytest

from dstream_exactly_once.core._tasks import TASK_OPTIONS
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files._options import OPTIONS as FILE_OPTIONS
from dstream_exactly_once.files.structured._aof_options import parse_aof_options


def _listed(message: str) -> List[str]:
    """The option names of ``…; known options: [...]``."""
    _, _, tail = message.partition("known options: ")
    return list(ast.literal_eval(tail))


class _Conf:
    def __init__(self, pairs: Dict[str, str]) -> None:
        self.pairs = pairs

    def getAll(self) -> List[Any]:  # noqa: N802 - SparkConf's name
        return list(self.pairs.items())


class _SparkContext:
    """What ``FileUtils`` reads of a SparkContext before the stream exists: the conf and the master."""

    master = "local[2]"

    def getConf(self) -> _Conf:  # noqa: N802 - SparkContext's name
        return _Conf({})


def _file_utils_error(options: Dict[str, Any]) -> str:
    pytest.importorskip("pyspark")  # FileUtils is Spark glue; the file source itself needs no Spark
    from pyspark.streaming import StreamingContext

    from dstream_exactly_once.files.spark._utils import _options

    ssc = StreamingContext.__new__(StreamingContext)  # no JVM: only the conf and master are read
    ssc._sc = _SparkContext()  # type: ignore[assignment]
    with pytest.raises(ConfigurationError, match="unknown file source option") as info:
        _options(ssc, options)
    return str(info.value)


def test_file_utils_lists_every_option_it_takes():
    listed = _listed(_file_utils_error({"bytes.maxx": 5}))
    assert set(listed) == {*FILE_OPTIONS, "shared.filesystem", "hosts", *TASK_OPTIONS}
    assert listed == sorted(listed)


def test_aof_source_lists_its_own_options_too():
    with pytest.raises(ConfigurationError, match="unknown file source option 'no.such'") as info:
        parse_aof_options({"path": "/var/log/*.log", "no.such": "1"})
    listed = _listed(str(info.value))
    own = {"path", "max.bytes.per.trigger", "include.file.id", "starting.positions.store", "starting.positions.app",
           "shared.filesystem"}
    assert set(listed) == {*FILE_OPTIONS, *own}  # hosts is refused by the aof source: not offered
