"""Fixtures of the integration tests: our client and the official one, on the module's broker.

Every client has short timeouts so that a bug fails a test in seconds instead of hanging it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from airflow_pulsar.client.client import Client


@pytest.fixture
def our_client(broker: Any) -> Iterator[Client]:
    """Our client on the module's broker."""
    client = Client(broker.service_url, operation_timeout_seconds=10, connection_timeout_ms=3000)
    yield client
    client.close()


@pytest.fixture
def official(broker: Any) -> Iterator[pulsar.Client]:
    """The official client on the module's broker (its producer makes the test data)."""
    client = pulsar.Client(
        broker.service_url,
        operation_timeout_seconds=10,
        connection_timeout_ms=3000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    yield client
    client.close()
