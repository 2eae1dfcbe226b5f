"""One client connection to the standalone broker: the binary protocol's server side.

Frames are decoded as they arrive and handled in order on the event loop. Replies are gathered
and written once per loop iteration, so a burst of receipts or messages costs one system call.
A malformed frame or an unknown command ends this connection only. The connection owns the
framing, the handshake (CONNECT and authentication), keepalive and the dispatch table; lookups,
producers and consumers are served by handlers of their own (``lookup_commands``,
``producer_commands``, ``consumer_commands``), which see it as a ``channel.Channel``.

A client is held to its share (``client_limits``): until its CONNECT succeeds it may send only a
small frame, and must send it within one keepalive interval (as Pulsar's handshake timeout); a
connection that sends no whole frame for two intervals, trickling bytes or not, is closed. While
more waits to be written to its socket than the high water mark, its consumers are sent nothing
and it is not read (``read_pauses``), so a client that does not read cannot make the broker buffer
without end.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Coroutine
from typing import Any

from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.commands import PROTOCOL_VERSION
from airflow_pulsar.client.protocol.frames import FRAME_OVERHEAD, Frame, FrameDecoder, FrameError, encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    AuthData,
    BaseCommand,
    CommandAuthResponse,
    CommandConnect,
    FeatureFlags,
    ServerError,
)
from airflow_pulsar.client.protocol.wire import U64_MASK
from airflow_pulsar.client.topic_name import InvalidTopicNameError

from .authentication import REFRESH_CHALLENGE, AuthenticationFailed, AuthenticationService, AuthenticationSession
from .authorization import TenantNotFoundError
from .channel import Rejected
from .connection_admission import ConnectionAdmission
from .consumer_commands import ConsumerCommands
from .lookup_commands import LookupCommands
from .producer_commands import ProducerCommands
from .read_pauses import PauseReason, ReadPauses
from .schema_compatibility import IncompatibleSchemaError, InvalidSchemaError
from .service import BrokerService, TopicNotFoundError
from .storage import LedgerFencedError
from .subscription_rules import SubscriptionError
from .transactions.commands import TransactionCommands

log = logging.getLogger(__name__)

SERVER_VERSION = "airflow-pulsar-standalone"
# Command types read off the message class: the same ints, without the enum wrapper's slow lookup.
T = BaseCommand


class ServerConnection(asyncio.Protocol):
    """Serves one client connection."""

    def __init__(
        self,
        service: BrokerService,
        authentication: AuthenticationService | None = None,
        admission: ConnectionAdmission | None = None,
    ):
        self.service = service
        self.authentication = authentication
        self._admission = admission
        self._admitted_address: str | None = None
        self._auth: AuthenticationSession | None = None
        self.role: str | None = None
        limits = service.config.limits
        # Checksums are checked per SEND, which a bad one fails alone (the connection stays), as Pulsar does.
        # Until CONNECT succeeds a frame carries credentials at most: only a small one is read.
        self.decoder = FrameDecoder(limits.max_handshake_frame_size, verify_checksum=False)
        self.transport: asyncio.Transport | None = None
        self.connected = False
        self.remote_address = ""
        self._reading = ReadPauses()
        self._out: list[bytes] = []
        self._out_size = 0
        # Queued writes this large go to the transport at once, whose high water mark then tells.
        self._flush_size = limits.pulsar_channel_write_buffer_high_water_mark
        self._flush_scheduled = False
        self._last_received = time.monotonic()
        self._keepalive: asyncio.TimerHandle | None = None
        self._request_ids = 0
        self._closed = False
        lookups = LookupCommands(self)
        producers = self.producer_commands = ProducerCommands(self)
        consumers = self.consumer_commands = ConsumerCommands(self)
        transactions = TransactionCommands(self)
        self._on_send = producers.on_send
        # SEND is not in the table: _handle serves it first, with its frame.
        self._handlers: dict[int, Callable[[Any], Any]] = {
            T.CONNECT: self._on_connect,
            T.PING: self._on_ping,
            T.PONG: lambda body: None,
            T.AUTH_RESPONSE: self._on_auth_response,
            T.LOOKUP: lookups.on_lookup,
            T.PARTITIONED_METADATA: lookups.on_partitioned_metadata,
            T.GET_TOPICS_OF_NAMESPACE: lookups.on_get_topics_of_namespace,
            T.GET_SCHEMA: lookups.on_get_schema,
            T.GET_OR_CREATE_SCHEMA: lookups.on_get_or_create_schema,
            T.PRODUCER: producers.on_producer,
            T.CLOSE_PRODUCER: producers.on_close_producer,
            T.SUBSCRIBE: consumers.on_subscribe,
            T.FLOW: consumers.on_flow,
            T.ACK: consumers.on_ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: consumers.on_redeliver,
            T.SEEK: consumers.on_seek,
            T.GET_LAST_MESSAGE_ID: consumers.on_get_last_message_id,
            T.CONSUMER_STATS: consumers.on_consumer_stats,
            T.UNSUBSCRIBE: consumers.on_unsubscribe,
            T.CLOSE_CONSUMER: consumers.on_close_consumer,
            T.TC_CLIENT_CONNECT_REQUEST: transactions.on_tc_client_connect,
            T.NEW_TXN: transactions.on_new_txn,
            T.ADD_PARTITION_TO_TXN: transactions.on_add_partition,
            T.ADD_SUBSCRIPTION_TO_TXN: transactions.on_add_subscription,
            T.END_TXN: transactions.on_end_txn,
        }

    @property
    def closed(self) -> bool:
        """Whether the connection is closed: nothing more is written to it."""
        return self._closed

    # ---- transport ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A client connected: admit it (or refuse it, past the connection limits), note its
        address, set its write buffer's water marks and start the keepalive."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.remote_address = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        limits = self.service.config.limits
        transport.set_write_buffer_limits(
            high=limits.pulsar_channel_write_buffer_high_water_mark, low=limits.pulsar_channel_write_buffer_low_water_mark
        )
        self._reading.attach(transport)
        if self._admission is not None and peer:
            refusal = self._admission.admit(peer[0], peer[1])
            if refusal is not None:
                log.info("refusing connection from %s: %s", self.remote_address, refusal)
                # request id -1, as Pulsar refuses a connection past its limits
                self.send(T.ERROR, request_id=U64_MASK, error=ServerError.NotAllowedError, message=refusal)
                self.close()
                return
            self._admitted_address = peer[0]
        self._schedule_keepalive()

    def data_received(self, data: bytes) -> None:
        """Decode the frames that arrived and serve them in order."""
        try:
            frames = self.decoder.feed(data)
        except FrameError as exc:
            self.protocol_error(f"malformed frame{'' if self.connected else ' before CONNECT'}: {exc}")
            return
        if frames:  # a whole frame shows the client alive; bytes trickling in do not
            self._last_received = time.monotonic()
        for frame in frames:
            if self._closed:
                return
            self._handle(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        """The client is gone: stop the timers and detach its producers and consumers."""
        self._closed = True
        if self._admitted_address is not None:
            assert self._admission is not None
            self._admission.release(self._admitted_address)
            self._admitted_address = None
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._auth is not None:
            self._auth.cancel()
        self.producer_commands.detach_all()
        self.consumer_commands.detach_all()

    def write(self, data: bytes) -> None:
        """Queue encoded frames; they go out together at the end of this loop iteration."""
        if self._closed:
            return
        self._out.append(data)
        self._out_size += len(data)
        if self._out_size >= self._flush_size:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_at_iteration_end)

    def _flush_at_iteration_end(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Write what is queued now, ahead of the end of this loop iteration (whose flush stays due)."""
        if self._out and self.transport is not None and not self._closed:
            self.transport.write(b"".join(self._out))
        self._out.clear()
        self._out_size = 0

    # ---- flow control ----

    def pause_writing(self) -> None:
        """The transport holds more than the high water mark: send the consumers nothing and
        read nothing more until it drains (a client that does not read is not read either)."""
        self.consumer_commands.pause_dispatch()
        self._reading.pause(PauseReason.OUTBOUND_BUFFER_FULL)

    def resume_writing(self) -> None:
        """The transport drained to the low water mark: read again, and dispatch."""
        self._reading.resume(PauseReason.OUTBOUND_BUFFER_FULL)
        self.consumer_commands.resume_dispatch()

    def pause_reading(self, reason: PauseReason) -> None:
        """Stop reading the connection for ``reason`` until :meth:`resume_reading` with it."""
        self._reading.pause(reason)

    def resume_reading(self, reason: PauseReason) -> None:
        """``reason`` no longer holds the reading."""
        self._reading.resume(reason)

    def send(self, command_type: int, **fields: Any) -> None:
        """Queue one command of ``command_type`` whose body has ``fields`` set."""
        self.write(encode_command(commands.make(command_type, **fields)))

    def close(self) -> None:
        """Flush what is queued and close the connection."""
        if self.transport is not None and not self._closed:
            self.flush()
            self._closed = True
            self.transport.close()

    def _drop(self, reason: str) -> None:
        """Close an unresponsive connection at once, with whatever it has not read."""
        log.info("closing connection from %s: %s", self.remote_address, reason)
        if self.transport is not None and not self._closed:
            self._closed = True
            self.transport.abort()

    def protocol_error(self, reason: str) -> None:
        """Answer a protocol violation with an ERROR and close the connection."""
        log.warning("closing connection from %s: %s", self.remote_address, reason)
        self.send(T.ERROR, request_id=0, error=ServerError.NotAllowedError, message=reason)
        self.close()

    def next_request_id(self) -> int:
        """A fresh request id for a command the broker starts (CLOSE_PRODUCER, CLOSE_CONSUMER)."""
        self._request_ids += 1
        return self._request_ids

    def _schedule_keepalive(self) -> None:
        interval = self.service.config.keepalive_seconds
        self._keepalive = asyncio.get_running_loop().call_later(interval, self._check_alive)

    def _check_alive(self) -> None:
        interval = self.service.config.keepalive_seconds
        if not self.connected:
            # As Pulsar: the handshake must be over by the first keepalive.
            self._drop(f"no CONNECT within {interval:g} s")
            return
        if time.monotonic() - self._last_received > 2 * interval:
            self._drop(f"no frame for {2 * interval:g} s")
            return
        self.send(T.PING)
        self._schedule_keepalive()

    # ---- dispatch ----

    def _handle(self, frame: Frame) -> None:
        command = frame.command
        if command.type == T.SEND and self.connected:
            # The hot path: it needs the frame's entry, not just the command body.
            self._on_send(command.send, frame)
            return
        handler = self._handlers.get(command.type)
        if handler is None:
            self.protocol_error(f"unsupported command {commands.type_name(command.type)}")
            return
        if not self.connected and command.type != T.CONNECT:
            self.protocol_error(f"{commands.type_name(command.type)} before CONNECT")
            return
        body = commands.body(command)
        bad_text = commands.text_fault(body)
        if bad_text is not None:
            self.protocol_error(f"{commands.type_name(command.type)} field {bad_text} is not UTF-8 text")
            return
        try:
            result = handler(body)
        except Rejected as exc:
            self._refuse(getattr(body, "request_id", 0), exc.error, exc)
            return
        if asyncio.iscoroutine(result):
            task = asyncio.ensure_future(self._run_request(result, getattr(body, "request_id", 0)))
            task.add_done_callback(_log_task_error)

    async def _run_request(self, coro: Coroutine[Any, Any, None], request_id: int) -> None:
        try:
            await coro
        except Rejected as exc:
            self._refuse(request_id, exc.error, exc)
        except SubscriptionError as exc:
            self._refuse(request_id, ServerError.Value(exc.code), exc)
        except InvalidTopicNameError as exc:
            self._refuse(request_id, ServerError.InvalidTopicName, exc)
        except TopicNotFoundError as exc:
            self._refuse(request_id, ServerError.TopicNotFound, exc)
        except TenantNotFoundError as exc:  # a role that is no superuser named a missing tenant
            self._refuse(request_id, ServerError.AuthorizationError, exc)
        except (IncompatibleSchemaError, InvalidSchemaError) as exc:
            self._refuse(request_id, ServerError.IncompatibleSchema, exc)
        except (sqlite3.Error, LedgerFencedError) as exc:  # a write it needed failed (a full disk): the client retries
            self._refuse(request_id, ServerError.PersistenceError, exc)

    def _refuse(self, request_id: int, error: int, reason: Exception) -> None:
        self.send(T.ERROR, request_id=request_id, error=error, message=str(reason))

    # ---- connection-level commands ----

    def _on_connect(self, body: CommandConnect) -> None:
        if self.connected:
            self.protocol_error("second CONNECT on one connection")
            return
        if self.authentication is not None:
            assert self.transport is not None
            self._auth = AuthenticationSession(
                self.authentication,
                # Only a certificate the handshake verified against the trusted CAs is here.
                peer_certificate=self.transport.get_extra_info("peercert") or None,
                can_refresh=body.feature_flags.supports_auth_refresh,
                challenge=self._send_auth_challenge,
                refuse=self._refuse_authentication,
                grace=self.service.config.keepalive_seconds,
            )
            try:
                role = self._auth.authenticate(body.auth_method_name, body.auth_data)
            except AuthenticationFailed as exc:
                self._refuse_authentication(str(exc))
                return
            log.info("%s authenticated with method %r as role %r", self.remote_address, body.auth_method_name, role.name)
            self.role = role.name
        self.connected = True
        self.decoder.max_frame_size = self.service.config.max_message_size + FRAME_OVERHEAD
        version = min(body.protocol_version, PROTOCOL_VERSION)
        self.send(
            T.CONNECTED,
            server_version=SERVER_VERSION,
            protocol_version=version,
            max_message_size=self.service.config.max_message_size,
            feature_flags=FeatureFlags(supports_partial_producer=True),
        )

    def _on_auth_response(self, body: CommandAuthResponse) -> None:
        if self._auth is None:
            self.protocol_error("AUTH_RESPONSE on a broker without authentication")
            return
        try:
            role = self._auth.authenticate(body.response.auth_method_name, body.response.auth_data)
        except AuthenticationFailed as exc:
            self._refuse_authentication(str(exc))
            return
        self.role = role.name

    def _send_auth_challenge(self, method: str) -> None:
        self.send(
            T.AUTH_CHALLENGE,
            server_version=SERVER_VERSION,
            protocol_version=PROTOCOL_VERSION,
            challenge=AuthData(auth_method_name=method, auth_data=REFRESH_CHALLENGE),
        )

    def _refuse_authentication(self, reason: str) -> None:
        log.warning("refusing connection from %s: %s", self.remote_address, reason)
        # request id -1, as Pulsar answers refused credentials
        self.send(T.ERROR, request_id=U64_MASK, error=ServerError.AuthenticationError, message=reason)
        self.close()

    def _on_ping(self, body: Any) -> None:
        self.send(T.PONG)


def _log_task_error(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("request failed", exc_info=task.exception())
