"""Delayed delivery and replication arguments of a send, between our client and the official one.

``deliver_at`` / ``deliver_after`` hold a message back on Shared subscriptions until its time and
leave Exclusive ones untouched, on both brokers; a batching producer sends a delayed message as
its own entry, so the plain messages around it are not held back. ``replication_clusters`` and
``disable_replication`` change where a message is replicated, not its delivery here. Neither
client exposes replicate_to on a received message: the brokers' peek headers show what our entries
carry, and the unit tests decode the entries' bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pulsar
import pytest

from airflow_pulsar.client import ConsumerType, Timeout
from airflow_pulsar.client import asyncio as our_asyncio
from airflow_pulsar.client.client import Client
from tests.support.official_client import data_of, receive_n

pytestmark = pytest.mark.interop

DELAY = 3.0
# Pulsar releases delayed messages on a tick (delayedDeliveryTickTimeMillis, 1 s) and, with
# delayedDeliveryDeliverAtTimeStrict off (its default), up to one tick early; plus clock slack.
EARLY_SLACK = 1.2
# How late a delayed message may come: the tick and a busy machine.
LATE_SLACK = 5.0


@pytest.fixture
def our_client(broker: Any) -> Iterator[Client]:
    with Client(broker.service_url, operation_timeout_seconds=10) as made:
        yield made


def _arrivals(consumer: Any, count: int, timeout: float) -> dict[bytes, tuple[float, Any]]:
    """Payload -> (wall-clock time of arrival, message) of ``count`` messages, each acknowledged."""
    arrived = {}
    for _ in range(count):
        message = consumer.receive(timeout_millis=int(timeout * 1000))
        arrived[message.data()] = (time.time(), message)
        consumer.acknowledge(message)
    return arrived


def _receive_before(consumer: Any, deadline: float) -> Any:
    """The next message, which must come before ``deadline`` (wall clock)."""
    return consumer.receive(timeout_millis=max(1, int((deadline - time.time()) * 1000)))


def _assert_nothing_until(consumer: Any, deadline: float) -> None:
    """Nothing arrives before ``deadline`` (wall clock), on our consumer or an official one."""
    try:
        message = consumer.receive(timeout_millis=max(1, int((deadline - time.time()) * 1000)))
    except (Timeout, pulsar.Timeout):
        return
    raise AssertionError(f"{message.data()!r} arrived {deadline - time.time():.2f} s early")


def _assert_held_until(arrived: dict[bytes, tuple[float, Any]], due: dict[bytes, float]) -> None:
    assert set(arrived) == set(due)
    for data, (at, _) in arrived.items():
        assert due[data] - EARLY_SLACK <= at <= due[data] + LATE_SLACK, (data, at - due[data])


def test_our_delayed_messages_wait_on_an_official_shared_consumer(our_client: Client, official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = our_client.create_producer(topic_name)  # batching on, our default
    sent = time.time()
    producer.send(b"after", deliver_after=timedelta(seconds=DELAY))
    producer.send(b"at", deliver_at=int((sent + DELAY) * 1000))
    producer.send(b"now")
    assert _receive_before(consumer, sent + DELAY - EARLY_SLACK).data() == b"now"
    _assert_nothing_until(consumer, sent + DELAY - EARLY_SLACK)
    arrived = _arrivals(consumer, 2, DELAY + LATE_SLACK)
    _assert_held_until(arrived, {b"after": sent + DELAY, b"at": sent + DELAY})


def test_official_delayed_messages_wait_on_our_shared_consumer(our_client: Client, official: pulsar.Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared)
    producer = official.create_producer(topic_name, batching_enabled=True, batching_max_publish_delay_ms=10)
    sent = time.time()
    producer.send(b"after", deliver_after=timedelta(seconds=DELAY))
    producer.send(b"at", deliver_at=int((sent + DELAY) * 1000))
    producer.send(b"now")
    assert _receive_before(consumer, sent + DELAY - EARLY_SLACK).data() == b"now"
    _assert_nothing_until(consumer, sent + DELAY - EARLY_SLACK)
    _assert_held_until(_arrivals(consumer, 2, DELAY + LATE_SLACK), {b"after": sent + DELAY, b"at": sent + DELAY})


def test_our_asyncio_producer_delays_a_message(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)

    async def send() -> float:
        client = our_asyncio.Client(broker.service_url, operation_timeout_seconds=10)
        try:
            producer = await client.create_producer(topic_name)
            sent = time.time()
            await producer.send(b"later", deliver_after=timedelta(seconds=DELAY))
            await producer.send(b"now", disable_replication=True)
            return sent
        finally:
            await client.close()

    sent = asyncio.run(send())
    assert _receive_before(consumer, sent + DELAY - EARLY_SLACK).data() == b"now"
    _assert_held_until(_arrivals(consumer, 1, DELAY + LATE_SLACK), {b"later": sent + DELAY})


def test_an_exclusive_subscription_gets_a_delayed_message_at_once(
    our_client: Client, official: pulsar.Client, topic_name: str
) -> None:
    """Pulsar delays delivery on Shared and Key_Shared subscriptions only."""
    consumer = official.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = our_client.create_producer(topic_name)
    sent = time.time()
    producer.send(b"much later", deliver_after=timedelta(minutes=10))
    producer.send(b"now")
    assert data_of(receive_n(consumer, 2)) == [b"much later", b"now"]
    assert time.time() - sent < DELAY


def test_a_batching_producer_sends_delayed_messages_outside_its_batches(
    our_client: Client, official: pulsar.Client, topic_name: str
) -> None:
    consumer = official.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = our_client.create_producer(topic_name, batching_max_messages=100, batching_max_publish_delay_ms=50)
    sent = time.time()
    for i in range(12):
        if i % 4 == 3:
            producer.send_async(b"delayed-%d" % i, None, deliver_after=timedelta(seconds=DELAY))
        else:
            producer.send_async(b"plain-%d" % i, None, partition_key=f"k{i}")
    producer.flush()
    plain = [_receive_before(consumer, sent + DELAY - EARLY_SLACK) for _ in range(9)]
    assert sorted(data_of(plain)) == sorted(b"plain-%d" % i for i in range(12) if i % 4 != 3)
    assert any(m.message_id().batch_index() > 0 for m in plain), "the plain messages were batched"
    assert all(m.partition_key() == m.data().decode().replace("plain-", "k") for m in plain)
    _assert_nothing_until(consumer, sent + DELAY - EARLY_SLACK)
    delayed = _arrivals(consumer, 3, DELAY + LATE_SLACK)
    _assert_held_until(delayed, dict.fromkeys((b"delayed-3", b"delayed-7", b"delayed-11"), sent + DELAY))
    assert all(message.message_id().batch_index() == -1 for _, message in delayed.values()), "each its own entry"


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
def test_messages_with_replication_fields_are_delivered(
    our_client: Client, official: pulsar.Client, topic_name: str, batching: bool
) -> None:
    """A message for other clusters, or for this one only, is still stored and delivered here, in
    order, whichever client sends it and whichever receives it."""
    fields: list[dict[str, Any]] = [
        {"replication_clusters": ["elsewhere"]},
        {"replication_clusters": ["elsewhere"]},
        {"disable_replication": True},
        {},
        {"replication_clusters": ["elsewhere", "yonder"], "disable_replication": False},
    ]
    expected = [b"r%d" % i for i in range(len(fields))]
    ours_consumer = our_client.subscribe(topic_name, "ours", initial_position=pulsar.InitialPosition.Earliest)
    theirs_consumer = official.subscribe(topic_name, "theirs", initial_position=pulsar.InitialPosition.Earliest)
    ours = our_client.create_producer(topic_name, batching_enabled=batching, batching_max_publish_delay_ms=60_000)
    for payload, given in zip(expected, fields, strict=True):
        ours.send_async(payload, None, **given)
    ours.flush()
    theirs = official.create_producer(topic_name, batching_enabled=batching, batching_max_publish_delay_ms=60_000)
    for payload, given in zip(expected, fields, strict=True):
        theirs.send_async(payload, None, **given)
    theirs.flush()
    for consumer in (ours_consumer, theirs_consumer):
        assert data_of(receive_n(consumer, 2 * len(expected))) == expected * 2
        _assert_nothing_until(consumer, time.time() + 0.3)


def test_the_broker_shows_the_delivery_fields_of_our_entries(our_client: Client, broker: Any, topic_name: str) -> None:
    """Peeked entries carry Pulsar's X-Pulsar-replicated-to (one header per cluster) and
    X-Pulsar-deliver-at-time headers: our producer writes replicate_to in a batch's metadata, keeps
    a batch to one set of clusters, and sends a delayed message as its own entry."""
    our_client.subscribe(topic_name, "sub").close()
    producer = our_client.create_producer(topic_name, batching_max_publish_delay_ms=60_000)
    producer.send_async(b"a", None, replication_clusters=["east", "west"])
    producer.send_async(b"b", None, replication_clusters=["east", "west"])
    producer.send_async(b"c", None, disable_replication=True)
    producer.send_async(b"d", None, deliver_at=1_900_000_000_120)
    future = producer.send_future(b"e", deliver_at=1_900_000_000_000, replication_clusters=["east"])
    producer.flush()
    assert future.result(timeout=10).batch_index() == -1
    seen = []
    for position in (1, 2, 3, 4):
        response = broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/subscription/sub/position/{position}")
        assert response.status_code == 200, response.text
        headers = response.headers
        seen.append(
            (
                headers.get("X-Pulsar-num-batch-message"),
                headers.get_list("X-Pulsar-replicated-to"),
                headers.get("X-Pulsar-deliver-at-time"),
            )
        )
    # Pulsar writes the times' fractions without trailing zeros.
    assert seen == [
        ("2", ["east", "west"], None),
        ("1", ["__local__"], None),
        (None, [], "2030-03-17T17:46:40.12Z"),
        (None, ["east"], "2030-03-17T17:46:40Z"),
    ]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"deliver_after": 5}, "deliver_after"),
        ({"deliver_at": "x"}, "deliver_at"),
        ({"replication_clusters": "a"}, "replication_clusters"),
        ({"disable_replication": None}, "disable_replication"),
        ({"properties": "a=1"}, "properties"),
        ({"partition_key": 7}, "partition_key"),
        ({"ordering_key": b"o"}, "ordering_key"),
    ],
    ids=lambda value: value if isinstance(value, str) else repr(next(iter(value.values()))),
)
def test_bad_send_arguments_raise_value_error_as_the_official_client(
    our_client: Client, official: pulsar.Client, topic_name: str, arguments: dict[str, Any], named: str
) -> None:
    ours = our_client.create_producer(topic_name)
    theirs = official.create_producer(topic_name)
    for producer in (ours, theirs):
        with pytest.raises(ValueError, match=f"Argument {named} "):
            producer.send(b"x", **arguments)
        with pytest.raises(ValueError, match=f"Argument {named} "):
            producer.send_async(b"x", None, **arguments)
    ours.send(b"still sends")
