"""HTTP service URLs: the official client and ours, each given the broker's ``http://`` admin URL,
look topics up over REST and then produce and consume over the binary protocol; each scenario runs
with both clients on the broker under test and ours must do what the official one does.

With a token, on both brokers: ``test_differential.py::test_http_service_url_with_a_token``; with
basic authentication and over ``https://``: ``tests/interop/test_http_service_urls_secured.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pulsar
import pulsar.asyncio
import pytest

import airflow_pulsar.client as ours
import airflow_pulsar.client.asyncio as ours_asyncio
from tests.support.official_client import OPERATION_TIMEOUT, RECEIVE_TIMEOUT_MS

pytestmark = pytest.mark.interop

Scenario = Callable[[ModuleType, Any, str], Any]


def both_ways(broker: Any, topic: str, scenario: Scenario, **client_options: Any) -> tuple[Any, Any]:
    """(official outcome, our outcome) of ``scenario`` run by each client on its own topic, both
    clients given the broker's web URL as their service URL."""
    outcomes = []
    for api in (pulsar, ours):
        client = api.Client(broker.web_url, operation_timeout_seconds=OPERATION_TIMEOUT, **client_options)
        try:
            outcomes.append(scenario(api, client, f"{topic}-{api.__name__.rsplit('.', 1)[-1]}"))
        finally:
            client.close()
    return outcomes[0], outcomes[1]


def _round_trip(api: ModuleType, client: Any, topic: str) -> Any:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [producer.send(b"m%d" % index) for index in range(3)]
    received = [consumer.receive(RECEIVE_TIMEOUT_MS) for _ in range(3)]
    reader = client.create_reader(topic, api.MessageId.earliest)
    return [
        [m.data() for m in received],
        [m.message_id().entry_id() for m in received] == [s.entry_id() for s in sent],
        reader.read_next(RECEIVE_TIMEOUT_MS).data(),
        client.get_topic_partitions(topic) == [f"persistent://public/default/{topic}"],
    ]


def _partitioned(api: ModuleType, client: Any, topic: str, broker: Any) -> Any:
    assert broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic}/partitions", json=3).status_code == 204
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    for index in range(6):
        producer.send(b"m%d" % index, partition_key=f"key-{index}")
    received = [consumer.receive(RECEIVE_TIMEOUT_MS) for _ in range(6)]
    return [
        [name.rsplit("-partition-", 1)[1] for name in client.get_topic_partitions(topic)],
        sorted(m.data() for m in received),
        sorted({m.topic_name().rsplit("-partition-", 1)[1] for m in received}),
    ]


def item_record(api: ModuleType, with_count: bool) -> Any:
    """A record named ``Item`` of the client ``api``: its first version, or the second, which adds
    a field with a default (each version its own class, both under the one Avro name)."""
    fields: dict[str, Any] = {"name": api.schema.String()}
    if with_count:
        fields["count"] = api.schema.Integer(default=7, required_default=True)
    return type("Item", (api.schema.Record,), fields)


def _writer_schema_fetched(api: ModuleType, client: Any, topic: str) -> Any:
    """A consumer with a newer Avro schema reads a message written with the older one: the client
    fetches the writer's schema version over REST to decode it."""
    old, new = item_record(api, False), item_record(api, True)
    client.create_producer(topic, schema=api.schema.AvroSchema(old)).send(old(name="first"))
    consumer = client.subscribe(topic, "sub", schema=api.schema.AvroSchema(new), initial_position=api.InitialPosition.Earliest)
    value = consumer.receive(RECEIVE_TIMEOUT_MS).value()
    return [value.name, value.count]


def _pattern(api: ModuleType, client: Any, topic: str) -> Any:
    """A pattern subscription lists the namespace's topics over REST."""
    for suffix in ("a", "b"):
        client.create_producer(f"{topic}-{suffix}").close()
    consumer = client.subscribe(re.compile(f"persistent://public/default/{topic}-.*"), "sub")
    for suffix in ("a", "b"):
        client.create_producer(f"{topic}-{suffix}", batching_enabled=False).send(suffix.encode())
    return sorted(consumer.receive(RECEIVE_TIMEOUT_MS).data() for _ in range(2))


def test_produce_consume_and_read_over_an_http_service_url(broker: Any, topic_name: str) -> None:
    theirs, mine = both_ways(broker, topic_name, _round_trip)
    assert theirs == [[b"m0", b"m1", b"m2"], True, b"m0", True]
    assert mine == theirs


def test_partitioned_topics_over_an_http_service_url(broker: Any, topic_name: str) -> None:
    theirs, mine = both_ways(broker, topic_name, lambda api, client, topic: _partitioned(api, client, topic, broker))
    assert theirs[0] == ["0", "1", "2"] and len(theirs[1]) == 6
    assert mine == theirs


def test_schema_versions_are_fetched_over_rest(broker: Any, topic_name: str) -> None:
    theirs, mine = both_ways(broker, topic_name, _writer_schema_fetched)
    assert theirs == ["first", 7]
    assert mine == theirs


def test_pattern_subscriptions_list_topics_over_rest(broker: Any, topic_name: str) -> None:
    theirs, mine = both_ways(broker, topic_name, _pattern)
    assert theirs == [b"a", b"b"]
    assert mine == theirs


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_an_http_service_url_nothing_answers(scheme: str, topic_name: str) -> None:
    """Nothing listens at the URL: both clients retry until the operation timeout and then fail
    the producer; the official client says Timeout, ours names the last error, ConnectError, as it
    does for a ``pulsar://`` URL nothing answers (docs/client.md)."""
    url = f"{scheme}://127.0.0.1:1"
    outcomes = []
    for api in (pulsar, ours):
        client = api.Client(url, operation_timeout_seconds=2)
        try:
            with pytest.raises(api.PulsarException) as raised:
                client.create_producer(topic_name)
            outcomes.append(type(raised.value).__name__)
        finally:
            client.close()
    assert outcomes == ["Timeout", "ConnectError"]


def test_the_documented_example(broker: Any, topic_name: str) -> None:
    """docs/examples/http/http_service_url.py, as the client page shows it."""
    path = Path(__file__).resolve().parents[2] / "docs" / "examples" / "http" / "http_service_url.py"
    spec = importlib.util.spec_from_file_location("http_service_url_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.round_trip(broker.web_url, topic_name) == b"hello over an HTTP lookup"


async def _asyncio_round_trip(api: ModuleType, url: str, topic: str) -> bytes:
    client = api.Client(url)
    try:
        consumer = await client.subscribe(topic, "sub")
        producer = await client.create_producer(topic)
        await producer.send(b"async over http")
        return (await consumer.receive()).data()
    finally:
        await client.close()


def test_the_asyncio_clients_over_an_http_service_url(broker: Any, topic_name: str) -> None:
    apis = (pulsar.asyncio, ours_asyncio)
    outcomes = [asyncio.run(_asyncio_round_trip(api, broker.web_url, f"{topic_name}-{index}")) for index, api in enumerate(apis)]
    assert outcomes == [b"async over http", b"async over http"]


def test_a_namespace_that_does_not_exist(broker: Any) -> None:
    """Refused at once over either URL; over HTTP the official client calls it ConnectError, ours
    TopicNotFound, as both clients call it over the binary protocol (docs/client.md)."""
    outcomes = []
    for url in (broker.web_url, broker.service_url):
        for api in (pulsar, ours):
            client = api.Client(url, operation_timeout_seconds=OPERATION_TIMEOUT)
            try:
                with pytest.raises(api.PulsarException) as raised:
                    client.create_producer("persistent://no-such-tenant/ns/topic")
                outcomes.append(type(raised.value).__name__)
            finally:
                client.close()
    assert outcomes == ["ConnectError", "TopicNotFound", "TopicNotFound", "TopicNotFound"]


def test_several_hosts_the_first_answering_serves(broker: Any, topic_name: str) -> None:
    """``http://dead:1,live:port``: nothing answers on the first host, the second serves the lookups."""
    url = "http://127.0.0.1:1," + broker.web_url.removeprefix("http://")
    outcomes = []
    for index, api in enumerate((pulsar, ours)):
        client = api.Client(url, operation_timeout_seconds=OPERATION_TIMEOUT)
        try:
            topic = f"{topic_name}-{index}"
            consumer = client.subscribe(topic, "sub")
            client.create_producer(topic).send(b"second host")
            outcomes.append(consumer.receive(RECEIVE_TIMEOUT_MS).data())
        finally:
            client.close()
    assert outcomes == [b"second host", b"second host"]
