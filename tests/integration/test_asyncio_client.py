"""The asyncio API (``airflow_pulsar.client.asyncio``), with the official ``pulsar.asyncio`` as the oracle.

The comparison runs one scenario through both modules on the same broker and compares what each
call returns (types, values) and raises (class, result) name for name.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from collections.abc import Awaitable, Coroutine
from types import ModuleType
from typing import Any

import pulsar
import pulsar.asyncio as official_asyncio
import pytest

import airflow_pulsar.client as our_pulsar
from airflow_pulsar.client import asyncio as our_asyncio
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.consumer import ConsumerBatchReceivePolicy, InitialPosition, MessageId
from airflow_pulsar.client.exceptions import Result
from tests.support.consumer_checks import backlog, produce
from tests.support.polling import wait_until


def run(scenario: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
    return asyncio.run(asyncio.wait_for(scenario, timeout))


def connect(module: ModuleType, broker: Any) -> Any:
    if module is official_asyncio:
        return module.Client(broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    return module.Client(broker.service_url, operation_timeout_seconds=10)


# ---- the same calls through both modules ----


async def outcome(module: ModuleType, call: Awaitable[Any]) -> tuple[str, Any]:
    """What a call gives: the type name and a plain value, or the error class (and result) it raises."""
    try:
        value = await call
    except module.PulsarException as exc:
        return "PulsarException", exc.error().name
    except (ValueError, TimeoutError) as exc:
        return type(exc).__name__, str(exc)
    if isinstance(value, list):
        return "list", [re.sub(r"-(off|ours)$", "", str(v)) for v in value]
    return type(value).__name__, value if isinstance(value, (bool, int, str, type(None))) else None


async def scenario(module: ModuleType, broker: Any, topic: str, earliest: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    client = connect(module, broker)
    producer = await client.create_producer(topic, "p1")
    ids = [await producer.send(f"m{i}".encode(), {"i": str(i)}, partition_key=f"k{i}") for i in range(3)]
    seen["sent"] = [type(i).__name__ for i in ids]
    seen["producer"] = (producer.topic().rsplit("-", 1)[0], producer.producer_name(), producer.last_sequence_id(), producer.is_connected())
    consumer = await client.subscribe(topic, "sub", initial_position=module.InitialPosition.Earliest)
    messages = [await consumer.receive() for _ in range(3)]
    seen["received"] = [(type(m).__name__, m.data(), m.properties(), m.partition_key()) for m in messages]
    seen["ack"] = await outcome(module, consumer.acknowledge(messages[0]))
    seen["ack cumulative"] = await outcome(module, consumer.acknowledge_cumulative(messages[2]))
    seen["last id"] = await outcome(module, consumer.get_last_message_id())
    seen["seek bad"] = await outcome(module, consumer.seek("x"))
    seen["seek"] = await outcome(module, consumer.seek(ids[1]))
    seen["after seek"] = (await consumer.receive()).data()
    seen["seek to time"] = await outcome(module, consumer.seek(0))
    seen["after seek to time"] = [(await consumer.receive()).data() for _ in range(3)]
    # Last on this consumer: the official one drops the message a cancelled receive would have had.
    seen["nothing more"] = await outcome(module, asyncio.wait_for(consumer.receive(), 0.3))
    seen["consumer"] = (consumer.subscription_name(), consumer.topic().rsplit("-", 1)[0])

    reader = await client.create_reader(topic, earliest)
    seen["has"] = await outcome(module, reader.has_message_available())
    seen["read"] = [(await reader.read_next()).data() for _ in range(3)]
    seen["has after"] = await outcome(module, reader.has_message_available())
    seen["read waits"] = await outcome(module, asyncio.wait_for(reader.read_next(), 0.3))
    seen["reader"] = (reader.topic().rsplit("-", 1)[0], reader.is_connected())

    seen["bad start"] = await outcome(module, client.create_reader(topic, "earliest"))
    seen["bad partitions"] = await outcome(module, client.get_topic_partitions(5))
    seen["bad topic type"] = await outcome(module, client.subscribe(5, "s"))
    seen["bad topic name"] = await outcome(module, client.create_producer("persistent://public//x"))
    seen["chunking with batching"] = await outcome(module, client.create_producer(topic, chunking_enabled=True))
    seen["pattern list"] = await outcome(module, client.subscribe([topic], "s", is_pattern_topic=True))

    await producer.close()
    seen["close closed"] = await outcome(module, producer.close())
    seen["flush closed"] = await outcome(module, producer.flush())
    seen["send closed"] = await outcome(module, producer.send(b"late"))
    await consumer.close()
    seen["receive closed"] = await outcome(module, consumer.receive())
    seen["ack closed"] = await outcome(module, consumer.acknowledge(messages[0]))
    await reader.close()
    seen["read closed"] = await outcome(module, reader.read_next())
    await client.close()
    seen["client closed"] = await outcome(module, client.create_producer(topic))
    return seen


def test_same_calls_behave_as_the_official_asyncio_module(broker: Any, topic_name: str) -> None:
    theirs = run(scenario(official_asyncio, broker, f"{topic_name}-off", pulsar.MessageId.earliest))
    ours = run(scenario(our_asyncio, broker, f"{topic_name}-ours", MessageId.earliest))
    assert ours == theirs
    assert theirs["send closed"] == theirs["close closed"] == theirs["flush closed"] == ("PulsarException", "AlreadyClosed")
    assert theirs["sent"] == ["MessageId"] * 3 and theirs["nothing more"][0] == "TimeoutError"


def test_a_send_the_broker_does_not_answer_times_out_as_in_the_official_module(broker: Any, topic_name: str) -> None:
    async def unanswered_send(module: ModuleType, topic: str) -> tuple[tuple[str, Any], float]:
        client = connect(module, broker)
        producer = await client.create_producer(topic, send_timeout_millis=1000)
        await producer.send(b"answered")
        started = time.monotonic()
        os.kill(broker.process.pid, signal.SIGSTOP)  # the broker keeps the connection but answers nothing
        try:
            result = await outcome(module, producer.send(b"unanswered"))
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)
        waited = time.monotonic() - started
        await client.close()
        return result, waited

    theirs, _ = run(unanswered_send(official_asyncio, f"{topic_name}-off"))
    ours, waited = run(unanswered_send(our_asyncio, f"{topic_name}-ours"))
    assert ours == theirs == ("PulsarException", "Timeout")
    assert 0.9 < waited < 5


def test_topic_partitions_match_the_official_module(broker: Any, topic_name: str) -> None:
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 3)

    async def partitions(module: ModuleType) -> list[str]:
        client = connect(module, broker)
        try:
            return await client.get_topic_partitions(topic_name)
        finally:
            await client.close()

    expected = [f"persistent://public/default/{topic_name}-partition-{i}" for i in range(3)]
    assert run(partitions(our_asyncio)) == run(partitions(official_asyncio)) == expected


def test_errors_are_pulsar_exceptions_of_both_apis(broker: Any, topic_name: str) -> None:
    async def closed_send() -> None:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            producer = await client.create_producer(topic_name)
            await producer.close()
            await producer.send(b"x")

    with pytest.raises(our_pulsar.PulsarException) as caught:  # the sync API's base class catches it too
        run(closed_send())
    assert isinstance(caught.value, our_asyncio.PulsarException)
    assert caught.value.error() is Result.AlreadyClosed
    assert str(caught.value).split(":")[0].endswith("AlreadyClosed")


def test_shutdown_fails_pending_sends_without_waiting(broker: Any, topic_name: str) -> None:
    """As the sync ``Client.shutdown``: nothing is flushed, and a send held in a batch fails with
    AlreadyClosed (the official asyncio client never completes that send)."""

    async def shut_down() -> tuple[tuple[str, Any], float, tuple[str, Any]]:
        client = connect(our_asyncio, broker)
        producer = await client.create_producer(topic_name, batching_max_publish_delay_ms=60_000)
        held = asyncio.ensure_future(producer.send(b"held in the batch"))
        await asyncio.sleep(0)  # the send is queued in the open batch
        started = time.monotonic()
        client.shutdown()
        waited = time.monotonic() - started
        return await outcome(our_asyncio, held), waited, await outcome(our_asyncio, producer.close())

    sent, waited, closed = run(shut_down())
    assert sent == closed == ("PulsarException", "AlreadyClosed")
    assert waited < 2
    assert broker.topic_stats(topic_name)["msgInCounter"] == 0


# ---- sending ----


def test_gathered_sends_complete_in_order_per_producer(broker: Any, our_client: Any, topic_name: str) -> None:
    count = 1000
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)

    async def send_all() -> tuple[list[Any], list[Any], int]:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            first = await client.create_producer(topic_name, "first")
            second = await client.create_producer(topic_name, "second")
            threads = threading.active_count()
            sends = []
            for i in range(count):
                sends.append(first.send(f"first-{i}".encode()))
                sends.append(second.send(f"second-{i}".encode()))
            ids = await asyncio.gather(*sends)
            # Receipts complete futures on the loop; no thread was started per send.
            return ids[0::2], ids[1::2], threading.active_count() - threads

    first_ids, second_ids, new_threads = run(send_all())
    assert new_threads <= 2
    for ids in (first_ids, second_ids):
        assert all(isinstance(i, MessageId) for i in ids)
        assert ids == sorted(ids) and len(set(ids)) == count
    received = [consumer.receive(10_000).data().decode() for _ in range(2 * count)]
    for name in ("first", "second"):
        assert [m for m in received if m.startswith(name)] == [f"{name}-{i}" for i in range(count)]


def test_send_fields_and_partitioned_topic(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 2)
    consumer = official.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)

    async def send() -> list[Any]:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            producer = await client.create_producer(topic_name, batching_enabled=False)
            ids = [await producer.send(b"v", {"a": "b"}, partition_key=f"key-{i}", event_timestamp=1234) for i in range(4)]
            await producer.flush()
            return ids

    ids = run(send())
    assert {i.partition() for i in ids} <= {0, 1}
    got = [consumer.receive(10_000) for _ in range(4)]
    assert sorted(m.partition_key() for m in got) == [f"key-{i}" for i in range(4)]
    assert all(m.properties() == {"a": "b"} and m.event_timestamp() == 1234 for m in got)


# ---- receiving ----


def test_receive_waits_on_the_loop_and_batch_receive_follows_the_policy(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    async def scenario() -> None:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            consumer = await client.subscribe(
                topic_name, "sub", initial_position=InitialPosition.Earliest, batch_receive_policy=ConsumerBatchReceivePolicy(4, -1, 3000)
            )
            # Nothing yet: the receive waits on the loop while the producer (another thread) sends.
            waiting = asyncio.ensure_future(consumer.receive(5000))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            await asyncio.to_thread(produce, official, topic_name, 9, batch=3)
            first = await waiting
            assert first.data() == b"m0"
            await consumer.acknowledge(first)
            started = time.monotonic()
            batch = await consumer.batch_receive()  # the message limit is reached: no waiting for the timeout
            assert [m.data() for m in batch] == [b"m1", b"m2", b"m3", b"m4"]
            assert time.monotonic() - started < 2
            for message in batch:
                await consumer.acknowledge(message)
            rest = [await consumer.receive(5000) for _ in range(3)]
            started = time.monotonic()
            last = await consumer.batch_receive()  # fewer than the limit: what came by the timeout
            assert [m.data() for m in last] == [b"m8"] and time.monotonic() - started >= 2.9
            await consumer.acknowledge_cumulative(last[-1])
            with pytest.raises(our_asyncio.PulsarException) as timeout:
                await consumer.receive(200)
            assert timeout.value.error() is Result.Timeout
            assert [m.data() for m in rest] == [b"m5", b"m6", b"m7"]
            await consumer.close()

    run(scenario())
    wait_until(lambda: backlog(broker, topic_name, "sub") == 0)


def test_a_cancelled_receive_loses_no_message(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    """The message a cancelled receive was waiting for goes to the next receive (the official
    module's drops it)."""

    async def scenario() -> bytes:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            consumer = await client.subscribe(topic_name, "sub")
            waiting = asyncio.ensure_future(consumer.receive())
            await asyncio.sleep(0.1)
            waiting.cancel()
            await asyncio.to_thread(produce, official, topic_name, 1)
            return (await consumer.receive(5000)).data()

    assert run(scenario()) == b"m0"


def test_batch_receive_returns_nothing_after_the_timeout(broker: Any, topic_name: str) -> None:
    async def scenario() -> list[Any]:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            consumer = await client.subscribe(topic_name, "sub", batch_receive_policy=ConsumerBatchReceivePolicy(10, -1, 300))
            return await consumer.batch_receive()

    assert run(scenario()) == []


def test_zero_queue_consumer_and_pattern_subscription(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    async def scenario() -> None:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            zero = await client.subscribe(topic_name, "zero", receiver_queue_size=0, initial_position=InitialPosition.Earliest)
            pattern = await client.subscribe(
                f"persistent://public/default/{re.escape(topic_name)}.*", "pattern",
                initial_position=InitialPosition.Earliest, is_pattern_topic=True,
            )
            await asyncio.to_thread(produce, official, topic_name, 3)
            assert [(await zero.receive(5000)).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
            assert [(await pattern.receive(10_000)).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]

    run(scenario())


def test_reader_seek_and_timeout(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    produce(official, topic_name, 5, batch=5)

    async def scenario() -> None:
        async with our_asyncio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            reader = await client.create_reader(topic_name, MessageId.earliest)
            assert [(await reader.read_next(5000)).data() for _ in range(5)] == [f"m{i}".encode() for i in range(5)]
            with pytest.raises(our_asyncio.PulsarException) as timeout:
                await reader.read_next(100)
            assert timeout.value.error() is Result.Timeout
            await reader.seek(MessageId.earliest)
            assert (await reader.read_next(5000)).data() == b"m0"
            await reader.close()

    run(scenario())
