"""The official Client arguments at work: positions, bad arguments, listener name, stats and loggers,
regex subscription modes, shutdown, MessageBatch and MessageId.wrap, on the module's broker."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from airflow_pulsar.client import (
    Client,
    ConsoleLogger,
    ConsumerBatchReceivePolicy,
    FileLogger,
    LoggerLevel,
    MessageBatch,
    MessageId,
    RegexSubscriptionMode,
)
from airflow_pulsar.client.exceptions import AlreadyClosed, PulsarException, Result, Timeout
from airflow_pulsar.client.protocol.PulsarApi_pb2 import SingleMessageMetadata
from tests.support.polling import wait_until


def test_positional_arguments_take_the_official_places(broker: Any) -> None:
    # pulsar.Client(url, authentication, operation_timeout_seconds, io_threads, ...): 4 is io_threads.
    with Client(broker.service_url, None, 7, 4) as client:
        assert (client.operation_timeout, client.connection_timeout) == (7.0, 10.0)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"io_threads": "4"}, "io_threads"),
        ({"operation_timeout_seconds": 0}, "operation_timeout_seconds"),
        ({"stats_interval_in_seconds": 1.5}, "stats_interval_in_seconds"),
        ({"use_tls": 1}, "use_tls"),
        ({"listener_name": 3}, "listener_name"),
        ({"logger": "stdout"}, "Logger"),
    ],
)
def test_bad_client_arguments_raise_value_error_naming_them(broker: Any, arguments: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Client(broker.service_url, **arguments)


def test_bad_urls_and_factory_arguments_raise_value_error(our_client: Client, topic_name: str) -> None:
    for url in ("gopher://nowhere", "pulsar://", "pulsar://host:port"):
        with pytest.raises(ValueError):
            Client(url)
    with pytest.raises(ValueError, match="send_timeout_millis"):
        our_client.create_producer(topic_name, send_timeout_millis="30")
    with pytest.raises(ValueError, match="regex_subscription_mode"):
        our_client.subscribe(topic_name, "sub", regex_subscription_mode=7)
    with pytest.raises(ValueError, match="max_num_message"):
        ConsumerBatchReceivePolicy(1.5, 0, 0)


def test_a_listener_name_goes_with_the_lookup(broker: Any, topic_name: str) -> None:
    """Both brokers advertise one unnamed listener: a lookup naming another fails, as Pulsar fails it."""
    with Client(broker.service_url, operation_timeout_seconds=2, listener_name="external") as client:
        with pytest.raises(PulsarException) as failure:
            client.create_producer(topic_name)
        assert failure.value.result in (Result.ServiceUnitNotReady, Result.Timeout)
    with Client(broker.service_url, operation_timeout_seconds=5) as client:
        client.create_producer(topic_name).send(b"reached")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_stats_are_logged_every_interval_through_the_given_logger(broker: Any, topic_name: str) -> None:
    target = logging.getLogger(f"app-{topic_name}")
    target.setLevel(logging.INFO)
    lines = _Lines()
    target.addHandler(lines)
    with Client(broker.service_url, stats_interval_in_seconds=1, logger=target) as client:
        client.create_producer(topic_name).send(b"counted")
        client.subscribe(topic_name, "stats-sub")
        wait_until(lambda: any(line.startswith(f"producer persistent://public/default/{topic_name}") for line in lines.lines), 5)
        wait_until(lambda: any(line.startswith("consumer ") for line in lines.lines), 5)
    count = len(lines.lines)
    logging.getLogger("airflow_pulsar.client.client").warning("after close")
    assert len(lines.lines) == count, "a closed client's records no longer go to its logger"


def test_console_and_file_loggers_write_at_their_level(broker: Any, topic_name: str, tmp_path: Path, capsys: Any) -> None:
    log_file = tmp_path / "client.log"
    with Client(broker.service_url, logger=FileLogger(LoggerLevel.Info, str(log_file))) as client:
        client.create_producer(topic_name).send(b"x")
        logging.getLogger("airflow_pulsar.client.client").debug("debug is below Info")
        logging.getLogger("airflow_pulsar.client.client").info("info passes")
    written = log_file.read_text()
    assert "info passes" in written and "debug is below Info" not in written
    with Client(broker.service_url, logger=ConsoleLogger(LoggerLevel.Error)) as client:
        client.create_producer(topic_name).send(b"y")
        logging.getLogger("airflow_pulsar.client.client").info("info is below Error")
        logging.getLogger("airflow_pulsar.client.client").error("error passes")
    out = capsys.readouterr().out
    assert "error passes" in out and "info is below Error" not in out


def test_shutdown_fails_pending_sends_without_waiting(broker: Any, topic_name: str) -> None:
    client = Client(broker.service_url)
    producer = client.create_producer(topic_name, batching_max_publish_delay_ms=60_000, batching_max_messages=1000)
    outcomes: list[Result] = []
    producer.send_async(b"held in the batch", lambda result, _id: outcomes.append(result))
    started = time.monotonic()
    client.shutdown()
    assert time.monotonic() - started < 2
    assert outcomes == [Result.AlreadyClosed]
    with pytest.raises(AlreadyClosed):
        producer.send(b"after shutdown")


def test_a_closed_producer_refuses_flush_as_the_official_one(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    refusals = []
    with Client(broker.service_url) as ours:
        for client in (official, ours):
            producer = client.create_producer(topic_name)
            producer.close()
            with pytest.raises(Exception) as refused:
                producer.flush()
            refusals.append(type(refused.value).__name__)
    assert refusals == ["AlreadyClosed", "AlreadyClosed"]


def _received_topics(consumer: Any, expected: int) -> set[str]:
    topics = set()
    try:
        for _ in range(expected + 1):
            topics.add(consumer.receive(timeout_millis=3000).topic_name())
    except Timeout:
        pass
    return topics


@pytest.mark.parametrize(
    ("mode", "wanted"),
    [
        (RegexSubscriptionMode.PersistentOnly, {"persistent"}),
        (RegexSubscriptionMode.NonPersistentOnly, {"non-persistent"}),
        (RegexSubscriptionMode.AllTopics, {"persistent", "non-persistent"}),
    ],
)
def test_regex_subscription_mode_picks_the_kinds_of_topic(
    official: pulsar.Client,
    our_client: Client,
    topic_name: str,
    mode: RegexSubscriptionMode,
    wanted: set[str],
) -> None:
    base = re.sub(r"[^\w]", "", topic_name)[-20:]
    names = {"persistent": f"persistent://public/default/rx{base}-p", "non-persistent": f"non-persistent://public/default/rx{base}-np"}
    producers = {kind: official.create_producer(name) for kind, name in names.items()}
    consumer = our_client.subscribe(re.compile(f"persistent://public/default/rx{base}-.*"), "rx", regex_subscription_mode=mode)
    for producer in producers.values():
        producer.send(b"hello")
    received = _received_topics(consumer, len(names))
    assert received == {names[kind] for kind in wanted}


def test_message_batch_splits_a_batch_payload_as_the_official_one_does() -> None:
    payload = b""
    for value in (b"a", b"bb", b""):
        meta = SingleMessageMetadata(payload_size=len(value), partition_key=f"k{len(value)}").SerializeToString()
        payload += len(meta).to_bytes(4, "big") + meta + value
    ours = MessageBatch().with_message_id(MessageId(2, 7, 9)).parse_from(payload, 3)
    theirs = pulsar.MessageBatch().with_message_id(pulsar.MessageId(2, 7, 9)).parse_from(payload, 3)
    assert [m.data() for m in ours] == [m.data() for m in theirs] == [b"a", b"bb", b""]
    assert [m.partition_key() for m in ours] == [m.partition_key() for m in theirs]
    assert [str(m.message_id()) for m in ours] == [str(MessageId.wrap(m.message_id())) for m in theirs]
    with pytest.raises(TypeError):
        MessageBatch().with_message_id("7:9")


def test_message_id_wrap_takes_the_official_id() -> None:
    official_id = pulsar.MessageId(1, 5, 6, 2)
    assert MessageId.wrap(official_id) == MessageId(1, 5, 6, 2)
    assert MessageId.deserialize(official_id.serialize()) == MessageId.wrap(official_id)
