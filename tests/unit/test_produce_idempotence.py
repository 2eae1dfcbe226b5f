"""The pieces that make a retried produce task deduplicable: its producer name, its routing, its
producer settings and the deduplication check (no broker, no Airflow)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_pulsar.client import DeterministicRouter, OutgoingMessage
from airflow_pulsar.client.admin import AdminError
from airflow_pulsar.client.hashing import java_string_hash, murmur3_32
from airflow_pulsar.operators.idempotence import (
    check_producer_settings,
    deduplication_in_force,
    partition_of,
    producer_name,
    producer_settings,
    stored_by_partition,
)

RUN = "manual__2024-01-01T00:00:00+00:00"


def test_producer_name_is_stable_and_tells_task_instances_apart() -> None:
    name = producer_name("dag", "task", RUN, -1)
    assert name == producer_name("dag", "task", RUN, -1)
    others = {
        producer_name("dag2", "task", RUN, -1),
        producer_name("dag", "task2", RUN, -1),
        producer_name("dag", "task", RUN + "x", -1),
        producer_name("dag", "task", RUN, 0),
        producer_name("dag", "task", RUN, 1),
    }
    assert name not in others and len(others) == 5
    assert name.startswith("airflow.dag.task.manual__2024-01-01T00_00_00_00_00.")
    assert producer_name("dag", "task", RUN, 3).startswith("airflow.dag.task.manual__2024-01-01T00_00_00_00_00.3.")


def test_producer_name_stays_plain_short_and_unique_for_odd_ids() -> None:
    # The same text once unsafe characters are replaced, still two names.
    assert producer_name("a:b", "t", RUN, -1) != producer_name("a_b", "t", RUN, -1)
    long_name = producer_name("d" * 250, "t" * 250, RUN, 12)
    assert len(long_name) < 200
    for name in (long_name, producer_name("dåg with spaces", "täsk/ü", "run\n1", -1)):
        assert re.fullmatch(r"[A-Za-z0-9._-]+", name), name
        assert not name.startswith("pulsar.repl")


def _partition(
    settings: dict[str, Any], partitions: int, position: int, key: str | None = None,
    value: bytes = b"v", properties: dict[str, str] | None = None,
) -> int:
    """The partition the operator's producer settings route the message at ``position`` to."""
    router = producer_settings(settings, "p")["message_router"]
    return partition_of(router, OutgoingMessage(value, properties, key, sequence_id=position), partitions)


def test_keyed_messages_route_by_the_key_hash_of_the_scheme() -> None:
    for position, key in enumerate(["k1", "key1", "key01", "orders-7"]):
        assert _partition({}, 5, position, key) == java_string_hash(key) % 5
        assert _partition({"hashing_scheme": 1}, 5, position, key) == murmur3_32(key) % 5


def test_unkeyed_messages_go_round_a_batch_at_a_time() -> None:
    assert [_partition({"batching_max_messages": 10}, 3, i) for i in (0, 9, 10, 19, 20, 30, 31)] == [0, 0, 1, 1, 2, 0, 0]
    assert [_partition({"batching_enabled": False}, 3, i) for i in range(5)] == [0, 1, 2, 0, 1]


def test_single_partition_mode_picks_the_same_partition_for_the_same_producer() -> None:
    chosen = {_partition({"message_routing_mode": 0}, 7, i) for i in range(50)}
    assert chosen == {java_string_hash("p") % 7}


def test_a_custom_router_sees_the_position_as_sequence_id() -> None:
    seen: list[Any] = []

    def router(message: Any, partitions: int) -> int:
        seen.append((message.sequence_id, message.partition_key(), message.data(), message.properties()))
        return message.sequence_id % partitions

    assert _partition({"message_router": router}, 4, 6, "k", b"v", {"a": "b"}) == 2
    assert seen == [(6, "k", b"v", {"a": "b"})]
    with pytest.raises(ValueError, match="message_router returned 9, not in 0..3"):
        _partition({"message_router": lambda message, n: 9}, 4, 0)


def test_a_non_partitioned_topic_has_partition_zero() -> None:
    assert _partition({}, 0, 123, "k") == 0


def test_the_producer_blocks_never_gives_up_and_routes_by_the_message() -> None:
    settings = {"compression_type": 2, "hashing_scheme": 1, "max_pending_messages": 500}
    made = producer_settings(settings, "name")
    router = made.pop("message_router")
    assert made == {
        "compression_type": 2,
        "hashing_scheme": 1,
        "max_pending_messages": 500,
        "producer_name": "name",
        "block_if_queue_full": True,
        "send_timeout_millis": 0,
    }
    assert isinstance(router, DeterministicRouter)
    assert router(OutgoingMessage(b"v", partition_key="key1"), 5) == murmur3_32("key1") % 5
    own = producer_settings({"message_router": len}, "name")["message_router"]
    assert own is len, "a DAG's own router is kept"


def test_stored_sequence_ids_are_read_by_partition_index() -> None:
    topic = "persistent://public/default/orders"
    reported = {f"{topic}-partition-{index}": last for index, last in ((1, 40), (0, -1), (2, 7))}
    assert stored_by_partition(reported, "orders", 3) == [-1, 40, 7]
    assert stored_by_partition({topic: 12}, "orders", 0) == [12]


@pytest.mark.parametrize(
    "settings",
    [
        {"producer_name": "x"},
        {"initial_sequence_id": 0},
        {"block_if_queue_full": False},
        {"skip_full_partitions": True},
        {"send_timeout_millis": 30_000},
    ],
)
def test_settings_that_defeat_deduplication_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must not set"):
        check_producer_settings(settings)


def test_settings_the_operator_agrees_with_pass() -> None:
    check_producer_settings(
        {"block_if_queue_full": True, "skip_full_partitions": False, "send_timeout_millis": 0, "compression_type": 1}
    )


class FakeAdmin:
    """Answers the two deduplication calls as told; records what was asked."""

    def __init__(self, topic: Any, namespace: Any = None):
        self.topic, self.namespace, self.asked = topic, namespace, []

    def topic_deduplication(self, topic: str, applied: bool = False) -> Any:
        self.asked.append(("topic", topic, applied))
        if isinstance(self.topic, Exception):
            raise self.topic
        return self.topic

    def namespace_deduplication(self, namespace: str) -> Any:
        self.asked.append(("namespace", namespace))
        return self.namespace


def test_deduplication_in_force_asks_for_the_applied_topic_policy() -> None:
    admin = FakeAdmin(topic=False)
    assert deduplication_in_force(admin, "persistent://t/ns/x") is False  # type: ignore[arg-type]
    assert admin.asked == [("topic", "persistent://t/ns/x", True)]


def test_deduplication_in_force_falls_back_to_the_namespace_policy() -> None:
    refused = AdminError("Topic level policies is disabled", operation="topic_deduplication", method="GET", path="/", status=405)
    admin = FakeAdmin(topic=refused, namespace=None)
    assert deduplication_in_force(admin, "persistent://t/ns/x") is None  # type: ignore[arg-type]
    assert admin.asked[-1] == ("namespace", "t/ns")
    assert deduplication_in_force(FakeAdmin(topic=refused, namespace=True), "t/ns/x") is True  # type: ignore[arg-type]
