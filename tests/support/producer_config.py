"""A producer's validated settings from ``create_producer`` keyword arguments, as the factory
builds them, for tests of the producer's parts."""

from __future__ import annotations

from typing import Any

from airflow_pulsar.client import ProducerOptions
from airflow_pulsar.client.producer.config import ProducerConfig


def producer_config(**settings: Any) -> ProducerConfig:
    """``ProducerConfig`` of ``settings`` (``TypeError`` for an unknown name, ``ValueError`` for a bad value)."""
    return ProducerOptions.from_settings(**settings).config()
