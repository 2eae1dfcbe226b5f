"""The schema as producers stamp it and messages read it: schema_version in every entry's metadata,
base64 keys of SEPARATED key/value schemas, the declaration, and Message's decoding side."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from airflow_pulsar.client import schema as our_schema
from airflow_pulsar.client.consumer.message import Delivery, Message
from airflow_pulsar.client.consumer.settings import ConsumerSettings
from airflow_pulsar.client.producer.accumulator import MessageAccumulator
from airflow_pulsar.client.producer.message import OutgoingMessage
from airflow_pulsar.client.producer.pending import OpSend
from airflow_pulsar.client.producer.stats import ProducerStats
from airflow_pulsar.client.protocol.batch import parse_single, read_batch
from airflow_pulsar.client.protocol.frames import split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata, Schema, SingleMessageMetadata
from tests.support.producer_config import producer_config

VERSION = struct.pack(">q", 3)
KV_SEPARATED = our_schema.KeyValueSchema(
    our_schema.StringSchema(), our_schema.StringSchema(), our_schema.KeyValueEncodingType.SEPARATED
)


def _accumulator(**settings: Any) -> tuple[MessageAccumulator, list[OpSend]]:
    ops: list[OpSend] = []
    accumulator = MessageAccumulator(producer_config(**settings), ProducerStats(), ops.append)
    accumulator.connected("p", 5 << 20, VERSION)
    return accumulator, ops


def _metadata(op: OpSend) -> tuple[MessageMetadata, bytes]:
    metadata, payload = split_entry(op.entry.data)
    return metadata, bytes(payload)


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
def test_every_entry_carries_the_schema_version(batching: bool, keyed: bool) -> None:
    accumulator, ops = _accumulator(batching_enabled=batching)
    accumulator.add(OutgoingMessage(b"v", partition_key="k" if keyed else None), 0, None, True)
    (op,) = ops
    metadata, _ = _metadata(op)
    assert metadata.schema_version == VERSION


def test_no_schema_version_without_one_from_the_broker() -> None:
    ops: list[OpSend] = []
    accumulator = MessageAccumulator(producer_config(batching_enabled=False), ProducerStats(), ops.append)
    accumulator.connected("p", 5 << 20)
    accumulator.add(OutgoingMessage(b"v"), 0, None, True)
    assert not _metadata(ops[0])[0].HasField("schema_version")


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
def test_separated_key_value_keys_are_flagged_base64(batching: bool) -> None:
    accumulator, ops = _accumulator(batching_enabled=batching, schema=KV_SEPARATED)
    key = base64.b64encode(b"key").decode()
    accumulator.add(OutgoingMessage(b"value", partition_key=key), 0, None, True)
    metadata, payload = _metadata(ops[0])
    if batching:
        (single,) = read_batch(payload, 1, lambda _c, _i, _data, single: parse_single(single))
        assert (single.partition_key, single.partition_key_b64_encoded) == (key, True)
    else:
        assert (metadata.partition_key, metadata.partition_key_b64_encoded) == (key, True)


def test_only_declared_types_reach_the_broker() -> None:
    assert producer_config().declared_schema is None  # bytes: no schema, as the official client
    declared = producer_config(schema=our_schema.JsonSchema(our_schema.Record)).declared_schema
    assert declared is not None and declared.type == Schema.Type.Json


def test_a_schema_that_is_no_schema_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="schema"):
        producer_config(schema=our_schema.StringSchema)
    with pytest.raises(ValueError, match="schema"):
        ConsumerSettings("sub", schema="string")


class _Owner:
    """A partition consumer, as its messages see it."""

    def __init__(self, schema: our_schema.Schema[Any]):
        self.topic = "t"
        self.acks: Any = None
        self.settings = ConsumerSettings("sub", schema=schema)

    def acknowledge(self, target: Any) -> None:
        raise AssertionError("not acknowledged here")


def _message(schema: our_schema.Schema[Any], data: bytes, single: SingleMessageMetadata, version: bytes = b"") -> Message:
    metadata = MessageMetadata(producer_name="p", sequence_id=0, publish_time=0, schema_version=version)
    return Message(Delivery(_Owner(schema), 0, 1, 2, -1, 1, metadata, "t"), 0, data, single)


def test_value_decodes_with_the_consumers_schema_and_reads_separated_keys() -> None:
    key = SingleMessageMetadata(payload_size=5, partition_key=base64.b64encode(b"k\xff").decode(), partition_key_b64_encoded=True)
    kv = our_schema.KeyValueSchema(our_schema.BytesSchema(), our_schema.StringSchema(), our_schema.KeyValueEncodingType.SEPARATED)
    message = _message(kv, b"hello", key, VERSION)
    assert message.key_bytes() == b"k\xff"
    assert message.value() == our_schema.KeyValue(b"k\xff", "hello")
    assert message.schema_version() == VERSION.decode("latin-1")  # a str, as the official client gives it
    plain = _message(our_schema.StringSchema(), b"text", SingleMessageMetadata(payload_size=4, partition_key="key"))
    assert (plain.key_bytes(), plain.value()) == (b"key", "text")
    assert _message(our_schema.BytesSchema(), b"raw", SingleMessageMetadata(payload_size=3)).key_bytes() is None


def test_a_key_flagged_base64_that_is_not_says_so() -> None:
    single = SingleMessageMetadata(payload_size=1, partition_key="not base64!", partition_key_b64_encoded=True)
    with pytest.raises(ValueError, match="not base64"):
        _message(our_schema.BytesSchema(), b"x", single).key_bytes()
