"""Schemas through our own client: the parameters in the official positions, readers, asyncio, bad input."""

from __future__ import annotations

import asyncio
import inspect

import pulsar
import pytest

from airflow_pulsar.client import asyncio as pulsar_asyncio
from airflow_pulsar.client import schema as our_schema
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerType, InitialPosition, MessageId


class Reading(our_schema.Record):
    sensor = our_schema.String()
    value = our_schema.Double()


def _readings(count: int) -> list[Reading]:
    return [Reading(sensor=f"s{i}", value=i / 4) for i in range(count)]


@pytest.mark.parametrize(
    ("method", "official_method", "leading"),
    [
        (Client.create_producer, pulsar.Client.create_producer, ["self", "topic", "producer_name", "schema"]),
        (Client.subscribe, pulsar.Client.subscribe, ["self", "topic", "subscription_name", "consumer_type", "schema"]),
        (Client.create_reader, pulsar.Client.create_reader, ["self", "topic", "start_message_id", "schema"]),
    ],
    ids=["create_producer", "subscribe", "create_reader"],
)
def test_schema_takes_the_official_position(method: object, official_method: object, leading: list[str]) -> None:
    assert list(inspect.signature(official_method).parameters)[: len(leading)] == leading  # type: ignore[arg-type]
    assert list(inspect.signature(method).parameters)[: len(leading)] == leading  # type: ignore[arg-type]


def test_positional_schema_round_trip_and_reader(our_client: Client, topic_name: str) -> None:
    schema = our_schema.JsonSchema(Reading)
    consumer = our_client.subscribe(topic_name, "sub", ConsumerType.Shared, schema, initial_position=InitialPosition.Earliest)
    producer = our_client.create_producer(topic_name, None, schema)
    for reading in _readings(4):
        producer.send(reading)
    assert [consumer.receive(10_000).value() for _ in range(4)] == _readings(4)
    reader = our_client.create_reader(topic_name, MessageId.earliest, schema)
    assert [reader.read_next(10_000).value() for _ in range(4)] == _readings(4)
    raw = our_client.create_reader(topic_name, MessageId.earliest)
    assert raw.read_next(10_000).value() == schema.encode(_readings(1)[0])  # the default schema: bytes as they are


def test_async_consumer_and_reader_decode_with_their_schema(broker, our_client: Client, topic_name: str) -> None:
    schema = our_schema.AvroSchema(Reading)
    producer = our_client.create_producer(topic_name, schema=schema)

    async def scenario() -> None:
        async with pulsar_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            consumer = await client.subscribe(topic_name, "sub", ConsumerType.Exclusive, schema, initial_position=InitialPosition.Earliest)
            reader = await client.create_reader(topic_name, MessageId.earliest, schema)
            await asyncio.get_running_loop().run_in_executor(None, lambda: [producer.send(r) for r in _readings(3)])
            assert [(await consumer.receive(10_000)).value() for _ in range(3)] == _readings(3)
            assert [(await reader.read_next(10_000)).value() for _ in range(3)] == _readings(3)

    asyncio.run(scenario())


def test_bad_schema_arguments_name_the_schema(our_client: Client, topic_name: str) -> None:
    for make in (
        lambda: our_client.create_producer(topic_name, schema="json"),
        lambda: our_client.subscribe(topic_name, "sub", schema=Reading),
        lambda: our_client.create_reader(topic_name, MessageId.earliest, schema=b"avro"),
    ):
        with pytest.raises(ValueError, match="schema"):
            make()


def test_a_value_of_the_wrong_type_is_refused_before_sending(our_client: Client, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, schema=our_schema.AvroSchema(Reading))
    with pytest.raises(TypeError, match="Reading"):
        producer.send({"sensor": "s", "value": 1.0})
    with pytest.raises(TypeError, match="Reading"):
        producer.send_async("text", None)
    # The default schema takes bytes only, as the official BytesSchema does.
    with pytest.raises(TypeError):
        our_client.create_producer(topic_name).send("text")
