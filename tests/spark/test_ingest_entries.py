"""The range readers' entry decoder against the Message path, on the broker process: whole
received entries decoded straight into columns give the very rows that Message objects give
(``RowBatchBuilder.add_messages``), column for column, batched or not, compressed or not, with
keys, properties, event times, null values, JSON values and schema versions; text that is not
UTF-8 reads as the consumer reads it, whichever way the client's columnar reader gave it."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client, CompressionType, ConsumerBatchReceivePolicy, MessageId
from airflow_pulsar.client.entries import ReceivedEntry, create_reader
from airflow_pulsar.client.protocol.PulsarApi_pb2 import KeyValue, MessageMetadata, SingleMessageMetadata
from airflow_pulsar.client.schema import StringSchema
from airflow_pulsar.spark.job.columns import CORRUPT_RECORD, RowBatchBuilder
from airflow_pulsar.spark.job.entry_messages import entry_columns
from airflow_pulsar.spark.job.plan import IngestPlan
from airflow_pulsar.spark.job.source import arrow_schema, read_range_batches
from airflow_pulsar.spark.planning.hold import SubscriptionHold
from airflow_pulsar.spark.planning.planner import plan_batch

COUNT = 60
_META = [
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField(
        "message_id",
        StructType([StructField("ledger_id", LongType()), StructField("entry_id", LongType()), StructField("batch_index", IntegerType())]),
    ),
    StructField("publish_time", TimestampType()),
    StructField("event_time", TimestampType()),
    StructField("properties", MapType(StringType(), StringType())),
    StructField("redelivery_count", IntegerType()),
    StructField("batch_id", StringType()),
]
# The rows of each value format, as the data source declares them (built without a JVM).
ROWS = {
    "bytes": StructType([StructField("key", StringType()), StructField("value", BinaryType()), *_META]),
    "string": StructType([StructField("key", StringType()), StructField("value", StringType()), *_META]),
    "json": StructType(
        [StructField("key", StringType()), StructField("id", LongType()), StructField("name", StringType()),
         StructField(CORRUPT_RECORD, StringType()), *_META]
    ),
    "schema": StructType([StructField("key", StringType()), StructField(CORRUPT_RECORD, StringType()), *_META]),
}


class VersionEcho:
    """A versioned value decoder that puts each message's schema version in ``_corrupt_record``."""

    versioned = True

    def decode(self, values, versions) -> dict[str, pa.Array]:
        assert len(values) == len(versions)
        return {CORRUPT_RECORD: pa.array([v.encode("latin-1").hex() for v in versions], pa.string())}


@pytest.fixture
def our_client(broker: BrokerProcess):
    with Client(broker.service_url) as c:
        yield c


def produce(client: Client, topic: str, batch: int, compression: CompressionType, schema: bool) -> None:
    """Values that are JSON objects, one not, some null; keys, properties and event times on some."""
    settings = {"schema": StringSchema()} if schema else {}
    producer = client.create_producer(
        topic, batching_enabled=batch > 1, batching_max_messages=batch, batching_max_publish_delay_ms=1000,
        compression_type=compression, **settings,
    )
    for i in range(COUNT):
        text = "not json {" if i == 3 else json.dumps({"id": i, "name": f"n{i}", "extra": [i]})
        value = text if schema else (None if i % 11 == 5 else text.encode())
        properties = [{}, {"i": str(i)}, {"i": str(i), "é": "ü\u20ac"}][i % 3]
        producer.send_async(
            value, None, properties=properties or None, partition_key=f"k{i}" if i % 4 else None,
            event_timestamp=1_700_000_000_000 + i if i % 2 else None,
        )
    producer.flush()
    producer.close()


def plan(client: Client, topic: str) -> IngestPlan:
    with SubscriptionHold(client, [topic], "read") as hold:
        made = plan_batch(hold.states(), "read", "t", min_partitions=3)
    assert made is not None
    return made


def builder(value_format: str, plan: IngestPlan) -> RowBatchBuilder:
    decoder = VersionEcho() if value_format == "schema" else None
    return RowBatchBuilder(arrow_schema(ROWS[value_format]), value_format, "src", -1, plan.batch_id, decoder)


def rows_from_messages(client: Client, topic: str, rows: RowBatchBuilder) -> pa.Table:
    """The Message path: a reader's ``batch_receive`` and ``add_messages``, the whole topic, in batches of 7 rows."""
    reader = create_reader(client, topic, MessageId.earliest, batch_receive_policy=ConsumerBatchReceivePolicy(25, -1, 200))
    while len(rows) < COUNT:
        rows.add_messages(reader.consumer.batch_receive())
    reader.close()
    # Built 7 rows at a time, so that batches cut the collected chunks (of 25) at other places.
    batches = [rows.build(7) for _ in range(COUNT // 7)]
    batches.append(rows.build())
    assert rows.build().num_rows == 0  # nothing left: an empty batch
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize(
    ("batch", "compression"),
    [(1, CompressionType.NONE), (7, CompressionType.NONE), (7, CompressionType.LZ4)],
    ids=["unbatched", "batched", "batched-lz4"],
)
@pytest.mark.parametrize("value_format", ["bytes", "string", "json", "schema"])
def test_entries_give_the_rows_messages_give(
    our_client: Client, topic_name: str, batch: int, compression: CompressionType, value_format: str
) -> None:
    produce(our_client, topic_name, batch, compression, schema=value_format == "schema")
    batch_plan = plan(our_client, topic_name)
    assert len(batch_plan.ranges) == 3

    read = [b for r in batch_plan.ranges for b in read_range_batches(our_client, r, builder(value_format, batch_plan), 10)]
    entries = pa.Table.from_batches(read, arrow_schema(ROWS[value_format]))
    messages = rows_from_messages(our_client, topic_name, builder(value_format, batch_plan))

    assert entries.num_rows == COUNT
    assert entries.to_pylist() == messages.to_pylist()
    assert entries.equals(messages)
    first = entries.slice(0, 3).to_pylist()
    assert [row["key"] for row in first] == [None, "k1", "k2"]
    assert [row["properties"] for row in first] == [[], [("i", "1")], [("i", "2"), ("é", "ü\u20ac")]]
    assert first[0]["event_time"] is None and first[1]["event_time"] is not None
    if value_format == "schema":  # every message's schema version reached the decoder
        assert set(entries.column(CORRUPT_RECORD).to_pylist()) == {"0" * 16}


def test_text_that_is_not_utf8_reads_with_replacement_characters() -> None:
    # proto2 does not check UTF-8: a producer may send any bytes as a key or a property. The
    # client's reader gives them as spans of bytes (a batch of the common layout) or as protobuf's
    # bytes (a batch with a filter, read the exact way); both read as Message.partition_key() does.
    single = SingleMessageMetadata(payload_size=1, partition_key="K", properties=[KeyValue(key="P", value="V")]).SerializeToString()
    single = single.replace(b"K", b"\xff").replace(b"P", b"\xfe").replace(b"V", b"\xc3")
    payload = len(single).to_bytes(4, "big") + single + b"v"
    common = ReceivedEntry(-1, 3, 1, 0, MessageMetadata(num_messages_in_batch=1), payload, 1, None)
    filtered = common._replace(entry_id=2, wanted=1)
    messages = entry_columns([common, filtered]).messages
    assert messages.keys.to_pylist() == ["\ufffd", "\ufffd"]
    assert (messages.property_keys.to_pylist(), messages.property_values.to_pylist()) == (["\ufffd"] * 2, ["\ufffd"] * 2)
    assert messages.values.to_pylist() == [b"v", b"v"]
