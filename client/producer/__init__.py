"""The producer side of the client: create_producer, Producer and the enums its settings use."""

from __future__ import annotations

from ..protocol.compression import CompressionType
from .config import BatchingType, ProducerAccessMode, ProducerConfig
from .interceptors import ProducerInterceptor
from .message import OutgoingMessage
from .producer import Producer, create_producer
from .routers import DeterministicRouter, HashingScheme, PartitionsRoutingMode
from .tuning import ProducerTuning, recommend_settings

__all__ = [
    "BatchingType",
    "CompressionType",
    "DeterministicRouter",
    "HashingScheme",
    "OutgoingMessage",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "ProducerConfig",
    "ProducerInterceptor",
    "ProducerTuning",
    "create_producer",
    "recommend_settings",
]
