"""Invalid topic names fail the same way wherever a name is given: ``InvalidTopicName`` (as the
official client raises it), naming the name and what is wrong with it, before or at the broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import InvalidTopicName
from airflow_pulsar.client.protocol.message_id import MessageId

BAD_NAMES = [
    ("bogus://public/default/x", "domain must be persistent or non-persistent"),
    ("persistent://public/default/a/b", "tenant/cluster/namespace form is not supported"),
    ("persistent://pub lic/default/x", "bad tenant 'pub lic'"),
]
# non-persistent:// names are valid: both brokers serve them (tests/interop/test_non_persistent.py).
ENTRY_POINTS: dict[str, Callable[[Client, str], Any]] = {
    "create_producer": lambda client, name: client.create_producer(name),
    "subscribe": lambda client, name: client.subscribe(name, "sub"),
    "create_reader": lambda client, name: client.create_reader(name, MessageId.earliest),
}


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
@pytest.mark.parametrize(("name", "reason"), BAD_NAMES, ids=[reason.split()[0] for _, reason in BAD_NAMES])
def test_invalid_topic_name_is_refused_clearly(broker: BrokerProcess, entry_point: str, name: str, reason: str) -> None:
    with Client(broker.service_url, operation_timeout_seconds=5) as client:
        with pytest.raises(InvalidTopicName) as refused:
            ENTRY_POINTS[entry_point](client, name)
    assert name in str(refused.value) and reason in str(refused.value)
