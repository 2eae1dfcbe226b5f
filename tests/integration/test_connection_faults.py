"""A fault on a connection's reader thread fails what is pending with that fault as the cause,
logged once, instead of a bare "connection closed".

The fault is injected by replacing the connection's frame dispatch (a real decoding bug cannot be
provoked on purpose); everything else is the real client against the broker process.
"""

from __future__ import annotations

import logging

import pytest

from airflow_pulsar.client import Client
from airflow_pulsar.client.exceptions import ConnectError
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand


def test_a_reader_thread_fault_fails_pending_calls_with_it_as_the_cause(
    broker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="airflow_pulsar.client.connection")
    with Client(broker.service_url) as client:
        connection = client.service_connection()

        def faulty_dispatch(frame: object) -> None:
            raise RuntimeError("decoder fault")

        connection._dispatch = faulty_dispatch  # type: ignore[method-assign]
        with pytest.raises(ConnectError, match="failed: RuntimeError: decoder fault") as raised:
            connection.call(BaseCommand.PARTITIONED_METADATA, 10, topic=f"persistent://public/default/{topic_name}")
        assert isinstance(raised.value.__cause__, RuntimeError)
        faults = [record for record in caplog.records if "failed; closing the connection" in record.getMessage()]
        assert len(faults) == 1 and faults[0].exc_info is not None
