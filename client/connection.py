"""One TCP (or TLS) connection to a broker: handshake, request ids, and a reader thread.

Frames are queued for the connection's writer (see ``frame_writer``), which gathers those of a
burst into one write; a single reader thread per connection decodes frames and routes them:
responses to the waiting request's future, receipts to producers, messages to consumers. When
the connection is lost every pending request fails and every producer and consumer on it is
told, so each can reconnect on its own schedule.
"""

from __future__ import annotations

import itertools
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol, cast

from google.protobuf.message import Message

from .auth import Authentication
from .dependencies import DISTRIBUTION, distribution_version
from .exceptions import AuthenticationError, ConnectError, PulsarException, Result, Timeout, exception_for, result_for_server_error
from .frame_writer import FrameWriter
from .protocol import commands
from .protocol.commands import PROTOCOL_VERSION
from .protocol.frames import DEFAULT_MAX_MESSAGE_SIZE, FRAME_OVERHEAD, Frame, FrameDecoder, FrameError, MessageFrame, encode_command
from .protocol.PulsarApi_pb2 import (
    AuthData,
    BaseCommand,
    CommandConnected,
    CommandLookupTopicResponse,
    CommandPartitionedTopicMetadataResponse,
    CommandSendError,
    FeatureFlags,
)
from .protocol.receipts import SendReceipt
from .timer import Timer, TimerHandle
from .tls import TlsStream

log = logging.getLogger(__name__)

# Command types read off the message class: the same ints, without the enum wrapper's slow lookup.
T = BaseCommand
# Responses with a failure in their own error and message fields: ack receipts, the coordinator's answers.
_ERROR_FIELD_RESPONSES = frozenset(
    {T.ACK_RESPONSE, T.TC_CLIENT_CONNECT_RESPONSE, T.NEW_TXN_RESPONSE, T.END_TXN_RESPONSE}
    | {T.ADD_PARTITION_TO_TXN_RESPONSE, T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE}
)
# What CONNECT tells the broker: the distribution and its version, read once from its metadata.
CLIENT_VERSION = "-".join(filter(None, [DISTRIBUTION, distribution_version()]))
_RECV_SIZE = 256 * 1024
_UNTRUSTED_CERTIFICATE = " (it may not trust the TLS client certificate)"


class ProducerHandler(Protocol):
    """What a connection calls on a producer registered with it."""

    def handle_receipts(self, receipts: list[SendReceipt]) -> None: ...

    def handle_send_error(self, body: CommandSendError) -> None: ...

    def handle_broker_close(self) -> None: ...

    def connection_lost(self, connection: Connection) -> None: ...


class ConsumerHandler(Protocol):
    """What a connection calls on a consumer registered with it."""

    def handle_messages(self, messages: list[MessageFrame]) -> None: ...

    def handle_active_change(self, is_active: bool) -> None: ...

    def handle_end_of_topic(self) -> None: ...

    def handle_broker_close(self) -> None: ...

    def connection_lost(self, connection: Connection) -> None: ...


class Connection:
    """A connection to one broker, shared by every producer and consumer placed on it."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timer: Timer,
        tls_context: ssl.SSLContext | None = None,
        authentication: Authentication | None = None,
        connection_timeout: float = 10.0,
        keepalive_seconds: float = 30.0,
    ):
        self.host = host
        self.port = port
        self.address = f"{host}:{port}"
        self._timer = timer
        self._tls_context = tls_context
        self._auth = authentication
        self._connection_timeout = connection_timeout
        self._keepalive_seconds = keepalive_seconds
        self._sock: socket.socket | TlsStream | None = None
        self._writer: FrameWriter | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._requests: dict[int, Future[Any]] = {}
        self._request_ids = itertools.count(1)
        self.producers: dict[int, ProducerHandler] = {}
        self.consumers: dict[int, ConsumerHandler] = {}
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.server_version = ""
        self.closed = False
        self._last_received = time.monotonic()
        self._keepalive: TimerHandle | None = None
        self._decoder = FrameDecoder(DEFAULT_MAX_MESSAGE_SIZE + FRAME_OVERHEAD)

    # ---- lifecycle ----

    def open(self) -> None:
        """Connect, authenticate and wait for CONNECTED; raises ConnectError or AuthenticationError."""
        deadline = time.monotonic() + self._connection_timeout
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self._connection_timeout)
        except OSError as exc:
            raise ConnectError(f"cannot connect to {self.address}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream: socket.socket | TlsStream = sock
        try:
            if self._tls_context is not None:
                # Not ssl.SSLSocket: it must not be read and written from two threads at once (see tls.py).
                stream = TlsStream(sock, self._tls_context, self.host)
                stream.handshake()
            stream.sendall(encode_command(_connect_command(self._auth)))
            connected = self._await_connected(stream, deadline)
        except ssl.SSLError as exc:
            sock.close()
            if self._presents_certificate() and not isinstance(exc, ssl.SSLCertVerificationError):
                # The broker's alert (unknown CA, bad or expired certificate) refuses our credentials.
                raise AuthenticationError(f"{self.address} refused the TLS client certificate: {exc}") from exc
            raise ConnectError(f"handshake with {self.address} failed: {exc}") from exc
        except (OSError, FrameError) as exc:
            sock.close()
            # With TLS 1.3 the broker checks our certificate after our side of the handshake is
            # done: its refusal arrives as a reset here, or as an end of stream (_await_connected).
            hint = _UNTRUSTED_CERTIFICATE if isinstance(exc, ConnectionResetError) and self._presents_certificate() else ""
            raise ConnectError(f"handshake with {self.address} failed: {exc}{hint}") from exc
        except PulsarException:
            sock.close()
            raise
        stream.settimeout(None)
        self.server_version = connected.server_version
        if connected.HasField("max_message_size"):
            self.max_message_size = connected.max_message_size
            self._decoder.max_frame_size = connected.max_message_size + FRAME_OVERHEAD
        self._sock = stream
        self._writer = FrameWriter(stream, f"pulsar-writer-{self.address}", self._write_failed)
        self._last_received = time.monotonic()
        self._reader = threading.Thread(target=self._read_loop, name=f"pulsar-io-{self.address}", daemon=True)
        self._reader.start()
        self._keepalive = self._timer.call_every(self._keepalive_seconds, self._check_alive)

    def _presents_certificate(self) -> bool:
        """Whether this connection shows the broker a TLS client certificate."""
        return self._tls_context is not None and self._auth is not None and self._auth.tls_certificate_files() is not None

    def _await_connected(self, sock: socket.socket | TlsStream, deadline: float) -> CommandConnected:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectError(f"no CONNECTED from {self.address} within {self._connection_timeout:.0f} s")
            sock.settimeout(remaining)
            data = sock.recv(_RECV_SIZE)
            if not data:
                # A TLS broker drops a client certificate it does not trust right after the handshake.
                hint = _UNTRUSTED_CERTIFICATE if self._presents_certificate() else ""
                raise ConnectError(f"{self.address} closed the connection during the handshake{hint}")
            for frame in self._decoder.feed(data):
                command = frame.command
                if command.type == T.CONNECTED:
                    return command.connected
                if command.type == T.ERROR:
                    result = result_for_server_error(command.error.error)
                    raise exception_for(result, f"{self.address} refused the connection: {command.error.message}")
                if command.type == T.AUTH_CHALLENGE and self._auth is not None:
                    sock.sendall(encode_command(_auth_response(self._auth)))
                    continue
                raise ConnectError(f"{self.address} sent {commands.type_name(command.type)} before CONNECTED")

    def _answer_challenge(self, auth: Authentication) -> None:
        try:
            response = _auth_response(auth)
        except PulsarException as exc:
            # The broker closes the connection when no answer comes; the reconnect then fails with this.
            log.warning("cannot answer the authentication challenge of %s: %s", self.address, exc)
            return
        self.send_command(response)

    def close(self) -> None:
        """Close the socket; the reader thread then fails what is pending."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        if self._writer is not None:
            self._writer.close()
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()

    def abandon(self) -> None:
        """In a process forked from the one that opened it: let go of it without a word on the wire.
        The socket is the parent's too, so it is neither shut down nor written to; only this
        process's descriptor closes. Nothing pending is failed: who waits for it lives in the parent."""
        self._lock = threading.Lock()  # a thread of the parent may have held it at the fork
        self.closed = True
        self._writer = None
        self._keepalive = None
        if self._sock is not None:
            self._sock.close()

    def join(self, timeout: float) -> None:
        """After :meth:`close`: wait up to ``timeout`` seconds for its reader and writer threads to
        end (the reader fails what is pending first), so none outlives the client's close."""
        deadline = time.monotonic() + timeout
        writer = self._writer
        for thread in (self._reader, writer.thread if writer is not None else None):
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _check_alive(self) -> None:
        if time.monotonic() - self._last_received > 2 * self._keepalive_seconds:
            log.warning("no traffic from %s for %.0f s; closing", self.address, 2 * self._keepalive_seconds)
            self.close()
        else:
            self.send_command(commands.make(T.PING))

    # ---- writing ----

    def send(self, data: bytes) -> bool:
        """Queue whole frames for writing, in order; False if the connection is gone (the reader
        thread will notice). It never blocks on the socket, so callers may hold their own locks;
        once they hold none they call :meth:`write_due` (or :meth:`write_now`)."""
        writer = self._writer
        return writer is not None and not self.closed and writer.send(data)

    def write_due(self) -> None:
        """Write the queued frames on this thread if the writer says they are due: a lone frame,
        or a burst gathered long enough (see ``frame_writer``)."""
        writer = self._writer
        if writer is not None and writer.due:
            writer.write_now()

    def write_now(self) -> None:
        """Write the queued frames on this thread; for a caller about to wait for an answer (call
        it outside the caller's own locks)."""
        writer = self._writer
        if writer is not None:
            writer.write_now()

    def _write_failed(self, error: OSError) -> None:
        log.info("write to %s failed: %s", self.address, error)
        self.close()

    def send_command(self, command: BaseCommand) -> bool:
        """Queue one simple command and write it if it is due (callers hold no lock of theirs)."""
        queued = self.send(encode_command(command))
        self.write_due()
        return queued

    def new_request_id(self) -> int:
        """A request id unique on this connection."""
        return next(self._request_ids)

    def request(self, command_type: int, **fields: Any) -> Future[Any]:
        """Send a request; the future resolves to the response's body or fails with its error."""
        request_id = self.new_request_id()
        future: Future[Any] = Future()
        with self._lock:
            if self.closed:
                future.set_exception(ConnectError(f"connection to {self.address} is closed"))
                return future
            self._requests[request_id] = future
        if not self.send(encode_command(commands.make(command_type, request_id=request_id, **fields))):
            self._fail_request(request_id, ConnectError(f"connection to {self.address} is closed"))
        self.write_now()
        return future

    def call(self, command_type: int, timeout: float, **fields: Any) -> Any:
        """Send a request and wait up to ``timeout`` seconds for its response body."""
        future = self.request(command_type, **fields)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise Timeout(
                f"{commands.type_name(command_type)} to {self.address} got no response within {timeout:g} s"
            ) from None

    def _fail_request(self, request_id: int, error: BaseException) -> None:
        with self._lock:
            future = self._requests.pop(request_id, None)
        if future is not None and not future.done():
            future.set_exception(error)

    def _resolve(self, request_id: int, body: Message | None = None, error: BaseException | None = None) -> None:
        with self._lock:
            future = self._requests.pop(request_id, None)
        if future is None or future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(body)

    # ---- reading ----

    def _read_loop(self) -> None:
        sock = self._sock
        assert sock is not None
        error: BaseException | None = None
        try:
            while True:
                data = sock.recv(_RECV_SIZE)
                if not data:
                    break
                self._last_received = time.monotonic()
                self._route(self._decoder.feed_messages(data))
        except FrameError as exc:
            log.error("malformed frame from %s: %s", self.address, exc)
            error = ConnectError(f"malformed frame from {self.address}: {exc}")
        except OSError as exc:
            error = ConnectError(f"connection to {self.address} lost: {exc}")
        except Exception as exc:  # a fault in decoding or dispatch: say it once, and why calls fail
            log.exception("reading from %s failed; closing the connection", self.address)
            error = ConnectError(f"connection to {self.address} failed: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
        finally:
            self._lost(error or ConnectError(f"connection to {self.address} closed"))

    def _lost(self, error: BaseException) -> None:
        self.close()
        with self._lock:
            requests, self._requests = self._requests, {}
            producers = list(self.producers.values())
            consumers = list(self.consumers.values())
            self.producers.clear()
            self.consumers.clear()
        for future in requests.values():
            if not future.done():
                future.set_exception(error)
        handlers: list[ProducerHandler | ConsumerHandler] = [*producers, *consumers]
        for handler in handlers:
            try:
                handler.connection_lost(self)
            except Exception:  # one handler's failure must not keep the others from reconnecting
                log.exception("connection_lost handler failed")

    def _route(self, frames: list[Frame | MessageFrame | SendReceipt]) -> None:
        """Hand frames on in order; the hot two in runs: consecutive receipts for one producer, or
        messages for one consumer, reach it in one call (one round of its locks and wake-ups)."""
        run: list[Any] = []
        run_kind = run_owner = -1
        for frame in frames:
            if type(frame) is MessageFrame:  # the decoder makes these two classes exactly
                kind, owner = T.MESSAGE, frame[0]  # frame[0]: its consumer id
            elif type(frame) is SendReceipt:
                kind, owner = T.SEND_RECEIPT, frame.producer_id
            else:
                if run:
                    self._deliver(run_kind, run_owner, run)
                    run = []
                self._dispatch(cast(Frame, frame))  # neither of the two: a Frame
                continue
            if owner != run_owner or kind != run_kind:
                if run:
                    self._deliver(run_kind, run_owner, run)
                    run = []
                run_kind, run_owner = kind, owner
            run.append(frame)
        if run:
            self._deliver(run_kind, run_owner, run)

    def _deliver(self, kind: int, owner: int, run: list[Any]) -> None:
        if kind == T.SEND_RECEIPT:
            producer = self.producers.get(owner)
            if producer is not None:
                producer.handle_receipts(run)
        else:
            consumer = self.consumers.get(owner)
            if consumer is not None:
                consumer.handle_messages(run)

    def _dispatch(self, frame: Frame) -> None:
        """Hand on one frame other than SEND_RECEIPT and MESSAGE (see :meth:`_route`)."""
        command = frame.command
        kind = command.type
        bad_text = commands.text_fault(command)
        if bad_text is not None:
            raise FrameError(f"{commands.type_name(kind)} field {bad_text} is not UTF-8 text")
        if kind == T.SEND_ERROR:
            producer = self.producers.get(command.send_error.producer_id)
            if producer is not None:
                producer.handle_send_error(command.send_error)
        elif kind == T.PING:
            self.send_command(commands.make(T.PONG))
        elif kind == T.PONG:
            pass
        elif kind == T.ERROR:
            failure = command.error
            self._resolve(
                failure.request_id, error=exception_for(result_for_server_error(failure.error), failure.message or "")
            )
        elif kind == T.PRODUCER_SUCCESS:
            if command.producer_success.producer_ready:
                self._resolve(command.producer_success.request_id, command.producer_success)
        elif kind == T.LOOKUP_RESPONSE:
            lookup = command.lookupTopicResponse
            if lookup.response == CommandLookupTopicResponse.Failed:
                self._resolve(lookup.request_id, error=_response_error(lookup.error, lookup.message, Result.LookupError))
            else:
                self._resolve(lookup.request_id, lookup)
        elif kind == T.PARTITIONED_METADATA_RESPONSE:
            metadata = command.partitionMetadataResponse
            if metadata.response == CommandPartitionedTopicMetadataResponse.Failed:
                self._resolve(metadata.request_id, error=_response_error(metadata.error, metadata.message, Result.LookupError))
            else:
                self._resolve(metadata.request_id, metadata)
        elif kind in (T.CONSUMER_STATS_RESPONSE, T.GET_SCHEMA_RESPONSE):
            body = commands.body(command)
            if body.HasField("error_code"):
                self._resolve(body.request_id, error=_response_error(body.error_code, body.error_message))
            else:
                self._resolve(body.request_id, body)
        elif kind in _ERROR_FIELD_RESPONSES:
            body = commands.body(command)
            if body.HasField("error"):
                self._resolve(body.request_id, error=_response_error(body.error, body.message))
            else:
                self._resolve(body.request_id, body)
        elif kind in (T.SUCCESS, T.GET_LAST_MESSAGE_ID_RESPONSE, T.GET_TOPICS_OF_NAMESPACE_RESPONSE):
            body = commands.body(command)
            self._resolve(body.request_id, body)
        elif kind == T.CLOSE_PRODUCER:
            producer = self.producers.pop(command.close_producer.producer_id, None)
            if producer is not None:
                producer.handle_broker_close()
        elif kind == T.CLOSE_CONSUMER:
            consumer = self.consumers.pop(command.close_consumer.consumer_id, None)
            if consumer is not None:
                consumer.handle_broker_close()
        elif kind == T.ACTIVE_CONSUMER_CHANGE:
            consumer = self.consumers.get(command.active_consumer_change.consumer_id)
            if consumer is not None:
                consumer.handle_active_change(command.active_consumer_change.is_active)
        elif kind == T.REACHED_END_OF_TOPIC:
            consumer = self.consumers.get(command.reachedEndOfTopic.consumer_id)
            if consumer is not None:
                consumer.handle_end_of_topic()
        elif kind == T.AUTH_CHALLENGE and self._auth is not None:
            # Fresh credentials may take a request to an OAuth2 issuer: not on the reader thread.
            threading.Thread(
                target=self._answer_challenge, args=(self._auth,), name=f"pulsar-auth-{self.address}", daemon=True
            ).start()
        else:
            log.warning("ignoring unexpected %s from %s", commands.type_name(kind), self.address)


def _response_error(error: int, message: str, default: Result = Result.UnknownError) -> PulsarException:
    result = result_for_server_error(error)
    return exception_for(default if result is Result.UnknownError else result, message)


def _connect_command(auth: Authentication | None) -> BaseCommand:
    return commands.make(
        T.CONNECT,
        client_version=CLIENT_VERSION,
        protocol_version=PROTOCOL_VERSION,
        auth_method_name=auth.auth_method_name if auth else "none",
        auth_data=auth.auth_data() if auth else None,
        feature_flags=FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True),
    )


def _auth_response(auth: Authentication) -> BaseCommand:
    return commands.make(
        T.AUTH_RESPONSE,
        client_version=CLIENT_VERSION,
        protocol_version=PROTOCOL_VERSION,
        response=AuthData(auth_method_name=auth.auth_method_name, auth_data=auth.auth_data()),
    )
