"""The ``dstream-eo`` parsers: each command's ``func``, ``--topic`` checked by argparse before any
store is opened, the CLI's error in the library's exception tree, and a package root that holds
only the package's public modules."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List

import pytest

import dstream_exactly_once
from dstream_exactly_once._command_line import topic_partitions
from dstream_exactly_once.cli import _commands as commands
from dstream_exactly_once.cli._main import main
from dstream_exactly_once.cli._offsets import parse_scope
from dstream_exactly_once.cli._parser import cli_parser
from dstream_exactly_once.errors import CliError, DStreamExactlyOnceError


def _leaves(parser: argparse.ArgumentParser, path: List[str]) -> Dict[str, argparse.ArgumentParser]:
    """Every command parser under ``parser`` by its words (``offsets show``), sub-verbs included."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[" ".join([*path, name])] = sub
                out.update(_leaves(sub, [*path, name]))
    return out


def test_every_command_binds_its_function():
    bound = {words: sub.get_default("func") for words, sub in _leaves(cli_parser(), []).items()}
    assert bound == {"demo": commands.demo, "chart": commands.chart, "lag": commands.lag,
                     "batches": commands.batches, "batches skip": commands.batches_skip,
                     "in-doubt": commands.in_doubt, "delta": None, "delta status": commands.delta_status,
                     "delta orphans": commands.delta_orphans, "offsets": None, "offsets show": commands.offsets_show,
                     "offsets reset": commands.offsets_reset, "offsets export": commands.offsets_export,
                     "retire": commands.retire}


@pytest.mark.parametrize("argv, func", [
    (["batches", "--store", "sqlite:///x.db", "--app", "a"], commands.batches),
    (["batches", "skip", "--store", "sqlite:///x.db", "--app", "a", "--batch", "3"], commands.batches_skip),
    (["offsets", "reset", "--store", "s", "--app", "a", "--to-latest"], commands.offsets_reset),
    (["lag", "--store", "s"], commands.lag),
    (["retire", "--store", "s", "--app", "a", "--execute"], commands.retire),
])
def test_the_parsed_command_is_the_one_that_runs(argv, func):
    assert cli_parser().parse_args(argv).func is func


@pytest.mark.parametrize("text, expected", [
    ("events", ("events", None)), ("events:2,0,2", ("events", (0, 2))), ("my.topic-1:7", ("my.topic-1", (7,))),
])
def test_topic_partitions_reads_a_topic_and_its_partitions(text, expected):
    assert topic_partitions(text) == expected


def test_repeated_topics_are_merged():
    assert parse_scope([("t", (0,)), ("t", (2, 0)), ("u", None)]) == {"t": [0, 2], "u": None}
    assert parse_scope([("t", (1,)), ("t", None), ("t", (3,))]) == {"t": None}
    assert parse_scope(None) is None and parse_scope([]) is None


@pytest.mark.parametrize("verb", [["offsets", "show"], ["offsets", "reset", "--to-latest"]])
@pytest.mark.parametrize("value, allowed", [
    ("events:x", "integers >= 0"), ("events:", "integers >= 0"), ("events:-1", "integers >= 0"),
    ("events:1,,2", "integers >= 0"), (":0", "a topic name"), ("", "a topic name"),
])
def test_a_bad_topic_is_a_usage_error_before_the_store_is_opened(verb, value, allowed, tmp_path, capsys):
    db = tmp_path / "fresh.db"
    with pytest.raises(SystemExit) as exc:
        main([*verb, "--store", f"sqlite:///{db}", "--app", "a", "--topic", value])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert len(err.splitlines()) == 1 and "argument --topic" in err and repr(value) in err and allowed in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_cli_error_is_in_the_exception_tree():
    err = CliError("refused", 3)
    assert isinstance(err, DStreamExactlyOnceError) and err.code == 3 and str(err) == "refused"
    assert CliError("failed").code == 1
    assert "CliError" in (dstream_exactly_once.errors.__doc__ or "")


def test_the_package_root_holds_only_public_names_errors_and_shared_helpers():
    root = Path(dstream_exactly_once.__file__).parent
    modules = {p.stem for p in root.glob("*.py")}
    allowed = {"__init__", "__main__", "_version", "errors", "redaction", "_redaction", "_checks", "_command_line",
               "_moved"}
    assert modules <= allowed, sorted(modules - allowed)
    assert (root / "cli" / "__main__.py").is_file()
