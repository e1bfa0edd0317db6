"""The deployment options both forms of the file source share (``files/_deployment.py``): where a value
was given, which spelling wins, and the master check each form applies."""

from __future__ import annotations

import pytest

from dstream_exactly_once.errors import ConfigurationError
from dstream_exactly_once.files._deployment import (
    check_master,
    is_local_master,
    take_option,
    take_shared_filesystem,
)
from dstream_exactly_once.files.structured._aof_options import parse_aof_options


def test_take_option_prefers_options_over_conf_and_removes_every_spelling():
    options = {"hosts": "a", "spark.aof.hosts": "b", "bytes.max": 10}
    conf = {"spark.aof.hosts": "c", "spark.aof.bytes.max": 5}
    assert take_option(options, conf, "hosts") == ("b", "option 'spark.aof.hosts'")
    assert options == {"bytes.max": 10} and conf == {"spark.aof.bytes.max": 5}
    assert take_option({}, {"spark.aof.hosts": "c"}, "hosts") == ("c", "Spark conf 'spark.aof.hosts'")
    assert take_option({}, {}, "hosts") is None


def test_shared_filesystem_is_true_or_false_naming_where_it_was_given():
    assert take_shared_filesystem({}, {}) is False
    assert take_shared_filesystem({"shared.filesystem": "TRUE"}, {}) is True
    with pytest.raises(ConfigurationError, match=r"Spark conf 'spark.aof.shared.filesystem' must be true or "
                                                 r"false, got 'yes'"):
        take_shared_filesystem({}, {"spark.aof.shared.filesystem": "yes"})


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,4]", "local-cluster[2,1,1024]"])
def test_local_masters_need_no_declaration(master):
    assert is_local_master(master)
    check_master(master, False, node_local=True)


def test_a_cluster_master_is_refused_with_each_forms_way_out():
    with pytest.raises(ConfigurationError) as dstreams:
        check_master("spark://m:7077", False, node_local=True)
    assert "'hosts'='host1,host2'" in str(dstreams.value) and "'shared.filesystem'=true" in str(dstreams.value)
    with pytest.raises(ConfigurationError) as aof:
        check_master("yarn", False, node_local=False)
    assert "cannot pin a partition to a host" in str(aof.value) and "'hosts'" not in str(aof.value)
    check_master("yarn", True, node_local=False)


def test_aof_reads_the_shared_options_from_conf_too():
    with pytest.raises(ConfigurationError, match="Spark conf 'spark.aof.shared.filesystem'"):
        parse_aof_options({"path": "/l/*"}, {"spark.aof.shared.filesystem": "maybe"}, "yarn")
    assert parse_aof_options({"path": "/l/*"}, {"spark.aof.shared.filesystem": "true"}, "yarn").path == "/l/*"
