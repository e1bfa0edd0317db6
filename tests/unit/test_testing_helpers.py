"""Unit checks of the local-service helpers that need no process."""

from dstream_exactly_once.testing._kafka import _cluster_id


def test_kafka_cluster_ids_never_look_like_options():
    ids = {_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)


def test_spark_connect_server_conf_and_repr_keep_the_token_out():
    from dstream_exactly_once.testing import LocalSparkConnect

    server = LocalSparkConnect(jars="/opt/x.jar", conf={"spark.sql.shuffle.partitions": 3},
                               python_path=["/app/lib", "/app/site"])
    try:
        token = server.url.rpartition("token=")[2]
        assert len(token) >= 24 and token not in repr(server)
        conf = server._server_conf()
        assert token not in " ".join(f"{k}={v}" for k, v in conf.items())  # never on the command line
        assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
        assert conf["spark.executorEnv.PYTHONPATH"] == "/app/lib:/app/site"
        assert conf["spark.jars"] == "/opt/x.jar" and conf["spark.sql.shuffle.partitions"] == "3"
        other = LocalSparkConnect()
        assert token != other.url.rpartition("token=")[2]  # one token per server
        other.stop()
    finally:
        server.stop()  # deletes the work dir it made
