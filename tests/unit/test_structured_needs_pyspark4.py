"""Every public entry of ``dstream_exactly_once.structured`` says that it needs PySpark 4.0 or newer
on a PySpark without the Python Data Source API (``pyspark.sql.datasource``), instead of a bare
``ModuleNotFoundError``. Run in a subprocess: with the module blocked in ``sys.modules`` (as on
PySpark 3.5), and as installed (the PySpark 3.5 suite runs this file on a real 3.5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])

SCRIPT = r"""
import importlib, json, sys
if sys.argv[1] == "block":
    sys.modules["pyspark.sql.datasource"] = None  # as on PySpark 3.5
import pyspark
from dstream_exactly_once.errors import ConfigurationError

class Session:  # register() would call spark.dataSource.register and read spark.conf
    class conf:
        getAll = {}
        @staticmethod
        def get(key, default=None):
            return default
    class dataSource:
        @staticmethod
        def register(source):
            pass

results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "ok"
    except ConfigurationError as exc:
        results[name] = "ConfigurationError: " + str(exc)
    except BaseException as exc:
        results[name] = type(exc).__name__ + ": " + str(exc)

import dstream_exactly_once.structured as structured
attempt("register", lambda: structured.register(Session()))
attempt("register_sinks", lambda: structured.register_sinks(Session()))
for name in structured.__all__:
    if name not in ("register", "register_sinks"):
        attempt(name, lambda name=name: getattr(structured, name))
modules = {"aof": "files.structured._aof", "_spark_store_sink": "structured._spark_store_sink",
           "_spark_doris_sink": "structured._spark_doris_sink", "_spark_kafka_sink": "kafka.structured._spark_sink",
           "_spark_kafka_source": "kafka.structured._spark_source", "sinks": "structured._sinks"}
for name, module in modules.items():
    attempt(name, lambda module=module: importlib.import_module("dstream_exactly_once." + module))
print(json.dumps({"version": pyspark.__version__, "results": results}))
"""


def _run(mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _needs_4(results: dict) -> None:
    assert set(results) >= {"register", "register_sinks", "store_sink_options", "StoreSinkOptions",
                            "doris_sink_options", "DorisSinkOptions", "kafka_sink_options", "KafkaSinkOptions",
                            "aof", "_spark_store_sink", "_spark_doris_sink", "_spark_kafka_sink",
                            "_spark_kafka_source"}
    for name, result in results.items():
        if name == "sinks":  # the module only defines register_sinks, which says it when called
            assert result == "ok", result
            continue
        assert result.startswith("ConfigurationError: ") and "needs PySpark 4.0 or newer" in result, (name, result)
        assert "ModuleNotFoundError" not in result


def test_every_public_entry_says_pyspark_4_is_needed_without_the_data_source_api():
    _needs_4(_run("block")["results"])


def test_as_installed():
    found = _run("installed")
    if int(found["version"].split(".")[0]) >= 4:
        assert set(found["results"].values()) == {"ok"}, found
    else:  # the PySpark 3.5 suite
        _needs_4(found["results"])
