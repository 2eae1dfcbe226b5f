"""What an admin operation asks for (:class:`AdminCall`) and how a 2xx answer to it is read.

An operation is a generator (:data:`Operation`): it yields calls, receives each call's decoded
result (or has the call's error thrown into it), and returns its own result. It may also yield
:class:`Concurrently` sub-operations (see :func:`concurrently`), whose calls the client then has
in flight side by side. Decoders raise :class:`UnexpectedResponse` when a body is not what the
path returns.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, TypeVar

import httpx

from ..message_count import CountError, EntryIndex, decode_entry_index

T = TypeVar("T")

# A request without a body; None would be sent as JSON null.
NO_BODY: Any = object()


class UnexpectedResponse(ValueError):
    """A 2xx response whose body is not what the path returns."""


def decode_json(response: httpx.Response) -> Any:
    """The JSON body."""
    try:
        return response.json()
    except ValueError:
        raise UnexpectedResponse(f"expected JSON, got {response.text[:100]!r}") from None


def decode_nothing(response: httpx.Response) -> None:
    """Nothing: the status is the answer."""
    return None


def decode_names(response: httpx.Response) -> list[str]:
    """A JSON list of names."""
    body = decode_json(response)
    if not isinstance(body, list) or not all(isinstance(item, str) for item in body):
        raise UnexpectedResponse(f"expected a list of names, got {body!r:.100}")
    return body


def decode_document(response: httpx.Response) -> dict[str, Any]:
    """A JSON object."""
    body = decode_json(response)
    if not isinstance(body, dict):
        raise UnexpectedResponse(f"expected a JSON object, got {body!r:.100}")
    return body


def decode_partitions(response: httpx.Response) -> int:
    """The count of Pulsar's partitioned-topic metadata, ``{"partitions": N}``."""
    body = decode_document(response)
    try:
        return int(body["partitions"])
    except (KeyError, TypeError, ValueError):
        raise UnexpectedResponse(f"expected {{'partitions': N}}, got {body!r:.100}") from None


def decode_policy_flag(response: httpx.Response) -> bool | None:
    """A boolean policy, None when it is unset."""
    # Pulsar answers an unset policy with an empty 200.
    if not response.content.strip():
        return None
    body = decode_json(response)
    if not isinstance(body, bool):
        raise UnexpectedResponse(f"expected true, false or nothing, got {body!r:.100}")
    return body


def decode_entry_index_headers(response: httpx.Response) -> EntryIndex:
    """The broker entry index headers of a get-message-by-id answer, with the entry's publish time."""
    try:
        entry = decode_entry_index(response)
    except CountError as exc:
        raise UnexpectedResponse(str(exc)) from None
    published = response.headers.get("X-Pulsar-publish-time")
    try:
        return replace(entry, publish_time_ms=_publish_time_ms(published)) if published else entry
    except ValueError:  # the count does without it
        return entry


@dataclass(frozen=True)
class PeekedMessage:
    """An entry looked at without consuming it (Pulsar's peek-messages, get-message-by-id and
    examine-message).

    ``message_id`` is Pulsar's ``ledger:entry`` text; ``publish_time_ms`` is milliseconds since the
    epoch; ``data`` is the entry's payload (a whole batch when ``batch_size`` is set). ``index`` is
    the broker entry index (PIP-90): the 0-based position of the entry's last message among all
    messages of the topic, None when the broker does not append it. ``partition_key`` is the
    entry's key, for a batch its first message's (what Key_Shared dispatches the entry by).
    """

    topic: str
    message_id: str
    publish_time_ms: int
    data: bytes = field(repr=False)
    batch_size: int | None = None
    index: int | None = None
    partition_key: str | None = None


def _publish_time_ms(text: str) -> int:
    """Pulsar's ``X-Pulsar-publish-time`` (ISO 8601; older brokers leave out the zone, meaning UTC)."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1000)


def peek_decoder(topic: str) -> Callable[[httpx.Response], PeekedMessage]:
    """A decoder of an entry of ``topic`` as Pulsar's message endpoints return it: payload and headers."""

    def decode(response: httpx.Response) -> PeekedMessage:
        headers = response.headers
        try:
            publish_time = _publish_time_ms(headers["X-Pulsar-publish-time"])
        except (KeyError, ValueError):
            raise UnexpectedResponse(f"expected an X-Pulsar-publish-time header, got {dict(headers)!r:.200}") from None
        batch = headers.get("X-Pulsar-num-batch-message")
        index = headers.get("X-Pulsar-Broker-Entry-METADATA-index")
        return PeekedMessage(
            topic=topic,
            message_id=headers.get("X-Pulsar-Message-ID", ""),
            publish_time_ms=publish_time,
            data=response.content,
            batch_size=int(batch) if batch and batch.isdigit() else None,
            index=int(index) if index and index.lstrip("-").isdigit() else None,
            partition_key=headers.get("X-Pulsar-partition-key"),
        )

    return decode


@dataclass(frozen=True)
class AdminCall:
    """One admin REST request described without doing it: what both clients send.

    ``operation`` is the client method named in errors; ``decode`` turns a 2xx response into
    the value the operation receives.
    """

    operation: str
    method: str
    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    body: Any = NO_BODY
    decode: Callable[[httpx.Response], Any] = decode_json


@dataclass(frozen=True)
class Concurrently:
    """Sub-operations an operation waits on together (see :func:`concurrently`)."""

    operations: tuple[Generator[Any, Any, Any], ...]


# An operation yields calls (or sub-operations to run side by side), receives each call's decoded
# result (or the sub-operations' results), and returns its own result.
Operation = Generator[AdminCall | Concurrently, Any, T]


def concurrently(operations: Iterable[Operation[T]]) -> Operation[list[T]]:
    """Run ``operations`` side by side: their results, in their order.

    Their calls are in flight together, as many at a time as the client's
    ``max_concurrent_requests`` allows. The first of them to fail has its error thrown here; the
    others are closed and their answers, should any still come, are ignored.
    """
    return (yield Concurrently(tuple(operations)))
