"""What the broker's command handlers share: the connection they answer on, seen through a
``Protocol`` so that no handler imports the connection back, the refusals they raise, and the
authorization of what a connection's role asks for."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol

from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.PulsarApi_pb2 import ServerError
from airflow_pulsar.client.topic_name import TopicName

from .authorization import Refusal, TopicOperation
from .read_pauses import PauseReason
from .service import BrokerService


class Rejected(Exception):
    """A request refused with a Pulsar ServerError; the connection answers it with an ERROR."""

    def __init__(self, error: int, message: str):
        super().__init__(message)
        self.error = error


class Channel(Protocol):
    """What a command handler needs from the client connection it serves."""

    @property
    def service(self) -> BrokerService: ...

    @property
    def remote_address(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def role(self) -> str | None:
        """The role the connection authenticated as (None without authentication)."""
        ...

    def send(self, command_type: int, **fields: Any) -> None: ...

    def write(self, data: bytes) -> None: ...

    def flush(self) -> None: ...

    def protocol_error(self, reason: str) -> None: ...

    def next_request_id(self) -> int: ...

    def pause_reading(self, reason: PauseReason) -> None:
        """Stop reading the connection for ``reason``."""
        ...

    def resume_reading(self, reason: PauseReason) -> None:
        """``reason`` no longer holds the connection's reading."""
        ...


class InProgress:
    """The PRODUCER (or SUBSCRIBE) requests of one connection being served right now, by id."""

    def __init__(self, command_type: int):
        self._command_type = command_type
        self._ids: set[int] = set()

    async def once(self, entity_id: int, request: Coroutine[Any, Any, None]) -> None:
        """Serve ``request`` unless one for the same id is still being served: as with Pulsar, a
        second one is refused, or it would leave behind an entity the connection forgot."""
        if entity_id in self._ids:
            request.close()
            raise Rejected(
                ServerError.ServiceNotReady,
                f"{commands.type_name(self._command_type)} {entity_id} is already in progress",
            )
        self._ids.add(entity_id)
        try:
            await request
        finally:
            self._ids.discard(entity_id)


def topic_refusal(
    channel: Channel, topic: TopicName, operation: TopicOperation, subscription: str | None = None
) -> Refusal | None:
    """Why the connection's role may not do ``operation`` on ``topic``; None when it may, or when
    the broker does not authorize. TenantNotFoundError when a role that is no superuser names a
    tenant that does not exist."""
    authorizer = channel.service.authorization
    if authorizer is None:
        return None
    assert channel.role is not None, "authorization runs on authenticated connections only"
    return authorizer.topic_refusal(channel.role, topic, operation, subscription)


def not_authorized(what: str, refusal: Refusal) -> Rejected:
    """Pulsar's refusal of a command (``Client is not authorized to ...``), saying who lacked what on which resource."""
    return Rejected(ServerError.AuthorizationError, f"Client is not authorized to {what}: {refusal}")
