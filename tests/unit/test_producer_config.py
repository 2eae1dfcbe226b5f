"""Producer settings: official defaults and names, and errors that name the bad argument."""

from __future__ import annotations

import pulsar
import pytest

from airflow_pulsar.client.producer import CompressionType, PartitionsRoutingMode, ProducerAccessMode
from tests.support.producer_config import producer_config


def test_defaults_are_the_issue_defaults() -> None:
    config = producer_config()
    assert (config.send_timeout_millis, config.max_pending_messages, config.max_pending_messages_across_partitions) == (
        30000,
        1000,
        50000,
    )
    assert config.batching_enabled and not config.block_if_queue_full and not config.chunking_enabled
    assert (config.batching_max_messages, config.batching_max_allowed_size_in_bytes) == (1000, 131072)
    assert (config.batching_max_publish_delay_ms, config.batching_partition_switch_frequency_by_publish_delay) == (10, 10)
    assert config.message_routing_mode == PartitionsRoutingMode.RoundRobinDistribution
    assert config.compression_type == CompressionType.NONE and config.send_timeout == 30.0


def test_zero_means_zero_and_none_means_default() -> None:
    config = producer_config(send_timeout_millis=0, initial_sequence_id=0, batching_max_publish_delay_ms=None)
    assert config.send_timeout is None and config.initial_sequence_id == 0
    assert config.batching_max_publish_delay_ms == 10


def test_chunking_turns_default_batching_off() -> None:
    # Batching is on by our default only; asking for chunking alone must not fail on it.
    chunked = producer_config(chunking_enabled=True)
    assert chunked.chunking_enabled and not chunked.batching_enabled
    assert producer_config(chunking_enabled=True, batching_enabled=None).batching_enabled is False
    assert producer_config(chunking_enabled=False).batching_enabled


def test_official_enums_are_accepted() -> None:
    config = producer_config(
        compression_type=pulsar.CompressionType.ZSTD,
        message_routing_mode=pulsar.PartitionsRoutingMode.UseSinglePartition,
        access_mode=pulsar.ProducerAccessMode.Exclusive,
    )
    assert config.compression_type == CompressionType.ZSTD
    assert config.message_routing_mode == PartitionsRoutingMode.UseSinglePartition
    assert config.access_mode == ProducerAccessMode.Exclusive


@pytest.mark.parametrize(
    "settings, named",
    [
        ({"max_pending_messages": 0}, "max_pending_messages"),
        ({"batching_max_messages": "10"}, "batching_max_messages"),
        ({"send_timeout_millis": -1}, "send_timeout_millis"),
        ({"block_if_queue_full": 1}, "block_if_queue_full"),
        ({"compression_type": 99}, "compression_type"),
        ({"message_router": 5}, "message_router"),
        ({"properties": {"a": 1}}, "properties"),
        ({"batching_enabled": True, "chunking_enabled": True}, "chunking_enabled"),
        ({"message_routing_mode": PartitionsRoutingMode.CustomPartition}, "message_router"),
    ],
)
def test_bad_settings_name_the_argument(settings: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        producer_config(**settings)


def test_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="batch_size"):
        producer_config(batch_size=10)


def test_a_router_implies_custom_routing() -> None:
    config = producer_config(message_router=lambda message, n: 0)
    assert config.message_routing_mode == PartitionsRoutingMode.CustomPartition
