"""Our producer against the broker process: flush triggers, routing, sync/async/future sends, close."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import AlreadyClosed, MessageTooBig, Result
from airflow_pulsar.client.hashing import java_string_hash, murmur3_32
from airflow_pulsar.client.producer import HashingScheme, OutgoingMessage, PartitionsRoutingMode
from airflow_pulsar.client.protocol.message_id import MessageId


@pytest.fixture
def our_client(broker: Any) -> Iterator[Client]:
    """Our client on the module's broker, with a 5 s operation timeout."""
    with Client(broker.service_url, operation_timeout_seconds=5) as made:
        yield made


def _send_all(producer: Any, payloads: list[bytes], **fields: Any) -> list[Any]:
    """send_async every payload, flush, and return the (result, id) pairs in send order."""
    results: list[Any] = [None] * len(payloads)
    for i, payload in enumerate(payloads):
        producer.send_async(payload, lambda r, m, i=i: results.__setitem__(i, (r, m)), **fields)
    producer.flush()
    assert all(r is not None and r[0] is Result.Ok for r in results), results
    return [m for _, m in results]


def _entries(ids: list[Any]) -> list[int]:
    """Batch sizes of the entries, in order."""
    sizes: dict[int, int] = {}
    for message_id in ids:
        sizes[message_id.entry_id()] = message_id.batch_size()
    return [sizes[entry] for entry in sorted(sizes)]


def test_flush_on_max_messages(our_client: Client, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, batching_max_messages=10, batching_max_publish_delay_ms=5000)
    ids = [None] * 20
    for i in range(20):
        producer.send_async(b"m", lambda r, m, i=i: ids.__setitem__(i, m))
    deadline = time.monotonic() + 3
    while None in ids and time.monotonic() < deadline:  # no flush(): the count alone must send
        time.sleep(0.01)
    assert _entries(ids) == [10, 10]
    assert [m.batch_index() for m in ids] == list(range(10)) * 2


def test_flush_on_max_bytes(our_client: Client, topic_name: str) -> None:
    producer = our_client.create_producer(
        topic_name, batching_max_allowed_size_in_bytes=1000, batching_max_publish_delay_ms=5000
    )
    ids = _send_all(producer, [b"x" * 200] * 12)
    sizes = _entries(ids)
    assert sum(sizes) == 12 and max(sizes) <= 5 and len(sizes) >= 3, sizes


def test_flush_on_max_publish_delay(our_client: Client, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, batching_max_publish_delay_ms=100)
    done = threading.Event()
    ids: list[Any] = []
    started = time.monotonic()
    for _ in range(3):
        producer.send_async(b"d", lambda r, m: (ids.append(m), len(ids) == 3 and done.set()))
    assert done.wait(3)
    elapsed = time.monotonic() - started
    assert 0.08 <= elapsed < 1.5, elapsed
    assert _entries(ids) == [3]


def test_message_above_batch_limit_goes_alone_in_order(our_client: Client, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, batching_max_allowed_size_in_bytes=1000)
    ids = _send_all(producer, [b"a", b"b", b"x" * 2000, b"c"])
    assert [m.batch_index() for m in ids] == [0, 1, -1, 0]
    assert [m.entry_id() for m in ids] == sorted(m.entry_id() for m in ids)


def test_sync_send_future_and_awaitable(our_client: Client, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, batching_max_publish_delay_ms=5000)
    started = time.monotonic()
    first = producer.send(b"sync")
    assert time.monotonic() - started < 1, "a sync send must not wait out the batch delay"
    future = producer.send_future(b"future")
    producer.flush()
    second = future.result(1)

    async def awaited() -> Any:
        return await asyncio.wrap_future(producer.send_future(b"awaited"))

    pending = asyncio.run(asyncio.wait_for(_flush_soon(producer, awaited()), 5))
    assert first.entry_id() < second.entry_id() < pending.entry_id()
    assert producer.last_sequence_id() == 2 and producer.is_connected()


async def _flush_soon(producer: Any, awaitable: Any) -> Any:
    task = asyncio.ensure_future(awaitable)
    await asyncio.sleep(0)
    await asyncio.get_running_loop().run_in_executor(None, producer.flush)
    return await task


def test_close_flushes_then_rejects(our_client: Client, topic_name: str, broker: Any) -> None:
    producer = our_client.create_producer(topic_name, batching_max_publish_delay_ms=10_000)
    results: list[Any] = []
    for i in range(5):
        producer.send_async(b"c%d" % i, lambda r, m: results.append(r))
    producer.close()
    assert results == [Result.Ok] * 5
    assert broker.topic_stats(topic_name)["msgInCounter"] == 5
    with pytest.raises(AlreadyClosed):
        producer.send(b"late")


def test_too_big_without_chunking_fails_clearly(broker_factory: Any, topic_name: str) -> None:
    small = broker_factory("--max-message-size", "4096")
    with Client(small.service_url, operation_timeout_seconds=5) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        with pytest.raises(MessageTooBig, match="4096"):
            producer.send(b"x" * 5000)
        assert producer.send(b"fits").entry_id() == 0


def _partitioned(broker: Any, topic: str, partitions: int) -> None:
    # A JSON body, as Pulsar requires (it answers 415 to any other content type).
    response = broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic}/partitions", json=partitions)
    assert response.status_code in (200, 204), response.text


@pytest.mark.parametrize(
    "scheme, hash_of", [(HashingScheme.JavaStringHash, java_string_hash), (HashingScheme.Murmur3_32Hash, murmur3_32)]
)
def test_keyed_messages_land_on_hash_partition(our_client: Client, broker: Any, topic_name: str, scheme: Any, hash_of: Any) -> None:
    _partitioned(broker, topic_name, 4)
    producer = our_client.create_producer(topic_name, hashing_scheme=scheme)
    keys = [f"key-{i}" for i in range(40)]
    for key in keys:
        message_id = producer.send(key.encode(), partition_key=key)
        assert message_id.partition() == hash_of(key) % 4, key


def test_round_robin_without_batching_cycles_partitions(our_client: Client, broker: Any, topic_name: str) -> None:
    _partitioned(broker, topic_name, 3)
    producer = our_client.create_producer(topic_name, batching_enabled=False)
    partitions = [producer.send(b"r").partition() for _ in range(9)]
    assert partitions[:3] == partitions[3:6] == partitions[6:] and sorted(partitions[:3]) == [0, 1, 2]


def test_round_robin_with_batching_keeps_a_partition_per_interval(our_client: Client, broker: Any, topic_name: str) -> None:
    _partitioned(broker, topic_name, 4)
    producer = our_client.create_producer(
        topic_name, batching_max_publish_delay_ms=10, batching_partition_switch_frequency_by_publish_delay=20
    )
    ids = _send_all(producer, [b"b"] * 50)  # well inside one 200 ms slice (or straddling one boundary)
    assert len({m.partition() for m in ids}) <= 2
    ids = []
    for _ in range(6):
        ids.append(producer.send(b"s"))
        time.sleep(0.2)
    assert len({m.partition() for m in ids}) >= 3, "the partition must move every 200 ms"


def test_custom_router_and_single_partition(our_client: Client, broker: Any, topic_name: str) -> None:
    _partitioned(broker, topic_name, 4)
    routed = our_client.create_producer(topic_name, message_router=lambda message, n: len(message.data()) % n)
    assert [routed.send(b"x" * size).partition() for size in (1, 2, 3, 4)] == [1, 2, 3, 0]
    single = our_client.create_producer(topic_name, message_routing_mode=PartitionsRoutingMode.UseSinglePartition)
    assert len({single.send(b"s").partition() for _ in range(8)}) == 1


def test_interceptors_rewrite_messages_and_hear_each_receipt(our_client: Client, topic_name: str) -> None:
    heard: list[tuple[bytes, Any, Result]] = []

    class Tagging:
        def before_send(self, producer: Any, message: OutgoingMessage) -> OutgoingMessage:
            return OutgoingMessage(message.data() + b"!", {"tagged": "yes"}, message.partition_key())

        def on_send_acknowledgement(self, producer: Any, message: OutgoingMessage, message_id: Any, result: Result) -> None:
            heard.append((message.data(), message_id, result))

    producer = our_client.create_producer(topic_name, interceptors=[Tagging()])
    reader = our_client.create_reader(topic_name, MessageId.earliest)
    ids = _send_all(producer, [b"a", b"b"])
    assert [(data, result) for data, _, result in heard] == [(b"a!", Result.Ok), (b"b!", Result.Ok)]
    assert [message_id for _, message_id, _ in heard] == ids
    received = [reader.read_next(5000) for _ in range(2)]
    assert [m.data() for m in received] == [b"a!", b"b!"]
    assert all(m.properties() == {"tagged": "yes"} for m in received)
