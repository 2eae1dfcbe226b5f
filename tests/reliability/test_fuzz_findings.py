"""Hostile requests the broker fuzz test once found mishandled, each pinned down by hand: the broker
answers (or refuses) cleanly, keeps the connection where it should, and keeps serving.

Embedded broker only: these pin down fixes inside our broker's frame handling; how Apache Pulsar
answers the same malformed frames is its own code's business (the differential tests compare the
answers to the bad input a client can really send)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import InitialPosition
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.frames import encode_command, encode_entry, encode_payload_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandAck,
    CommandSubscribe,
    MessageIdData,
    MessageMetadata,
    ServerError,
)
from tests.support.raw_connection import RawConnection

pytestmark = pytest.mark.embedded_only

T = BaseCommand.Type
U64_MAX = (1 << 64) - 1


@pytest.fixture
def handshaken_raw(broker: BrokerProcess) -> Iterator[Callable[..., RawConnection]]:
    """Open handshaken raw connections (to the module's broker, or the one given); closed after."""
    made: list[RawConnection] = []

    def make(target: BrokerProcess | None = None) -> RawConnection:
        connection = RawConnection(target or broker)
        connection.handshake()
        made.append(connection)
        return connection

    yield make
    for connection in made:
        connection.close()


def _name(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def _subscribe(connection: RawConnection, topic: str, sub_type: int, consumer_id: int = 1, **fields: Any) -> None:
    connection.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=_name(topic),
        subscription="sub",
        subType=sub_type,
        consumer_id=consumer_id,
        request_id=100 + consumer_id,
        initialPosition=CommandSubscribe.Earliest,
        **fields,
    )


def _ledger_of(connection: RawConnection, consumer_id: int = 1) -> int:
    last = connection.request(T.GET_LAST_MESSAGE_ID, T.GET_LAST_MESSAGE_ID_RESPONSE, consumer_id=consumer_id, request_id=3)
    return last.getLastMessageIdResponse.last_message_id.ledgerId


def _still_serves(connection: RawConnection) -> None:
    connection.request(T.PING, T.PONG)


def test_sequence_id_and_publish_time_past_int64_do_not_stop_storage(
    broker_factory: Any, handshaken_raw: Callable[..., RawConnection], topic_name: str
) -> None:
    broker = broker_factory("--dedup")
    connection = handshaken_raw(broker)
    connection.request(T.PRODUCER, T.PRODUCER_SUCCESS, topic=_name(topic_name), producer_id=1, request_id=1)
    metadata = MessageMetadata(producer_name="raw", sequence_id=U64_MAX, publish_time=U64_MAX)
    send = commands.make(T.SEND, producer_id=1, sequence_id=U64_MAX, highest_sequence_id=U64_MAX)
    connection.send(encode_payload_command(send, encode_entry(metadata, b"far")))
    assert connection.reply(T.SEND_RECEIPT).send_receipt.sequence_id == U64_MAX  # echoed as sent
    # The storage still commits: a client round trip on another topic works.
    with Client(broker.service_url, operation_timeout_seconds=5) as client:
        consumer = client.subscribe(topic_name + "-after", "sub")
        client.create_producer(topic_name + "-after", send_timeout_millis=5000).send(b"still stored")
        assert consumer.receive(5000).data() == b"still stored"


def test_times_past_int64_in_subscribe_and_seek_are_answered(handshaken_raw: Callable[..., RawConnection], topic_name: str) -> None:
    connection = handshaken_raw()
    _subscribe(connection, topic_name, CommandSubscribe.Exclusive, start_message_rollback_duration_sec=U64_MAX)
    connection.request(T.SEEK, T.SUCCESS, consumer_id=1, request_id=7, message_publish_time=U64_MAX)


def test_consumer_stats_while_a_batch_outgrew_the_permits(
    broker: BrokerProcess, handshaken_raw: Callable[..., RawConnection], topic_name: str
) -> None:
    connection = handshaken_raw()
    _subscribe(connection, topic_name, CommandSubscribe.Exclusive)
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_max_messages=10, batching_max_publish_delay_ms=1000)
        for i in range(10):
            producer.send_async(b"%d" % i, None)
        producer.flush()
    connection.send(encode_command(commands.make(T.FLOW, consumer_id=1, messagePermits=1)))
    connection.reply(T.MESSAGE)  # a batch of 10 on 1 permit: the broker's count is now -9
    stats = connection.request(T.CONSUMER_STATS, T.CONSUMER_STATS_RESPONSE, consumer_id=1, request_id=9)
    assert stats.consumerStatsResponse.availablePermits == 0


def test_send_claiming_no_messages_is_refused(handshaken_raw: Callable[..., RawConnection], topic_name: str) -> None:
    connection = handshaken_raw()
    connection.request(T.PRODUCER, T.PRODUCER_SUCCESS, topic=_name(topic_name), producer_id=1, request_id=1)
    metadata = MessageMetadata(producer_name="raw", sequence_id=0, publish_time=1)
    send = commands.make(T.SEND, producer_id=1, sequence_id=0, num_messages=0)
    connection.send(encode_payload_command(send, encode_entry(metadata, b"x")))
    error = connection.reply(T.SEND_ERROR).send_error
    assert "at least one message" in error.message
    _still_serves(connection)


def test_cumulative_ack_on_shared_is_refused_as_not_allowed(
    broker: BrokerProcess, handshaken_raw: Callable[..., RawConnection], topic_name: str
) -> None:
    connection = handshaken_raw()
    _subscribe(connection, topic_name, CommandSubscribe.Shared)
    with Client(broker.service_url) as client:
        client.create_producer(topic_name).send(b"m0")
    connection.send(
        encode_command(
            commands.make(
                T.ACK,
                consumer_id=1,
                ack_type=CommandAck.Cumulative,
                message_id=[MessageIdData(ledgerId=_ledger_of(connection), entryId=0)],
                request_id=5,
            )
        )
    )
    response = connection.reply(T.ACK_RESPONSE).ackResponse
    assert response.error == ServerError.NotAllowedError and "not allowed" in response.message
    _still_serves(connection)


def test_second_subscribe_of_one_consumer_id_in_flight_leaves_no_ghost(
    broker: BrokerProcess, handshaken_raw: Callable[..., RawConnection], topic_name: str
) -> None:
    connection = handshaken_raw()
    subscribe = encode_command(
        commands.make(
            T.SUBSCRIBE, topic=_name(topic_name), subscription="sub", subType=CommandSubscribe.Exclusive, consumer_id=1, request_id=1
        )
    )
    connection.send(subscribe + subscribe)  # the second arrives while the first is being stored
    replies = []
    while len(replies) < 2:
        frame = connection.sock.recv(65536)
        assert frame, "the broker closed the connection"
        replies += [f.command for f in connection.decoder.feed(frame)]
    assert sorted(r.type for r in replies) == [T.SUCCESS, T.ERROR]
    assert next(r for r in replies if r.type == T.ERROR).error.error == ServerError.ServiceNotReady
    connection.close()
    # Nothing of this connection stays behind: an Exclusive subscribe from a client succeeds.
    with Client(broker.service_url, operation_timeout_seconds=5) as client:
        client.subscribe(topic_name, "sub").close()


def test_ack_past_the_last_entry_skips_nothing(
    broker: BrokerProcess, handshaken_raw: Callable[..., RawConnection], topic_name: str
) -> None:
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        producer.send(b"m0")
        connection = handshaken_raw()
        _subscribe(connection, topic_name, CommandSubscribe.Exclusive)
        ahead = MessageIdData(ledgerId=_ledger_of(connection), entryId=1000)
        connection.send(encode_command(commands.make(T.ACK, consumer_id=1, ack_type=CommandAck.Cumulative, message_id=[ahead])))
        _still_serves(connection)
        connection.close()
        for payload in (b"m1", b"m2"):
            producer.send(payload)
        consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        assert [consumer.receive(5000).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]


def test_text_that_is_not_utf8_is_refused_by_name(handshaken_raw: Callable[..., RawConnection]) -> None:
    connection = handshaken_raw()
    lookup = commands.make(T.LOOKUP, topic="@@", request_id=1)
    body = lookup.SerializeToString().replace(b"@@", b"\xff\xfe")
    connection.send(struct.pack(">II", len(body) + 4, len(body)) + body)
    with pytest.raises(AssertionError, match="LOOKUP field topic is not UTF-8"):
        connection.reply(T.LOOKUP_RESPONSE)
    connection.assert_closed_by_broker()


def test_send_without_payload_is_refused(handshaken_raw: Callable[..., RawConnection], topic_name: str) -> None:
    connection = handshaken_raw()
    connection.request(T.PRODUCER, T.PRODUCER_SUCCESS, topic=_name(topic_name), producer_id=1, request_id=1)
    connection.send(encode_command(commands.make(T.SEND, producer_id=1, sequence_id=0)))
    with pytest.raises(AssertionError, match="SEND without a payload"):
        connection.reply(T.SEND_RECEIPT)
    connection.assert_closed_by_broker()
