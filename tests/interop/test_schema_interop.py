"""Schemas between our client and the official one: values both ways, declarations, the registry.

Each schema type travels official producer -> our consumer and our producer -> official consumer,
and the decoded values must equal what was sent. Registry behaviour (refusing an incompatible
schema, resolving an older reader against a newer writer) is Apache Pulsar's, and both brokers
must show it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pulsar
import pulsar.schema as official_schema
import pytest
from google.protobuf import type_pb2

from airflow_pulsar.client import exceptions
from airflow_pulsar.client import schema as our_schema
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import InitialPosition

pytestmark = pytest.mark.interop

class OurOrder(our_schema.Record):
    _avro_namespace = "airflow.pulsar.test"
    id = our_schema.Long()
    item = our_schema.String()
    price = our_schema.Double()


class OfficialOrder(official_schema.Record):
    _avro_namespace = "airflow.pulsar.test"
    id = official_schema.Long()
    item = official_schema.String()
    price = official_schema.Double()


# Both clients name a record by its class name: these give the classes above one name on the wire.
OurOrder.__name__ = OfficialOrder.__name__ = "Order"


def _our_order(i: int) -> OurOrder:
    return OurOrder(id=i, item=f"item-{i}", price=i * 1.5)


def _official_order(i: int) -> OfficialOrder:
    return OfficialOrder(id=i, item=f"item-{i}", price=i * 1.5)


# (name, our schema, the official schema, our value i, the official value i)
SCHEMAS: list[tuple[str, Any, Any, Any, Any]] = [
    ("avro", our_schema.AvroSchema(OurOrder), official_schema.AvroSchema(OfficialOrder), _our_order, _official_order),
    ("json", our_schema.JsonSchema(OurOrder), official_schema.JsonSchema(OfficialOrder), _our_order, _official_order),
    ("string", our_schema.StringSchema(), official_schema.StringSchema(), lambda i: f"text-{i}", lambda i: f"text-{i}"),
    ("bytes", our_schema.BytesSchema(), official_schema.BytesSchema(), lambda i: bytes([i]) * 3, lambda i: bytes([i]) * 3),
    (
        "protobuf_native",
        our_schema.ProtobufNativeSchema(type_pb2.Type),
        official_schema.ProtobufNativeSchema(type_pb2.Type),
        lambda i: type_pb2.Type(name=f"type-{i}", oneofs=[str(i)]),
        lambda i: type_pb2.Type(name=f"type-{i}", oneofs=[str(i)]),
    ),
]
COUNT = 5


@pytest.fixture
def our_client(broker: Any) -> Iterator[Client]:
    with Client(broker.service_url, operation_timeout_seconds=30) as made:
        yield made


@pytest.mark.parametrize("case", SCHEMAS, ids=lambda case: case[0])
def test_official_producer_to_our_consumer(our_client: Client, official: pulsar.Client, topic_name: str, case: Any) -> None:
    _, ours, theirs, our_value, their_value = case
    consumer = our_client.subscribe(topic_name, "sub", schema=ours, initial_position=InitialPosition.Earliest)
    producer = official.create_producer(topic_name, schema=theirs)
    for i in range(COUNT):
        producer.send(their_value(i))
    received = [consumer.receive(10_000) for _ in range(COUNT)]
    assert [message.value() for message in received] == [our_value(i) for i in range(COUNT)]


@pytest.mark.parametrize("case", SCHEMAS, ids=lambda case: case[0])
def test_our_producer_to_official_consumer(our_client: Client, official: pulsar.Client, topic_name: str, case: Any) -> None:
    _, ours, theirs, our_value, their_value = case
    consumer = official.subscribe(topic_name, "sub", schema=theirs, initial_position=pulsar.InitialPosition.Earliest)
    producer = our_client.create_producer(topic_name, schema=ours)
    for i in range(COUNT):
        producer.send_async(our_value(i), None)
    producer.flush()
    received = [consumer.receive(10_000) for _ in range(COUNT)]
    assert [message.value() for message in received] == [their_value(i) for i in range(COUNT)]


def test_schema_version_is_the_one_the_official_client_reads(our_client: Client, official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub", schema=official_schema.AvroSchema(OfficialOrder))
    our_reader = our_client.subscribe(topic_name, "ours", schema=our_schema.AvroSchema(OurOrder))
    official.create_producer(topic_name, schema=official_schema.AvroSchema(OfficialOrder)).send(_official_order(1))
    our_client.create_producer(topic_name, schema=our_schema.AvroSchema(OurOrder)).send(_our_order(2))
    theirs = [consumer.receive(10_000) for _ in range(2)]
    ours = [our_reader.receive(10_000) for _ in range(2)]
    # The same schema has one version, whoever registered it; each client sees it on both messages.
    assert theirs[0].schema_version() == theirs[1].schema_version()
    assert ours[0].schema_version() == ours[1].schema_version()
    assert ours[0].value() == _our_order(1) and ours[1].value() == _our_order(2)
    # Message by message, both clients give the same version.
    assert [m.schema_version() for m in ours] == [m.schema_version() for m in theirs]


def test_wrong_value_type_raises_as_the_official_producer_does(our_client: Client, official: pulsar.Client, topic_name: str) -> None:
    official_producer = official.create_producer(topic_name, schema=official_schema.StringSchema())
    with pytest.raises(Exception) as official_error:
        official_producer.send(b"bytes, not text")
    producer = our_client.create_producer(topic_name, schema=our_schema.StringSchema())
    with pytest.raises(Exception) as our_error:
        producer.send(b"bytes, not text")
    assert type(our_error.value).__name__ == type(official_error.value).__name__


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("encoding", list(our_schema.KeyValueEncodingType), ids=lambda e: e.name)
def test_key_value_round_trip(
    our_client: Client, official: pulsar.Client, topic_name: str, encoding: our_schema.KeyValueEncodingType, batching: bool
) -> None:
    kv = our_schema.KeyValueSchema(our_schema.StringSchema(), our_schema.AvroSchema(OurOrder), encoding)
    consumer = our_client.subscribe(topic_name, "sub", schema=kv, initial_position=InitialPosition.Earliest)
    # The official Python client has no KeyValue schema: it reads the raw messages.
    raw = official.subscribe(topic_name, "raw", initial_position=pulsar.InitialPosition.Earliest)
    producer = our_client.create_producer(topic_name, schema=kv, batching_enabled=batching)
    pairs = [our_schema.KeyValue(f"k{i}", _our_order(i)) for i in range(COUNT)] + [our_schema.KeyValue(None, _our_order(9))]
    for pair in pairs:
        producer.send(pair)
    assert [consumer.receive(10_000).value() for _ in pairs] == pairs
    keys = [raw.receive(10_000).partition_key() for _ in pairs]
    if encoding is our_schema.KeyValueEncodingType.SEPARATED:
        # The key goes base64 in the message key, as the Java client sends it.
        assert keys == [base64.b64encode(f"k{i}".encode()).decode() for i in range(COUNT)] + [""]
    else:
        assert keys == [""] * len(pairs)


class OurItem(our_schema.Record):
    name = our_schema.String()


class OurItemRenumbered(our_schema.Record):
    name = our_schema.Integer()


class OfficialItem(official_schema.Record):
    name = official_schema.String()


class OfficialItemRenumbered(official_schema.Record):
    name = official_schema.Integer()


OurItem.__name__ = OurItemRenumbered.__name__ = OfficialItem.__name__ = OfficialItemRenumbered.__name__ = "Item"


def test_incompatible_schema_refused_as_for_the_official_client(our_client: Client, official: pulsar.Client, topic_name: str) -> None:
    official.create_producer(topic_name, schema=official_schema.AvroSchema(OfficialItem)).send(OfficialItem(name="a"))
    with pytest.raises(pulsar.IncompatibleSchema) as official_error:
        official.create_producer(topic_name, schema=official_schema.AvroSchema(OfficialItemRenumbered))
    with pytest.raises(exceptions.IncompatibleSchema) as our_error:
        our_client.create_producer(topic_name, schema=our_schema.AvroSchema(OurItemRenumbered))
    assert type(our_error.value).__name__ == type(official_error.value).__name__


class ItemV1(our_schema.Record):
    name = our_schema.String()
    count = our_schema.Integer()


class ItemV2(our_schema.Record):
    # A new optional field (default null, so FULL compatibility holds) ahead of the old ones: read
    # without the writer's schema, v2 bytes would be misread, so passing means v2 was resolved to v1.
    note = our_schema.String(required_default=True)
    name = our_schema.String()
    count = our_schema.Integer()


ItemV1.__name__ = ItemV2.__name__ = "EvolvingItem"


def test_v1_consumer_reads_v2_records(our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, "sub", schema=our_schema.AvroSchema(ItemV1), initial_position=InitialPosition.Earliest)
    our_client.create_producer(topic_name, schema=our_schema.AvroSchema(ItemV1)).send(ItemV1(name="old", count=1))
    our_client.create_producer(topic_name, schema=our_schema.AvroSchema(ItemV2)).send(ItemV2(note="new", name="new", count=2))
    first, second = consumer.receive(10_000), consumer.receive(10_000)
    assert first.schema_version() != second.schema_version()
    assert [first.value(), second.value()] == [ItemV1(name="old", count=1), ItemV1(name="new", count=2)]
