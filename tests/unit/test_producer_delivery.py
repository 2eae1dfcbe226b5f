"""The delivery arguments of a send become one Delivery: times, clusters, and the official client's checks."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from airflow_pulsar.client.producer.delivery import LOCAL_CLUSTER, Delivery, delivery_of
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata


def _delivery(**arguments: Any) -> Delivery | None:
    given = {"replication_clusters": None, "disable_replication": False, "deliver_at": None, "deliver_after": None}
    return delivery_of(**(given | arguments))


@pytest.mark.parametrize(
    "arguments",
    [{}, {"replication_clusters": []}, {"deliver_at": 0}, {"deliver_after": timedelta(0)}],
    ids=["defaults", "no-clusters", "deliver-at-zero", "no-delay"],
)
def test_arguments_that_ask_for_nothing_give_no_delivery(arguments: dict[str, Any]) -> None:
    """As in the official client, which sets a field only for a truthy argument."""
    assert _delivery(**arguments) is None


def test_deliver_at_is_taken_as_given() -> None:
    assert _delivery(deliver_at=1_800_000_000_123) == Delivery(1_800_000_000_123, ())


def test_deliver_after_counts_from_the_send_and_wins_over_deliver_at() -> None:
    before = int(time.time() * 1000)
    delivery = _delivery(deliver_at=1_800_000_000_000, deliver_after=timedelta(seconds=2, microseconds=1500))
    after = int(time.time() * 1000)
    assert delivery is not None and delivery.replicate_to == ()
    assert delivery.deliver_at_time is not None and before + 2001 <= delivery.deliver_at_time <= after + 2001


def test_replication_clusters_and_disable_replication() -> None:
    assert _delivery(replication_clusters=["east", "west"]) == Delivery(None, ("east", "west"))
    assert _delivery(disable_replication=True) == Delivery(None, (LOCAL_CLUSTER,))
    # disable_replication clears the list first, as the official MessageBuilder does.
    assert _delivery(replication_clusters=["east"], disable_replication=True) == Delivery(None, ("__local__",))


def test_stamp_writes_the_metadata_fields() -> None:
    metadata = MessageMetadata()
    Delivery(1_800_000_000_000, ("east",)).stamp(metadata)
    assert (metadata.deliver_at_time, list(metadata.replicate_to)) == (1_800_000_000_000, ["east"])
    unstamped = MessageMetadata()
    Delivery(None, ()).stamp(unstamped)
    assert not unstamped.HasField("deliver_at_time") and not unstamped.replicate_to


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"deliver_after": 5}, "deliver_after"),
        ({"deliver_after": 5.0}, "deliver_after"),
        ({"deliver_at": "x"}, "deliver_at"),
        ({"deliver_at": 1.5}, "deliver_at"),
        ({"deliver_at": -1}, "deliver_at"),
        ({"deliver_at": 1 << 63}, "deliver_at"),
        ({"replication_clusters": "a"}, "replication_clusters"),
        ({"replication_clusters": ("a",)}, "replication_clusters"),
        ({"disable_replication": None}, "disable_replication"),
        ({"disable_replication": 1}, "disable_replication"),
    ],
    ids=lambda value: value if isinstance(value, str) else repr(next(iter(value.values()))),
)
def test_a_bad_argument_raises_value_error_naming_it(arguments: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=f"Argument {named} "):
        _delivery(**arguments)


def test_a_cluster_name_that_is_not_a_str_raises_type_error() -> None:
    """The official client raises TypeError here too (its core refuses the list's items)."""
    with pytest.raises(TypeError, match="replication_clusters"):
        _delivery(replication_clusters=["east", 7])
