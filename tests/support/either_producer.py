"""A producer of either client, ours or the official one, behind one small interface that reports
every send's outcome to a :class:`~tests.support.reliability_checks.SendLog`."""

from __future__ import annotations

from typing import Any

import pulsar

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import Result
from tests.support.reliability_checks import SendLog

CLIENT_KINDS = ("ours", "official")


class EitherProducer:
    """A batching producer with a long send timeout, on a client of its own (``kind``: ours or official)."""

    def __init__(self, kind: str, service_url: str, topic: str, log: SendLog, **options: Any):
        self.kind = kind
        self.log = log
        settings: dict[str, Any] = {"batching_max_messages": 20, "send_timeout_millis": 120_000, "block_if_queue_full": True}
        settings |= options
        if kind == "ours":
            self.client: Any = Client(service_url, operation_timeout_seconds=15)
        else:
            logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
            self.client = pulsar.Client(service_url, operation_timeout_seconds=15, logger=logger)
            settings.setdefault("batching_enabled", True)  # off by default in the official sync API
        self.producer = self.client.create_producer(topic, **settings)

    def send_async(self, payload: bytes) -> None:
        """Send ``payload``; its outcome goes to the log (the official result mapped to ours by name)."""
        callback = self.log.callback(payload)
        if self.kind == "ours":
            self.producer.send_async(payload, callback)
        else:
            self.producer.send_async(payload, lambda result, message_id: callback(_our_result(result), message_id))

    def last_sequence_id(self) -> int:
        """The last sequence id the broker had stored for this producer's name when it connected."""
        return int(self.producer.last_sequence_id())

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        """Close the producer and its client."""
        try:
            self.producer.close()
        finally:
            self.client.close()


def _our_result(result: Any) -> Result:
    name = "Ok" if result == pulsar.Result.Ok else str(result).rsplit(".", 1)[-1]
    return Result.__members__.get(name, Result.UnknownError)
