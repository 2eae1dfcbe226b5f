"""Everything the official producer sends decodes in our consumer: batches, codecs, chunks."""

from __future__ import annotations

import os

import pulsar
import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import InitialPosition
from tests.support.consumer_checks import data, key_of, produce, receive_all

CODECS = ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("batch", [0, 7], ids=["single", "batched"])
def test_every_codec_and_batching_decodes_like_the_official_consumer(
    official: pulsar.Client, our_client: Client, topic_name: str, codec: str, batch: int
) -> None:
    produce(official, topic_name, 21, batch=batch, key=lambda i: f"key-{i % 4}", compression_type=getattr(pulsar.CompressionType, codec))
    theirs = official.subscribe(topic_name, "theirs", initial_position=pulsar.InitialPosition.Earliest)
    ours = our_client.subscribe(topic_name, "ours", initial_position=InitialPosition.Earliest)
    expected = receive_all(theirs, 21)
    got = receive_all(ours, 21)

    assert data(got) == data(expected) == [f"m{i}".encode() for i in range(21)]
    assert [m.partition_key() for m in got] == [m.partition_key() for m in expected]
    assert [m.properties() for m in got] == [m.properties() for m in expected]
    assert [m.event_timestamp() for m in got] == [m.event_timestamp() for m in expected]
    assert [m.publish_timestamp() for m in got] == [m.publish_timestamp() for m in expected]
    assert [key_of(m.message_id()) for m in got] == [key_of(m.message_id()) for m in expected]
    assert {m.message_id().batch_index() for m in got} == ({-1} if not batch else set(range(7)))
    assert all(m.topic_name() == f"persistent://public/default/{topic_name}" for m in got)


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZSTD"])
def test_chunked_messages_are_reassembled(broker_factory, topic_name: str, codec: str) -> None:
    broker = broker_factory("--max-message-size", "20000")
    official = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    ours = Client(broker.service_url, operation_timeout_seconds=10)
    try:
        consumer = ours.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        producer = official.create_producer(
            topic_name, chunking_enabled=True, batching_enabled=False, compression_type=getattr(pulsar.CompressionType, codec)
        )
        big = [os.urandom(55_000), b"small", os.urandom(41_000)]
        for payload in big:
            producer.send(payload, properties={"size": str(len(payload))}, partition_key="chunky")
        got = receive_all(consumer, 3)
        assert data(got) == big
        assert [m.properties()["size"] for m in got] == [str(len(p)) for p in big]
        assert got[0].partition_key() == "chunky"
        for message in got:
            consumer.acknowledge(message)
        consumer.close()
        # Every chunk was acknowledged: nothing is left for the subscription.
        again = ours.subscribe(topic_name, "sub")
        with pytest.raises(Exception, match="no message"):
            again.receive(300)
    finally:
        ours.close()
        official.close()
