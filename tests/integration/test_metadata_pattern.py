"""Pattern subscription's partition discovery on the real broker: one Metadata request, the same answer."""

from __future__ import annotations

import re

from dstream_exactly_once.kafka._metadata import KafkaMetadata
from dstream_exactly_once.kafka._params import parse_kafka_params
from dstream_exactly_once.kafka._planner import DirectPlanner
from dstream_exactly_once.kafka._strategies import SubscribePattern


def test_matching_partitions_is_one_metadata_request_with_the_two_request_answer(kafka, topic_name):
    a, b, other = f"{topic_name}-a", f"{topic_name}-b", f"x{topic_name}-a"
    kafka.create_topic(a, 3)
    kafka.create_topic(b, 1)
    kafka.create_topic(other, 2)
    pattern = re.compile(re.escape(topic_name) + "-.*")
    md = KafkaMetadata(parse_kafka_params({"bootstrap.servers": kafka.bootstrap}))
    try:
        requests = []
        real = md._metadata

        def counting(what, topics):
            requests.append(topics)
            return real(what, topics)

        md._metadata = counting  # type: ignore[method-assign]
        assert md.matching_partitions(pattern) == {a: [0, 1, 2], b: [0]}
        assert requests == [None]  # one request, for every topic
        assert md.matching_partitions(pattern) == md.partitions(md.matching_topics(pattern))
        assert set(md._leaders) >= {a, b}  # leaders remembered for the offset look-ups
        requests.clear()
        planner = DirectPlanner(md, SubscribePattern(pattern), auto_offset_reset="earliest", discovery_interval_s=0)
        planner.start()
        kafka.add_partitions(b, 2)
        planner.plan(1.0)  # discovery on every batch: the new partition is planned
        assert sorted((tp.topic, tp.partition) for tp in planner.current) == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
        assert requests.count(None) == 2  # start + one discovery, one Metadata request each
    finally:
        md.close()
