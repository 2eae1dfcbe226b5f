"""TableView: the latest value per key, with the official client's TableView as the oracle on the same topic."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from airflow_pulsar.client import schema as our_schema
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from tests.support.polling import wait_until

# Updates, deletes (an empty payload and a null value), a key set again after its delete, and a
# message without a key, which a table view skips.
SEQUENCE: list[tuple[str | None, bytes | None]] = [
    ("a", b"1"), ("b", b"1"), ("c", b"1"), ("a", b"2"), ("b", b""), (None, b"unkeyed"),
    ("d", b"1"), ("c", None), ("b", b"3"), ("e", b"1"), ("e", b""),
]


def produce(official: pulsar.Client, topic: str, sequence: list[tuple[str | None, bytes | None]]) -> None:
    producer = official.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50)
    for key, value in sequence:
        producer.send_async(value, None, partition_key=key)  # type: ignore[arg-type]
    producer.flush()
    producer.close()


def contents(view: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    view.for_each(lambda key, value: seen.__setitem__(key, value))
    return seen


@pytest.fixture
def views(official: pulsar.Client, our_client: Client) -> Iterator[list[Any]]:
    """Table views to close after the test, whichever client made them."""
    made: list[Any] = []
    yield made
    for view in made:
        view.close()


@pytest.mark.parametrize("partitions", [0, 3], ids=["non-partitioned", "partitioned"])
def test_same_contents_as_the_official_table_view(
    broker: Any, official: pulsar.Client, our_client: Client, views: list[Any], topic_name: str, partitions: int
) -> None:
    if partitions:
        with PulsarAdmin(broker.web_url) as admin:
            admin.create_partitioned_topic(topic_name, partitions)
    produce(official, topic_name, SEQUENCE)
    theirs = official.create_table_view(topic_name)
    ours = our_client.create_table_view(topic_name)
    views += [theirs, ours]
    expected = {"a": b"2", "b": b"3", "d": b"1"}
    assert contents(theirs) == expected  # the oracle agrees with the rules as written
    assert contents(ours) == expected and len(ours) == len(theirs) == 3
    for key in ("a", "b", "c", "d", "e", "missing"):
        assert ours.get(key) == theirs.get(key)

    # Live updates after creation reach both views.
    produce(official, topic_name, [("a", b""), ("f", b"9"), ("d", b"2")])
    after = {"b": b"3", "d": b"2", "f": b"9"}
    wait_until(lambda: contents(theirs) == after, "the official view to catch up")
    wait_until(lambda: contents(ours) == after, "our view to catch up")


def test_listeners_hear_what_the_official_listeners_hear(
    official: pulsar.Client, our_client: Client, views: list[Any], topic_name: str
) -> None:
    produce(official, topic_name, SEQUENCE[:3])
    heard: dict[str, list[tuple[str, bytes]]] = {"theirs": [], "ours": []}
    threads: set[str] = set()
    theirs = official.create_table_view(topic_name)
    ours = our_client.create_table_view(topic_name)
    views += [theirs, ours]
    theirs.for_each_and_listen(lambda key, value: heard["theirs"].append((key, value)))

    def listen(key: str, value: bytes) -> None:
        threads.add(threading.current_thread().name)
        heard["ours"].append((key, value))

    ours.for_each_and_listen(listen)
    # The entries there are, in any order, then every update in arrival order (deletes with an empty value).
    assert sorted(heard["ours"]) == sorted(heard["theirs"]) == [("a", b"1"), ("b", b"1"), ("c", b"1")]
    produce(official, topic_name, SEQUENCE[3:])
    updates = [(k, v or b"") for k, v in SEQUENCE[3:] if k is not None]
    wait_until(lambda: len(heard["theirs"]) == 3 + len(updates), "the official listener")
    wait_until(lambda: len(heard["ours"]) == 3 + len(updates), "our listener")
    assert heard["ours"][3:] == heard["theirs"][3:] == updates
    # The entries there were are given on the caller's thread, updates on the view's reading thread.
    assert threads == {threading.current_thread().name, f"pulsar-table-view-{topic_name}"}


def test_values_decode_with_the_schema(official: pulsar.Client, our_client: Client, views: list[Any], topic_name: str) -> None:
    producer = official.create_producer(topic_name, schema=pulsar.schema.StringSchema())
    for key, value in (("x", "one"), ("y", "two"), ("x", "three")):
        producer.send(value, partition_key=key)
    theirs = official.create_table_view(topic_name, schema=pulsar.schema.StringSchema())
    ours = our_client.create_table_view(topic_name, schema=our_schema.StringSchema())
    views += [theirs, ours]
    assert contents(ours) == contents(theirs) == {"x": "three", "y": "two"}
    assert ours.get("x") == theirs.get("x") == "three"


def test_named_subscription_and_closing(broker: Any, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, SEQUENCE[:2])
    theirs = official.create_table_view(topic_name, "their-view")
    ours = our_client.create_table_view(topic_name, "our-view")
    assert str(ours) == str(theirs).replace("their-view", "our-view") == f"TableView(topic={topic_name}, subscription=our-view)"
    assert repr(our_client.create_table_view(topic_name)) == f"TableView(topic={topic_name})"
    assert {"their-view", "our-view"} <= set(broker.topic_stats(topic_name)["subscriptions"])
    ours.close()
    theirs.close()
    wait_until(lambda: "our-view" not in broker.topic_stats(topic_name)["subscriptions"], "the view's subscription to go")
    produce(official, topic_name, [("a", b"late")])
    assert ours.get("a") == b"1"  # a closed view reads no more


def test_bad_arguments_are_refused_as_the_official_client_refuses_them(
    official: pulsar.Client, our_client: Client, topic_name: str
) -> None:
    for arguments in ((5,), (topic_name, 5), (topic_name, None, "bytes")):
        with pytest.raises(ValueError):
            official.create_table_view(*arguments)
        with pytest.raises(ValueError, match="Argument"):
            our_client.create_table_view(*arguments)
