"""A stalled or silent network: every blocking call ends with a clear error within its timeout
instead of hanging, and keepalive notices a dead peer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import AdminTimeoutError, PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import ConnectError, Timeout
from airflow_pulsar.client.producer import ProducerAccessMode
from tests.support.fault_proxy import TO_BROKER, TO_CLIENT, FaultProxy, T

OPERATION_TIMEOUT = 1.0
# How far past its timeout a call may return: scheduling on two busy cores, not a hang.
SLACK = 2.0


@pytest.fixture
def proxy(broker: BrokerProcess) -> Iterator[FaultProxy]:
    """A fault proxy in front of the broker's binary port."""
    with FaultProxy("127.0.0.1", broker.port) as proxy:
        yield proxy


@pytest.fixture
def our_client(proxy: FaultProxy) -> Iterator[Client]:
    """Our client through the proxy, with a short operation timeout."""
    with Client(proxy.service_url, operation_timeout_seconds=OPERATION_TIMEOUT, connection_timeout_ms=1000) as client:
        yield client
        proxy.resume()  # let close() say goodbye


def _fails_in_time(call: Callable[[], Any], error: type[Exception], timeout: float, match: str) -> Exception:
    """Run ``call``; it must raise ``error`` matching ``match`` after about ``timeout`` seconds."""
    start = time.monotonic()
    with pytest.raises(error, match=match) as raised:
        call()
    elapsed = time.monotonic() - start
    assert timeout * 0.8 <= elapsed <= timeout + SLACK, f"failed after {elapsed:.2f} s, expected about {timeout} s"
    print(f"\nRELIABILITY stalled network: {error.__name__} after {elapsed:.2f} s: {raised.value}")
    return raised.value


def test_send_times_out_on_a_stalled_connection(proxy: FaultProxy, our_client: Client, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, send_timeout_millis=1000)
    producer.send(b"before")
    proxy.stall()
    _fails_in_time(lambda: producer.send(b"stalled"), Timeout, 1.0, "send timeout")
    proxy.resume()
    producer.send(b"after")  # the connection still works once traffic flows again


def test_receive_with_timeout_on_a_stalled_connection(proxy: FaultProxy, our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, "stalled")
    proxy.stall()
    _fails_in_time(lambda: consumer.receive(500), Timeout, 0.5, "no message within 500 ms")


@pytest.mark.parametrize("command", ["PARTITIONED_METADATA", "LOOKUP", "SUBSCRIBE"])
def test_subscribe_times_out_when_a_request_goes_unanswered(
    proxy: FaultProxy, our_client: Client, topic_name: str, command: str
) -> None:
    our_client.create_producer(topic_name)  # the connection is up
    proxy.swallow(TO_BROKER, T.Value(command))
    _fails_in_time(
        lambda: our_client.subscribe(topic_name, "stalled"), Timeout, OPERATION_TIMEOUT, f"{command} .* no response within 1 s"
    )


def test_create_producer_times_out_when_its_request_goes_unanswered(
    proxy: FaultProxy, our_client: Client, topic_name: str
) -> None:
    our_client.subscribe(topic_name, "up")  # the connection is up
    proxy.swallow(TO_BROKER, T.PRODUCER)
    _fails_in_time(lambda: our_client.create_producer(topic_name), Timeout, OPERATION_TIMEOUT, "PRODUCER .* no response within 1 s")


def test_subscribe_whose_answer_was_lost_leaves_no_consumer_behind(
    proxy: FaultProxy, our_client: Client, topic_name: str
) -> None:
    producer = our_client.create_producer(topic_name)
    proxy.swallow(TO_CLIENT, T.SUCCESS)  # the broker subscribes, the client never hears of it
    _fails_in_time(lambda: our_client.subscribe(topic_name, "sub"), Timeout, OPERATION_TIMEOUT, "SUBSCRIBE")
    proxy.resume()
    # The exclusive subscription is free again: the timed-out consumer was closed on the broker.
    consumer = our_client.subscribe(topic_name, "sub")
    producer.send(b"to the second consumer")
    assert consumer.receive(5000).data() == b"to the second consumer"


def test_producer_whose_answer_was_lost_leaves_no_producer_behind(
    proxy: FaultProxy, our_client: Client, topic_name: str
) -> None:
    our_client.subscribe(topic_name, "up")
    proxy.swallow(TO_CLIENT, T.PRODUCER_SUCCESS)
    _fails_in_time(
        lambda: our_client.create_producer(topic_name, access_mode=ProducerAccessMode.Exclusive),
        Timeout,
        OPERATION_TIMEOUT,
        "PRODUCER",
    )
    proxy.resume()
    our_client.create_producer(topic_name, access_mode=ProducerAccessMode.Exclusive).send(b"the topic is free again")


def test_create_producer_times_out_on_a_stalled_connection(proxy: FaultProxy, our_client: Client, topic_name: str) -> None:
    our_client.subscribe(topic_name, "up")  # the connection is up
    proxy.stall()
    _fails_in_time(lambda: our_client.create_producer(topic_name), Timeout, OPERATION_TIMEOUT, "no response within 1 s")


def test_connect_times_out_when_the_broker_never_answers(proxy: FaultProxy, our_client: Client, topic_name: str) -> None:
    proxy.drop()  # the TCP connection opens, but CONNECT gets no answer
    _fails_in_time(lambda: our_client.create_producer(topic_name), ConnectError, OPERATION_TIMEOUT, "handshake with .* failed")


def test_admin_call_times_out_on_a_stalled_connection(broker: BrokerProcess, topic_name: str) -> None:
    with FaultProxy("127.0.0.1", broker.http_port, framed=False) as proxy, PulsarAdmin(proxy.http_url, timeout_seconds=1) as admin:
        admin.create_topic(topic_name)
        proxy.stall()
        error = _fails_in_time(lambda: admin.topic_stats(topic_name), AdminTimeoutError, 1.0, "cannot reach")
        assert proxy.http_url in str(error)
        proxy.resume()


def test_keepalive_notices_a_silent_broker_and_reconnects(proxy: FaultProxy, broker: BrokerProcess, topic_name: str) -> None:
    with Client(proxy.service_url, keep_alive_interval_seconds=1, connection_timeout_ms=1000) as client:
        producer = client.create_producer(topic_name)
        producer.send(b"before")
        proxy.drop()  # the broker's host vanished: no reset, no answer, nothing
        start = time.monotonic()
        while producer.is_connected():
            assert time.monotonic() - start < 3 + SLACK, "keepalive did not notice the silent broker"
            time.sleep(0.05)
        noticed = time.monotonic() - start
        proxy.resume()
        producer.send(b"after")  # reconnected on its own
        reconnected = time.monotonic() - start
    print(
        f"\nRELIABILITY keepalive (1 s interval): silent broker noticed after {noticed:.2f} s, "
        f"producer sending again {reconnected:.2f} s after the silence began"
    )
