"""Partition routing: key hashes (Java's and Murmur3 vectors), round robin intervals, single, custom,
and the deterministic router (the message alone picks the partition)."""

from __future__ import annotations

import pytest

from airflow_pulsar.client.exceptions import InvalidConfiguration
from airflow_pulsar.client.producer.message import OutgoingMessage
from airflow_pulsar.client.producer.routers import (
    CustomRouter,
    DeterministicRouter,
    HashingScheme,
    RoundRobinRouter,
    SinglePartitionRouter,
)


def _keyed(key: str) -> OutgoingMessage:
    return OutgoingMessage(b"", partition_key=key)


UNKEYED = OutgoingMessage(b"")


# Java: "key1".hashCode() == 3288498, "hello".hashCode() == 99162322, "Aa".hashCode() == "BB".hashCode() == 2112
@pytest.mark.parametrize(
    "key, java_hash", [("key1", 3288498), ("hello", 99162322), ("Aa", 2112), ("BB", 2112), ("", 0)]
)
def test_java_string_hash_routes_key_to_hash_mod_n(key: str, java_hash: int) -> None:
    router = RoundRobinRouter(HashingScheme.JavaStringHash, batching=True, switch_interval_ms=100)
    for n in (1, 3, 4, 7):
        assert router.choose_partition(_keyed(key), n) == java_hash % n


@pytest.mark.parametrize("key, murmur", [("k1", 2110152746), ("key1", 462881061), ("key01", 39696932)])
def test_murmur3_routes_key_to_hash_mod_n(key: str, murmur: int) -> None:
    router = SinglePartitionRouter(HashingScheme.Murmur3_32Hash, 5)
    for n in (2, 4, 5):
        assert router.choose_partition(_keyed(key), n) == murmur % n


def test_negative_java_hash_is_masked() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; masked with 0x7fffffff it is 0.
    router = RoundRobinRouter(HashingScheme.JavaStringHash, batching=False, switch_interval_ms=1)
    assert router.choose_partition(_keyed("polygenelubricants"), 7) == 0


def test_round_robin_with_batching_switches_every_interval() -> None:
    now = [1000.0]
    router = RoundRobinRouter(
        HashingScheme.JavaStringHash, batching=True, switch_interval_ms=100, clock=lambda: now[0]
    )
    first = router.choose_partition(UNKEYED, 4)
    for step_ms in (0, 30, 60, 99):  # inside one 100 ms slice: same partition
        now[0] = 1000.0 + step_ms / 1000
        assert router.choose_partition(UNKEYED, 4) == first
    seen = []
    for slice_index in range(1, 5):
        now[0] = 1000.0 + slice_index * 0.1 + 0.001
        seen.append(router.choose_partition(UNKEYED, 4))
    assert seen == [(first + i) % 4 for i in range(1, 5)]


def test_round_robin_without_batching_switches_per_message() -> None:
    router = RoundRobinRouter(HashingScheme.JavaStringHash, batching=False, switch_interval_ms=10)
    chosen = [router.choose_partition(UNKEYED, 3) for _ in range(9)]
    assert chosen[:3] == chosen[3:6] == chosen[6:]
    assert sorted(chosen[:3]) == [0, 1, 2]


def test_single_partition_sticks_to_one() -> None:
    router = SinglePartitionRouter(HashingScheme.JavaStringHash, 8)
    assert len({router.choose_partition(UNKEYED, 8) for _ in range(50)}) == 1


def test_skip_full_partitions_moves_unkeyed_messages_only() -> None:
    full = {0, 1}
    router = SinglePartitionRouter(HashingScheme.JavaStringHash, 4, is_full=lambda i: i in full)
    router._partition = 0  # pin the random start for the test
    assert router.choose_partition(UNKEYED, 4) == 2
    full.update({2, 3})
    assert router.choose_partition(UNKEYED, 4) == 0, "all full: stay on the chosen one and let it block"
    assert router.choose_partition(_keyed("Aa"), 4) == 2112 % 4, "keys are never moved"


def test_custom_router_gets_message_and_is_checked() -> None:
    router = CustomRouter(lambda message, n: int(message.partition_key() or "0") % n)
    assert router.choose_partition(_keyed("6"), 4) == 2
    with pytest.raises(InvalidConfiguration, match="message_router returned 9"):
        CustomRouter(lambda message, n: 9).choose_partition(UNKEYED, 4)


def _numbered(sequence_id: int, key: str | None = None) -> OutgoingMessage:
    return OutgoingMessage(b"", partition_key=key, sequence_id=sequence_id)


def test_deterministic_router_sends_keys_by_their_hash_and_the_rest_in_runs_of_sequence_ids() -> None:
    router = DeterministicRouter(HashingScheme.Murmur3_32Hash, messages_per_partition=3)
    assert [router(_numbered(i), 4) for i in range(14)] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 0, 0]
    assert router(_numbered(5, "k1"), 4) == 2110152746 % 4, "a key wins over the sequence id"
    assert DeterministicRouter(hashing_scheme=0)(_numbered(0, "key1"), 7) == 3288498 % 7
    again = DeterministicRouter(HashingScheme.Murmur3_32Hash, messages_per_partition=3)
    assert [again(_numbered(i), 4) for i in (13, 2, 9)] == [router(_numbered(i), 4) for i in (13, 2, 9)]


def test_deterministic_router_with_a_default_key_keeps_unkeyed_messages_on_its_partition() -> None:
    router = DeterministicRouter(default_key="key1")
    assert {router(_numbered(i), 5) for i in range(20)} == {3288498 % 5}
    assert router(_numbered(0, "BB"), 5) == 2112 % 5
    assert router(UNKEYED, 5) == 3288498 % 5, "no sequence id needed"


def test_deterministic_router_refuses_what_it_cannot_route_alike_every_time() -> None:
    with pytest.raises(ValueError, match="sequence_id"):
        DeterministicRouter()(UNKEYED, 3)
    for arguments, named in (({"messages_per_partition": 0}, "messages_per_partition"), ({"hashing_scheme": 7}, "hashing_scheme"),
                             ({"default_key": 5}, "default_key")):
        with pytest.raises(ValueError, match=named):
            DeterministicRouter(**arguments)  # type: ignore[arg-type]
