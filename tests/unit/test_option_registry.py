"""The option registry: one entry per entry point, the tables in docs/options.md generated from it and
current, aliases, and the registry agreeing with the tables the readers themselves use."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dstream_exactly_once.cli._option_entries import every_entry_point
from dstream_exactly_once.cli._options_doc import BEGIN, END, render, rewrite
from dstream_exactly_once.core._options import REQUIRED, Option
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.option_registry import EntryPoint, entry_point, entry_points, option_count

DOCS = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_docs_option_tables_are_the_registry_rendered():
    text = DOCS.read_text(encoding="utf-8")
    assert rewrite(text) == text, "docs/options.md is out of date: run `make options-doc`"


def test_every_option_is_documented_with_its_default_and_allowed_values_and_nothing_else():
    text = DOCS.read_text(encoding="utf-8")
    generated = text[text.index(BEGIN):text.index(END)]
    sections = re.split(r"^#### `(.+)`$", generated, flags=re.M)[1:]
    documented = dict(zip(sections[::2], sections[1::2], strict=True))
    assert set(documented) == {e.name for e in every_entry_point()}
    for e in every_entry_point():
        rows = [r for r in documented[e.name].splitlines() if r.startswith("| `")]
        names = [re.findall(r"`([^`]+)`", r.split(" | ")[0])[0] for r in rows]
        assert names == list(e.keys), e.name
        for option, row in zip(e.options, rows, strict=True):
            cells = row.split(" | ")
            for allowed in option.allowed:
                assert f"`{allowed}`" in cells[1] or allowed == "" and "`''`" in cells[1], (e.name, option.key)
            if option.required:
                assert cells[2] == "**required**", (e.name, option.key)
            elif option.default not in (None, ()):
                shown = str(option.default).lower() if isinstance(option.default, bool) and e.form != "keywords" \
                    else str(option.default) or "''"
                assert cells[2] == f"`{shown}`", (e.name, option.key, cells[2])


def test_the_registry_lists_every_entry_point_once_and_reports_its_size():
    names = [e.name for e in every_entry_point()]
    assert len(names) == len(set(names))
    for expected in ("KafkaUtils.createDirectStream", "KafkaUtils.createExactlyOnceStream", "KafkaUtils.createRDD",
                     "FileUtils.createDirectFileStream", "FileUtils.createExactlyOnceFileStream", "commit_each_batch",
                     "commit_each_partition", "foreach_batch", "write_each_partition", "aof", "deo-store",
                     "deo-doris", "deo-kafka", "store_sink_options", "doris_sink_options", "kafka_sink_options",
                     "kafkaParams", "file options", "SparkConf", "sqlite:// URL", "postgresql:// URL",
                     "redis:// URL", "dstream-eo offsets reset", "dstream-eo batches skip", "dstream-eo retire"):
        assert expected in names
    assert option_count() == sum(len(e.options) for e in entry_points()) > 200
    assert option_count(every_entry_point()) > option_count()  # the dstream-eo commands' options join
    assert [e.name for e in entry_points()] == [n for n in names if not n.startswith("dstream-eo ")]
    with pytest.raises(ConfigurationError, match=r"unknown entry point 'createStreem'.*'KafkaUtils.createRDD'"):
        entry_point("createStreem")


def test_the_registry_agrees_with_the_readers_own_tables():
    from dstream_exactly_once.core._tasks import TASK_OPTIONS
    from dstream_exactly_once.files._options import OPTIONS
    from dstream_exactly_once.kafka._params import known_kafka_params
    from dstream_exactly_once.kafka.structured._sink import _OWN_OPTIONS, _STORE_OPTIONS
    from dstream_exactly_once.stores.redis._store import _OPTIONS as REDIS_OPTIONS
    from dstream_exactly_once.structured._doris_sink import _DORIS_OPTIONS
    from dstream_exactly_once.structured._store_sink import _KNOWN_OPTIONS

    files = entry_point("file options")
    assert set(files.keys) == {*OPTIONS, *TASK_OPTIONS, "shared.filesystem", "hosts"}
    for key, option in OPTIONS.items():
        mine = files.option(key)
        assert (mine.kind, mine.default, mine.low, mine.high, mine.allowed) == \
            (option.kind, option.default, option.low, option.high, option.allowed)
    kafka = entry_point("kafkaParams")
    assert {s for o in kafka.options for s in (o.key, *o.aliases)} == set(known_kafka_params())
    assert set(entry_point("redis:// URL").keys) == set(REDIS_OPTIONS)
    def spellings(name):
        return {s for o in entry_point(name).options for s in (o.key, *o.aliases)}
    assert spellings("deo-store") | {"path"} == set(_KNOWN_OPTIONS)
    assert spellings("deo-doris") == {*_STORE_OPTIONS, *_DORIS_OPTIONS}
    assert spellings("deo-kafka") == {*_STORE_OPTIONS, *_OWN_OPTIONS, "kafka.bootstrap.servers"}


def test_aliases_resolve_to_one_option_and_both_spellings_must_agree():
    entry = EntryPoint("x", "options", "test", (Option("new.name", "int", 1, "d", aliases=("old_name",)),),
                       case_insensitive=True)
    assert entry.canonical({"OLD_NAME": 3}) == {"new.name": 3}
    assert entry.canonical({"old_name": 3, "new.name": 3}) == {"new.name": 3}
    with pytest.raises(ConfigurationError, match="'old_name' and 'new.name' name one option"):
        entry.canonical({"old_name": 3, "new.name": 4})
    assert entry.check({"old_name": "7"}) == {"new.name": 7}
    with pytest.raises(ConfigurationError, match=r"unknown option 'nwe.name' in x; known options: \['new.name'\]"):
        entry.check({"nwe.name": 1})
    assert entry_point("kafkaParams").option("metadata.broker.list").key == "bootstrap.servers"


def test_secret_options_never_show_their_value():
    secret = Option("pw", "str", REQUIRED, "a password", secret=True)
    with pytest.raises(ConfigurationError) as info:
        secret.parse("")
    assert "hidden" in str(info.value)
    assert {o.key for e in every_entry_point() for o in e.options if o.secret} >= {
        "sasl.plain.password", "ssl.key.password", "store.password", "doris.password", "password"}


def test_render_refuses_an_entry_point_without_a_section():
    with pytest.raises(ValueError, match="without a section"):
        render([EntryPoint("odd", "keywords", "nowhere", ())])


def test_checking_a_keyword_argument_loads_no_cli():
    """The library checks its arguments through the registry; the CLI sits above it and stays unloaded."""
    code = ("import sys; from dstream_exactly_once.option_registry import keyword_checks; "
            "keyword_checks('KafkaUtils.createRDD', kafkaParams={'bootstrap.servers': 'h:9092'}); "
            "print(sorted(m for m in sys.modules if m.startswith('dstream_exactly_once.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
