"""Node-local files per host (files/_hosts.py): host names, the executor-side check, per-host planning.

The host runner is a stand-in for Spark's pinned tasks: it pickles each payload (as shipping it to an
executor would), runs the function with ``SPARK_LOCAL_IP`` set to the host it claims to run on, and
pickles the result back.
"""

from __future__ import annotations

import pickle
import socket

import pytest

from dstream_exactly_once.core._ranges import Position
from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files import FileRange, FileRangeReader
from dstream_exactly_once.files._hosts import (
    HostCheckedReader,
    HostFilePlanner,
    check_host,
    local_host_names,
    parse_hosts,
)


@pytest.fixture(autouse=True)
def _no_spark_host_env(monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME", raising=False)
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)


def runner_on(monkeypatch, placed=None):
    """A HostRunner: runs each payload "on" its host (or on ``placed`` — a task Spark put elsewhere)."""
    calls = []

    def run(items, fn):
        out = []
        for host, payload in items:
            monkeypatch.setenv("SPARK_LOCAL_IP", placed or host)
            calls.append(host)
            out.append(pickle.loads(pickle.dumps(fn(pickle.loads(pickle.dumps(payload))))))
        monkeypatch.delenv("SPARK_LOCAL_IP")
        return out

    run.calls = calls
    return run


def test_parse_hosts():
    assert parse_hosts(" n1, n2 ,n1") == ("n1", "n2")
    assert parse_hosts(["10.0.0.5", "10.0.0.6"]) == ("10.0.0.5", "10.0.0.6")
    for bad in ("", "n1,,n2", "n 1", 7, ["n1", 2]):
        with pytest.raises(ConfigurationError, match=r"option 'hosts' must"):
            parse_hosts(bad)


def test_local_host_names_follow_spark_env(monkeypatch):
    assert socket.gethostname() in local_host_names()
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.2")
    assert local_host_names() == {"127.0.0.2"}  # Spark's own address for the executor decides
    monkeypatch.setenv("SPARK_LOCAL_HOSTNAME", "node7")
    assert local_host_names() == {"127.0.0.2", "node7"}


def test_check_host_fails_clearly_on_the_wrong_host(monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.2")
    check_host("127.0.0.2", "reading x")
    with pytest.raises(ConfigurationError, match=r"reading x must run on host '127\.0\.0\.1'.*runs on "
                                                 r"\['127\.0\.0\.2'\].*spark\.locality\.wait"):
        check_host("127.0.0.1", "reading x")


def test_reader_refuses_a_range_of_another_host_before_opening_it(tmp_path, monkeypatch):
    log = tmp_path / "a.log"
    log.write_text("1\n2\n")
    plain = FileRangeReader(f"{tmp_path}/*.log")
    reader = HostCheckedReader(plain)
    r = FileRange("f1", str(log), 0, 4, dev=log.stat().st_dev, inode=log.stat().st_ino, host="127.0.0.1")
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.2")
    with pytest.raises(ConfigurationError, match=r"must run on host '127\.0\.0\.1'"):
        list(reader.read(r))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    assert list(reader.read(r)) == ["1", "2"]
    assert list(reader.read(FileRange("f1", str(log), 0, 4, dev=r.dev, inode=r.inode))) == ["1", "2"]  # no host


def _read_all(planner, ranges, monkeypatch):
    out = []
    for r in ranges:
        monkeypatch.setenv("SPARK_LOCAL_IP", r.host)
        out.extend(planner.reader().read(r))
    return out


def test_per_host_planning_runs_on_each_host_and_resumes(tmp_path, monkeypatch):
    log = tmp_path / "service.log"
    log.write_text("a\nb\n")
    run = runner_on(monkeypatch)
    planner = HostFilePlanner(f"{tmp_path}/*.log", ["h1", "h2"], run)
    planner.start({})
    ranges = planner.plan()
    assert run.calls == ["h1", "h2", "h1", "h2"]  # start, then plan: once per host, on that host
    # one filesystem here, so each "host" sees the file: two identities, one per host, never merged
    assert sorted((r.host, r.from_byte, r.until_byte) for r in ranges) == [("h1", 0, 4), ("h2", 0, 4)]
    assert len({r.position_key for r in ranges}) == 2
    assert _read_all(planner, ranges, monkeypatch) == ["a", "b", "a", "b"]
    with open(log, "a") as f:
        f.write("c\n")
    # a restarted driver: positions from the store (each names its host), the planners rebuilt on their hosts
    stored = {r.position_key: Position(r.end, r.position_meta()) for r in ranges}
    again = HostFilePlanner(f"{tmp_path}/*.log", ["h1", "h2"], runner_on(monkeypatch))
    again.start(stored)
    more = again.plan()
    assert sorted((r.host, r.from_byte, r.until_byte) for r in more) == [("h1", 4, 6), ("h2", 4, 6)]
    assert {r.position_key for r in more} == set(stored)
    assert again.tracked().keys() == stored.keys()
    assert again.counters["losses"] == 0


def test_advance_routes_replayed_ranges_to_their_host(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_text("x\n")
    first = HostFilePlanner(f"{tmp_path}/*.log", ["h1", "h2"], runner_on(monkeypatch))
    first.start({})
    replayed = first.plan()
    second = HostFilePlanner(f"{tmp_path}/*.log", ["h1", "h2"], runner_on(monkeypatch))
    second.start({})
    second.advance(replayed)
    assert second.plan() == []  # the replayed ranges are not planned again on either host
    with pytest.raises(ConfigurationError, match=r"names host None"):
        second.advance([FileRange("f9", str(tmp_path / "a.log"), 0, 2)])


def test_positions_of_an_unlisted_host_are_refused(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_text("x\n")
    first = HostFilePlanner(f"{tmp_path}/*.log", ["h1", "h2"], runner_on(monkeypatch))
    first.start({})
    stored = {r.position_key: Position(r.end, r.position_meta()) for r in first.plan()}
    only_h1 = HostFilePlanner(f"{tmp_path}/*.log", ["h1"], runner_on(monkeypatch))
    with pytest.raises(ConfigurationError, match=r"was read on host 'h2', which option 'hosts' \('h1'\)"):
        only_h1.start(stored)


def test_planning_task_placed_on_another_host_fails(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_text("x\n")
    planner = HostFilePlanner(f"{tmp_path}/*.log", ["h1", "h2"], runner_on(monkeypatch, placed="h3"))
    with pytest.raises(ConfigurationError, match=r"must run on host 'h1'.*runs on \['h3'\]"):
        planner.start({})


def test_retired_positions_of_every_host_are_offered_and_forgotten(tmp_path, monkeypatch):
    log = tmp_path / "a.log"
    log.write_text("x\n")
    planner = HostFilePlanner(f"{tmp_path}/*.log", ["h1", "h2"], runner_on(monkeypatch))
    planner.start({})
    keys = {r.position_key for r in planner.plan()}
    assert planner.retired_positions() == []
    log.unlink()  # read to its end, then deleted: gone on both hosts
    planner.plan()
    assert set(planner.retired_positions()) == keys and len(keys) == 2
    planner.forget_positions(sorted(keys))
    assert planner.retired_positions() == [] and planner.tracked() == {}
