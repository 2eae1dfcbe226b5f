"""What the broker's command handlers share: the connection they answer on, seen through a
``Protocol`` so that no handler imports the connection back, and the refusals they raise."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol

from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.PulsarApi_pb2 import ServerError

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

    def send(self, command_type: int, **fields: Any) -> None: ...

    def write(self, data: bytes) -> None: ...

    def flush(self) -> None: ...

    def protocol_error(self, reason: str) -> None: ...

    def next_request_id(self) -> int: ...


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
