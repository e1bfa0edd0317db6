"""The pytest plugin: loaded through its ``pytest11`` entry point, its ``deo_*`` fixtures usable from a
project of one's own, and ``-p no:dstream_exactly_once`` turns it off (pytest run in a subprocess on a
temp project; only the fixtures that start no service are used here — the services' fixtures run in
tests/integration/test_service_reaper.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from dstream_exactly_once.testing import pytest_plugin

ROOT = Path(__file__).resolve().parents[2]

USER_TESTS = '''
def test_uses_the_plugin(deo_app_id, deo_topic_name):
    assert deo_app_id.startswith("app-") and deo_topic_name.startswith("t-")


def test_keeps_its_own_fixture(kafka):
    assert kafka == "the project's own"
'''

USER_CONFTEST = '''
import pytest


@pytest.fixture
def kafka():
    return "the project's own"
'''


def _installed_entry_point(site: Path) -> None:
    """A distribution on ``site`` declaring the plugin's entry point as setup.py does."""
    entry = re.search(r'"pytest11": \["([^"]+)"\]', (ROOT / "setup.py").read_text())
    assert entry is not None, "setup.py declares no pytest11 entry point"
    name, _, module = entry.group(1).partition("=")
    assert (name, module) == (pytest_plugin.PLUGIN_NAME, "dstream_exactly_once.testing.pytest_plugin")
    info = site / "deo_plugin_probe-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deo-plugin-probe\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[pytest11]\n{name} = {module}\n")


def _pytest(project: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_entry_point_loads_the_fixtures_and_no_disables_them(tmp_path: Path) -> None:
    site, project = tmp_path / "site", tmp_path / "project"
    _installed_entry_point(site)
    project.mkdir()
    (project / "test_user.py").write_text(USER_TESTS)
    (project / "conftest.py").write_text(USER_CONFTEST)

    done = _pytest(project, site)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr

    listed = _pytest(project, site, "--fixtures")
    for name in ("deo_kafka", "deo_redis", "deo_redis_cluster", "deo_postgres", "deo_spark_context",
                 "deo_spark_cluster", "deo_spark_connect", "deo_app_id", "deo_topic_name", "deo_redis_url",
                 "deo_postgres_url"):
        assert re.search(rf"^{name} \[session scope\]|^{name}\b", listed.stdout, re.M), name
    assert "kafka -- conftest.py" in listed.stdout or re.search(r"^kafka\b", listed.stdout, re.M)

    off = _pytest(project, site, "-p", f"no:{pytest_plugin.PLUGIN_NAME}")
    assert off.returncode == 1 and "1 passed" in off.stdout and "1 error" in off.stdout, off.stdout + off.stderr
    assert "fixture 'deo_app_id' not found" in off.stdout


def test_every_fixture_is_prefixed_and_documented() -> None:
    fixtures = {n for n, v in vars(pytest_plugin).items() if hasattr(v, "_fixture_function_marker")
                or type(v).__name__ == "FixtureFunctionDefinition"}
    assert len(fixtures) == 11
    assert all(n.startswith("deo_") for n in fixtures)
    assert all(f"``{n}``" in (pytest_plugin.__doc__ or "") for n in fixtures)
    docs = (ROOT / "docs" / "operations.md").read_text()
    assert all(f"`{n}`" in docs for n in fixtures)
