"""Every code block of README.md and docs/*.md runs in a test or is marked a fragment.

Unmarked blocks run here, in page order, in one process (``doc_snippets_proc.py``) against the local
services, with the documentation's placeholders replaced (``SUBSTITUTIONS``); the results the README
promises are then read back and checked. Blocks marked ``<!-- test: NAME -->`` run in the test that
names them (a Spark cluster, a broker with SASL); ``<!-- fragment -->`` blocks are never run. The
test prints how many of each there are.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dstream_exactly_once import __version__, open_store

from .. import docblocks

ROOT = Path(__file__).resolve().parents[2]
PROC = Path(__file__).with_name("doc_snippets_proc.py")
TEXT = ["to be or not to be"] * 40 + ["that is the question"] * 25
LOG_LINES = ["INFO started"] * 30 + ["WARN slow disk"] * 12 + ["ERROR lost connection"] * 3


def test_artifact_names_in_the_docs_carry_the_package_version():
    """The file names ``make dist`` writes, as README.md and docs/ spell them, are this version's."""
    named = re.compile(r"dstream_exactly_once-(\d+\.\d+\.\d+)")
    found = {(b.where, v) for b in docblocks.all_blocks() for v in named.findall(b.text)}
    assert found, "no block names a built artifact"
    assert {v for _w, v in found} == {__version__}, sorted(found)


def test_sources_name_every_marked_test():
    """A block marked ``<!-- test: NAME -->`` is really taken by a test (its NAME is in a test file)."""
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    names = {b.test for b in docblocks.all_blocks() if b.mark == "test"}
    assert names, "no block is marked as run by another test"
    missing = sorted(n for n in names if f'"{n}"' not in sources)
    assert not missing, f"blocks marked <!-- test: NAME --> that no test runs: {missing}"


@pytest.mark.slow  # ~2 min: one Spark driver runs every block
@pytest.mark.pyspark4  # the README's Structured Streaming block
def test_unmarked_blocks_run_against_the_local_services(kafka, topic_name, postgres_url, tmp_path):
    blocks = docblocks.all_blocks()
    here = [b for b in blocks if b.mark == ""]
    bad = [f"{b.where} ({b.info or 'no language'})" for b in here if b.info not in ("python", "sh")]
    assert not bad, f"unmarked blocks that are neither python nor sh (mark them <!-- fragment -->): {bad}"

    kafka.create_topic(topic_name, 2)
    kafka.produce(topic_name, TEXT, partitions=2)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "service.log").write_text("".join(line + "\n" for line in LOG_LINES))
    subs = {"broker:9092": kafka.bootstrap, '"events"': f'"{topic_name}"',
            "/var/log/app/service.log*": f"{logs}/service.log*",
            "postgresql://deo:secret@db:5432/streams": postgres_url}
    plan = [{"where": b.where, "page": b.page, "info": b.info,
             "text": _replace_all(b.text, subs)} for b in here]
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false "
                                  "--conf spark.sql.shuffle.partitions=2 pyspark-shell"}
    done = subprocess.run([sys.executable, str(PROC), str(tmp_path / "plan.json")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    ran = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("RAN ")]
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    assert ran == [b.where for b in here]

    # what the README's blocks promise
    url = f"sqlite:///{work / 'state.db'}"
    with open_store(url, "wordcount") as store:
        assert Counter(store.get_values("words")) == Counter(" ".join(TEXT).split())
        assert store.pending_batches() == []
    with open_store(url, "logs") as store:
        assert store.get_values("logs") == {"lines": len(LOG_LINES)}
    with open_store(url, "levels") as store:
        assert store.get_values("levels") == dict(Counter(line.split()[0] for line in LOG_LINES))
    assert "'to': 80" in done.stdout, done.stdout[-3000:]

    counts = Counter(b.mark or "ran" for b in blocks)
    print(f"\ndocumentation code blocks: {len(blocks)} in {len(docblocks.pages())} pages; "
          f"{counts['ran']} ran here, {counts['test']} run by the tests that name them, "
          f"{counts['fragment']} marked fragments")
    for b in here:
        print(f"  ran {b.where} ({b.info})")


def _replace_all(text: str, subs: dict) -> str:
    for key, value in subs.items():
        text = text.replace(key, value)
    return text
