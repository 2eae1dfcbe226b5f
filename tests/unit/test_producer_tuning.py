"""Seed 003's tuning template."""

from __future__ import annotations

import pytest

from airflow_pulsar.client.producer import recommend_settings
from tests.support.producer_config import producer_config


def test_template_for_small_messages() -> None:
    tuning = recommend_settings(message_size_bytes=1024, partitions=8, latency_budget_ms=40, max_pending_messages=2000)
    producer = tuning.producer_settings
    assert producer["max_pending_messages_across_partitions"] == 2000 * 8
    assert producer["batching_max_messages"] == 1000
    assert producer["batching_max_allowed_size_in_bytes"] == 1_024_000  # min(2000 * 1024 / 2, 1 MiB)
    assert producer["batching_max_publish_delay_ms"] == 20
    assert producer["batching_partition_switch_frequency_by_publish_delay"] == 1
    assert tuning.client_settings["memory_limit_bytes"] == 64 * 1024 * 1024  # 16 MiB clamped up
    producer_config(**producer)  # every recommendation is a valid setting


def test_memory_follows_the_formula_inside_the_range() -> None:
    tuning = recommend_settings(message_size_bytes=10_000, partitions=10, latency_budget_ms=10)
    assert tuning.client_settings["memory_limit_bytes"] == 1000 * 10 * 10_000
    assert tuning.producer_settings["batching_max_allowed_size_in_bytes"] == 1024 * 1024  # capped


def test_large_messages_turn_batching_off_and_huge_ones_chunk() -> None:
    big = recommend_settings(message_size_bytes=800_000, partitions=1, latency_budget_ms=100)
    assert big.producer_settings["batching_enabled"] is False and big.notes
    huge = recommend_settings(message_size_bytes=20 * 1024 * 1024, partitions=1, latency_budget_ms=100)
    assert huge.producer_settings["chunking_enabled"] is True
    producer_config(**huge.producer_settings)


@pytest.mark.parametrize("bad", [{"message_size_bytes": 0}, {"partitions": 0}, {"latency_budget_ms": 0}])
def test_bad_inputs(bad: dict) -> None:
    args = {"message_size_bytes": 100, "partitions": 1, "latency_budget_ms": 10, **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        recommend_settings(**args)
