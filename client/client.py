"""The client: service URL, lookups, partition metadata, the connection pool, and factories.

One connection per broker is shared by every producer and consumer the client places there. The
producers, consumers and readers it creates see it only as :class:`~.services.ClientServices`.
"""

from __future__ import annotations

import logging
import re
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .auth import Authentication
from .backoff import Backoff
from .connection import Connection
from .consumer import Consumer, ConsumerType, Reader, create_reader, subscribe
from .exceptions import RETRYABLE, AlreadyClosed, InvalidConfiguration, PulsarException, Result, exception_for
from .producer import Producer, create_producer
from .producer.limits import MemoryLimit
from .protocol.message_id import MessageId
from .protocol.PulsarApi_pb2 import BaseCommand, CommandLookupTopicResponse
from .schema import Schema, SchemaInfo
from .services import Closeable
from .table_view import TableView, create_table_view
from .timer import Timer
from .topic_name import TopicName

log = logging.getLogger(__name__)

T = BaseCommand.Type
R = TypeVar("R")
_MAX_REDIRECTS = 20
DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024


class ServiceUrl:
    """``pulsar://host:port[,host2:port2]`` or ``pulsar+ssl://...``."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        if parts.scheme not in ("pulsar", "pulsar+ssl"):
            raise InvalidConfiguration(f"service URL {url!r} must start with pulsar:// or pulsar+ssl://")
        self.url = url
        self.tls = parts.scheme == "pulsar+ssl"
        default_port = 6651 if self.tls else 6650
        self.hosts: list[tuple[str, int]] = []
        for hostport in parts.netloc.split(","):
            host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
            if not host:
                raise InvalidConfiguration(f"service URL {url!r} has no host")
            try:
                self.hosts.append((host, int(port) if port else default_port))
            except ValueError:
                raise InvalidConfiguration(f"service URL {url!r} has a bad port {port!r}") from None


class Client:
    """A Pulsar client; mirrors ``pulsar.Client`` of the official Python package."""

    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None = None,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10_000,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = True,
        tls_certificate_file_path: str | None = None,
        tls_private_key_file_path: str | None = None,
        keep_alive_interval_seconds: float = 30,
    ):
        self.service_url = ServiceUrl(service_url)
        if operation_timeout_seconds is None or operation_timeout_seconds <= 0:
            raise InvalidConfiguration(f"operation_timeout_seconds must be positive, got {operation_timeout_seconds}")
        self.authentication = authentication
        self.operation_timeout = float(operation_timeout_seconds)
        self.connection_timeout = connection_timeout_ms / 1000
        self.memory_limit_bytes = memory_limit_bytes
        # Shared by every producer of this client; 0 (or None) means unbounded.
        self.memory_limit = MemoryLimit(int(memory_limit_bytes or 0))
        self.keepalive_seconds = keep_alive_interval_seconds
        self.use_tls = use_tls or self.service_url.tls
        self._tls_context = (
            _tls_context(
                tls_trust_certs_file_path,
                tls_allow_insecure_connection,
                tls_validate_hostname,
                tls_certificate_file_path,
                tls_private_key_file_path,
            )
            if self.use_tls
            else None
        )
        self.timer = Timer()
        self._pool: dict[tuple[str, int], Connection] = {}
        self._pool_lock = threading.Lock()
        self._handlers: list[Closeable] = []
        self._closed = False

    # ---- connections ----

    def connection_to(self, host: str, port: int) -> Connection:
        """The pooled connection to a broker, opened if needed."""
        if self._closed:
            raise AlreadyClosed("the client is closed")
        key = (host, port)
        with self._pool_lock:
            connection = self._pool.get(key)
            if connection is not None and not connection.closed:
                return connection
            connection = Connection(
                host,
                port,
                timer=self.timer,
                tls_context=self._tls_context,
                authentication=self.authentication,
                connection_timeout=self.connection_timeout,
                keepalive_seconds=self.keepalive_seconds,
            )
            connection.open()
            self._pool[key] = connection
            return connection

    def service_connection(self) -> Connection:
        """A connection to one of the service URL's hosts, trying each in turn."""
        errors = []
        for host, port in self.service_url.hosts:
            try:
                return self.connection_to(host, port)
            except PulsarException as exc:
                errors.append(exc)
        raise errors[-1]

    def with_retries(self, what: str, operation: Callable[[], R], deadline: float | None = None) -> R:
        """Run ``operation``, retrying retryable errors with backoff until the operation timeout."""
        deadline = deadline or time.monotonic() + self.operation_timeout
        backoff = Backoff()
        while True:
            try:
                return operation()
            except PulsarException as exc:
                delay = backoff.next()
                if exc.result not in RETRYABLE or time.monotonic() + delay > deadline or self._closed:
                    raise
                log.info("%s failed (%s); retrying in %.1f s", what, exc, delay)
                time.sleep(delay)

    def lookup(self, topic: str) -> Connection:
        """The connection to the broker that serves ``topic`` (following redirects)."""
        connection = self.service_connection()
        authoritative = False
        for _ in range(_MAX_REDIRECTS):
            response = connection.call(
                T.LOOKUP, self.operation_timeout, topic=topic, authoritative=authoritative, advertised_listener_name=""
            )
            url = response.brokerServiceUrlTls if self.use_tls else response.brokerServiceUrl
            if response.proxy_through_service_url:
                return self.service_connection()
            target = ServiceUrl(url).hosts[0]
            if response.response == CommandLookupTopicResponse.Redirect:
                connection = self.connection_to(*target)
                authoritative = response.authoritative
                continue
            return self.connection_to(*target)
        raise exception_for(Result.LookupError, f"lookup of {topic} redirected more than {_MAX_REDIRECTS} times")

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; 0 for a non-partitioned topic."""
        name = str(TopicName.parse(topic))

        def ask() -> int:
            response = self.service_connection().call(T.PARTITIONED_METADATA, self.operation_timeout, topic=name)
            return int(response.partitions)

        return self.with_retries(f"partition metadata of {name}", ask)

    def get_topic_partitions(self, topic: str) -> list[str]:
        """The partition topic names of ``topic``, or ``[topic]`` if it is not partitioned."""
        name = TopicName.parse(topic)
        count = self.partition_count(str(name))
        return [str(name.partition_name(i)) for i in range(count)] if count else [str(name)]

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo:
        """The schema ``topic`` registered under ``version`` (GET_SCHEMA); consumers' schemas ask for the
        schema a message was written with."""
        name = str(TopicName.parse(topic))

        def ask() -> SchemaInfo:
            response = self.lookup(name).call(
                T.GET_SCHEMA, self.operation_timeout, topic=name, schema_version=version.to_bytes(8, "big", signed=True)
            )
            return SchemaInfo.from_proto(response.schema)

        return self.with_retries(f"schema version {version} of {name}", ask)

    # ---- factories ----

    def create_producer(
        self, topic: str, producer_name: str | None = None, schema: Schema[Any] | None = None, **settings: Any
    ) -> Producer:
        """A producer on ``topic`` (partitioned or not) sending values encoded by ``schema`` (default: bytes);
        settings as ``pulsar.Client.create_producer``, in its order."""
        return create_producer(self, topic, producer_name=producer_name, schema=schema, **settings)

    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Schema[Any] | None = None,
        **settings: Any,
    ) -> Consumer:
        """A consumer on a topic, a list of topics or a regex pattern, whose messages' ``value()`` decodes
        with ``schema`` (default: bytes); settings as ``pulsar.Client.subscribe``, in its order."""
        if isinstance(schema, Schema):  # anything else is refused, by name, with the other settings
            schema.attach_client(self)
        return subscribe(self, topic, subscription_name, consumer_type=consumer_type, schema=schema, **settings)

    def create_reader(
        self, topic: str, start_message_id: MessageId, schema: Schema[Any] | None = None, **settings: Any
    ) -> Reader:
        """A reader from ``start_message_id`` decoding with ``schema`` (default: bytes); settings as
        ``pulsar.Client.create_reader``, in its order."""
        if isinstance(schema, Schema):  # anything else is refused, by name, with the other settings
            schema.attach_client(self)
        return create_reader(self, topic, start_message_id, schema, **settings)

    def create_table_view(self, topic: str, subscription_name: str | None = None, schema: Schema[Any] | None = None) -> TableView:
        """The latest value of every key of ``topic``, decoded with ``schema`` (default: bytes), kept up
        to date; as ``pulsar.Client.create_table_view``."""
        if isinstance(schema, Schema):  # anything else is refused, by name, with the other arguments
            schema.attach_client(self)
        return create_table_view(self, topic, subscription_name, schema)

    # ---- lifecycle ----

    def register(self, handler: Closeable) -> None:
        """Track a producer, consumer or reader so ``close()`` closes it."""
        self._handlers.append(handler)

    def unregister(self, handler: Closeable) -> None:
        """Forget a closed producer, consumer or reader."""
        if handler in self._handlers:
            self._handlers.remove(handler)

    def close(self) -> None:
        """Close every producer (flushing it), consumer and reader, then every connection."""
        if self._closed:
            return
        for handler in list(self._handlers):
            try:
                handler.close()
            except PulsarException as exc:
                log.warning("closing %s failed: %s", handler, exc)
        self._closed = True
        with self._pool_lock:
            connections = list(self._pool.values())
            self._pool.clear()
        for connection in connections:
            connection.close()
        self.timer.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _tls_context(
    trust_certs: str | None,
    allow_insecure: bool,
    validate_hostname: bool,
    cert_file: str | None,
    key_file: str | None,
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=trust_certs)
    if allow_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context.check_hostname = validate_hostname
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context
