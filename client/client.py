"""The client: service URL, lookups, partition metadata, the connection pool, and factories.

One connection per broker is shared by every producer and consumer the client places there. The
producers, consumers and readers it creates see it only as :class:`~.services.ClientServices`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from .arguments import check, check_type, check_type_or_none
from .auth import Authentication
from .backoff import Backoff
from .connection import Connection
from .exceptions import RETRYABLE, AlreadyClosed, PulsarException, Result, exception_for
from .factories import ClientFactories
from .failover import AutoClusterFailover, ClusterFailoverProvider
from .forks import reset_after_fork
from .loggers import ConsoleLogger, FileLogger, LogRoute
from .partition_watch import PartitionWatch
from .producer.limits import MemoryLimit
from .protocol.PulsarApi_pb2 import BaseCommand, CommandGetTopicsOfNamespace, CommandLookupTopicResponse
from .schema import SchemaInfo
from .service_info import ServiceInfo, ServiceInfoProvider, ServiceUrl
from .services import TrackedHandler
from .timer import Timer
from .tls import TlsOptions
from .topic_name import TopicName
from .transaction import CoordinatorClient, Transaction

if TYPE_CHECKING:  # imported when a client is given an http(s):// URL: httpx is costly to import
    from .http_lookup import HttpLookup

log = logging.getLogger(__name__)

T = BaseCommand.Type
R = TypeVar("R")
_MAX_REDIRECTS = 20
DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024
# How long close() waits for a connection's threads to end (they do once its socket is closed).
_THREAD_JOIN_SECONDS = 5.0


class Client(ClientFactories):
    """A Pulsar client; mirrors ``pulsar.Client`` of the official Python package, argument for argument.

    ``service_url`` is a ``pulsar://`` or ``pulsar+ssl://`` URL, the ``http://`` or ``https://`` URL
    of a broker's (or proxy's) admin port, over which topics are then looked up (see "HTTP service
    URLs" in the docs' client page), an :class:`~.failover.AutoClusterFailover` or a
    :class:`~.service_info.ServiceInfoProvider`. ``io_threads``, ``message_listener_threads``,
    ``concurrent_lookup_requests``, ``log_conf_file_path`` and ``use_tls`` are accepted and have no
    effect: each connection has its own reader thread, each listener its own thread, and TLS follows
    the URL's scheme. Unlike the official client, ``tls_validate_hostname`` defaults to True. After
    the official arguments come this client's own, by keyword only: ``memory_limit_bytes``
    (shared by every producer; 0 or None means unbounded), ``keep_alive_interval_seconds``,
    ``partitions_update_interval_seconds`` and ``enable_transaction`` (for :meth:`new_transaction`,
    as the Java client's ``enableTransaction``).
    """

    def __init__(
        self,
        service_url: str | AutoClusterFailover | ServiceInfoProvider,
        authentication: Authentication | None = None,
        operation_timeout_seconds: float = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50000,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = True,
        logger: logging.Logger | ConsoleLogger | FileLogger | None = None,
        connection_timeout_ms: int = 10_000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
        *,
        memory_limit_bytes: int | None = DEFAULT_MEMORY_LIMIT,
        keep_alive_interval_seconds: float = 30,
        partitions_update_interval_seconds: float = 60,
        enable_transaction: bool = False,
    ):
        check_type((str, AutoClusterFailover, ServiceInfoProvider), service_url, "service_url")
        if not isinstance(service_url, str) and authentication is not None:
            raise ValueError("Argument authentication is not supported with a failover or provider service_url; set it on each ServiceInfo")
        if not isinstance(service_url, str) and tls_trust_certs_file_path is not None:
            raise ValueError(
                "Argument tls_trust_certs_file_path is not supported with a failover or provider service_url; set it on each ServiceInfo"
            )
        check_type_or_none(Authentication, authentication, "authentication")
        check_type((int, float), operation_timeout_seconds, "operation_timeout_seconds")
        check(operation_timeout_seconds > 0, "operation_timeout_seconds", "positive", operation_timeout_seconds)
        for name, value in (
            ("io_threads", io_threads),
            ("message_listener_threads", message_listener_threads),
            ("concurrent_lookup_requests", concurrent_lookup_requests),
            ("stats_interval_in_seconds", stats_interval_in_seconds),
            ("connection_timeout_ms", connection_timeout_ms),
        ):
            check_type(int, value, name)
        check(stats_interval_in_seconds >= 0, "stats_interval_in_seconds", ">= 0", stats_interval_in_seconds)
        for name, flag in (
            ("use_tls", use_tls),
            ("tls_allow_insecure_connection", tls_allow_insecure_connection),
            ("tls_validate_hostname", tls_validate_hostname),
        ):
            check_type(bool, flag, name)
        for name, text in (
            ("log_conf_file_path", log_conf_file_path),
            ("tls_trust_certs_file_path", tls_trust_certs_file_path),
            ("listener_name", listener_name),
            ("tls_private_key_file_path", tls_private_key_file_path),
            ("tls_certificate_file_path", tls_certificate_file_path),
        ):
            check_type_or_none(str, text, name)
        check_type_or_none(int, memory_limit_bytes, "memory_limit_bytes")
        check_type(bool, enable_transaction, "enable_transaction")
        check_type((int, float), partitions_update_interval_seconds, "partitions_update_interval_seconds")
        check(partitions_update_interval_seconds >= 0, "partitions_update_interval_seconds", ">= 0", partitions_update_interval_seconds)
        self._log_route = LogRoute(logger) if logger is not None else None
        self.operation_timeout = float(operation_timeout_seconds)
        self.connection_timeout = connection_timeout_ms / 1000
        self.memory_limit_bytes = memory_limit_bytes
        # Shared by every producer of this client; 0 (or None) means unbounded.
        self.memory_limit = MemoryLimit(int(memory_limit_bytes or 0))
        self.keepalive_seconds = keep_alive_interval_seconds
        self.listener_name = listener_name or ""
        self._tls_options = TlsOptions(
            tls_allow_insecure_connection, tls_validate_hostname, tls_certificate_file_path, tls_private_key_file_path
        )
        self._http_lookup: HttpLookup | None = None
        if isinstance(service_url, str):
            self._provider: ServiceInfoProvider | None = None
            self._use_service(ServiceInfo(service_url, authentication, tls_trust_certs_file_path))
        else:
            self._provider = ClusterFailoverProvider(service_url) if isinstance(service_url, AutoClusterFailover) else service_url
            initial = self._provider.initial_service_info()
            check_type(ServiceInfo, initial, "initial_service_info()")
            self._use_service(initial)
        self.timer = Timer()
        self.partition_watch = PartitionWatch(self.partition_count, float(partitions_update_interval_seconds))
        self._pool: dict[tuple[str, int], Connection] = {}
        self._pool_lock = threading.Lock()
        self._handlers: list[TrackedHandler] = []
        self._closed = False
        self._coordinator = CoordinatorClient(self) if enable_transaction else None
        self._stats_interval = stats_interval_in_seconds
        self._stats_handle = self.timer.call_every(stats_interval_in_seconds, self._log_stats) if stats_interval_in_seconds else None
        if self._provider is not None:
            self._provider.initialize(self._switch_service)
        self._pid = os.getpid()
        reset_after_fork(self._after_fork_in_child)

    # ---- the service in use ----

    def _use_service(self, info: ServiceInfo) -> None:
        self._service_info = info
        self.service_url = ServiceUrl(info.service_url)
        self.authentication = info.authentication
        self._tls_context = self._tls_options.context(info.tls_trust_certs_file_path, info.authentication) if info.use_tls else None
        previous, self._http_lookup = self._http_lookup, None
        if self.service_url.http:
            from .http_lookup import HttpLookup

            options = self._tls_options
            self._http_lookup = HttpLookup(
                self.service_url,
                info.authentication,
                self.operation_timeout,
                info.tls_trust_certs_file_path,
                options.allow_insecure_connection,
                options.validate_hostname,
            )
        if previous is not None:
            previous.close()

    @property
    def use_tls(self) -> bool:
        """Whether the service in use is reached over TLS (``pulsar+ssl://`` or ``https://``)."""
        return self.service_url.tls

    def get_service_info(self) -> ServiceInfo:
        """The cluster endpoint in use (it changes when a failover switches clusters)."""
        return self._service_info

    def _switch_service(self, info: ServiceInfo) -> None:
        """Move to another cluster: every connection closes, and producers and consumers reconnect there."""
        check_type(ServiceInfo, info, "service_info")
        with self._pool_lock:
            self._use_service(info)
            connections = list(self._pool.values())
            self._pool.clear()
        log.info("service URL is now %s", info.service_url)
        for connection in connections:
            connection.close()

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
        """A connection to one of the service URL's hosts, trying each in turn (binary service URLs only)."""
        if self._http_lookup is not None:
            raise exception_for(Result.InvalidConfiguration, f"{self.service_url.url} is looked up over HTTP; it has no binary port")
        errors = []
        for host, port in self.service_url.hosts:
            try:
                return self.connection_to(host, port)
            except PulsarException as exc:
                errors.append(exc)
        raise errors[-1]

    def with_retries(
        self, what: str, operation: Callable[[], R], deadline: float | None = None, retryable: frozenset[Result] = RETRYABLE
    ) -> R:
        """Run ``operation``, retrying ``retryable`` errors with backoff until the operation timeout."""
        deadline = deadline or time.monotonic() + self.operation_timeout
        backoff = Backoff()
        while True:
            try:
                return operation()
            except PulsarException as exc:
                delay = backoff.next()
                if exc.result not in retryable or time.monotonic() + delay > deadline or self._closed:
                    raise
                log.info("%s failed (%s); retrying in %.1f s", what, exc, delay)
                time.sleep(delay)

    def lookup(self, topic: str) -> Connection:
        """The connection to the broker that serves ``topic`` (following redirects)."""
        if self._http_lookup is not None:
            return self.connection_to(*self._broker_address(topic, self._http_lookup.broker_url(topic)))
        connection = self.service_connection()
        authoritative = False
        for _ in range(_MAX_REDIRECTS):
            response = connection.call(
                T.LOOKUP,
                self.operation_timeout,
                topic=topic,
                authoritative=authoritative,
                advertised_listener_name=self.listener_name,
            )
            url = response.brokerServiceUrlTls if self.use_tls else response.brokerServiceUrl
            if response.proxy_through_service_url:
                return self.service_connection()
            target = self._broker_address(topic, url)
            if response.response == CommandLookupTopicResponse.Redirect:
                connection = self.connection_to(*target)
                authoritative = response.authoritative
                continue
            return self.connection_to(*target)
        raise exception_for(Result.LookupError, f"lookup of {topic} redirected more than {_MAX_REDIRECTS} times")

    @staticmethod
    def _broker_address(topic: str, url: str) -> tuple[str, int]:
        try:
            broker = ServiceUrl(url)
            if broker.http:
                raise ValueError(f"broker URL {url!r} must start with pulsar:// or pulsar+ssl://")
            return broker.hosts[0]
        except ValueError as exc:  # the broker's answer, not the user's argument
            raise exception_for(Result.InvalidConfiguration, f"lookup of {topic} answered {exc}") from None

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; 0 for a non-partitioned topic."""
        name = str(TopicName.parse(topic))

        def ask() -> int:
            if self._http_lookup is not None:
                return self._http_lookup.partition_count(name)
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
            if self._http_lookup is not None:
                return self._http_lookup.schema_info(name, version)
            response = self.lookup(name).call(
                T.GET_SCHEMA, self.operation_timeout, topic=name, schema_version=version.to_bytes(8, "big", signed=True)
            )
            return SchemaInfo.from_proto(response.schema)

        return self.with_retries(f"schema version {version} of {name}", ask)

    def topics_of_namespace(self, namespace: str, mode: int) -> list[str]:
        """The topics of ``namespace`` (``tenant/namespace``) of the kind ``mode`` (a
        ``CommandGetTopicsOfNamespace.Mode``), partitions listed one by one."""
        if self._http_lookup is not None:
            mode_name = CommandGetTopicsOfNamespace.Mode.Name(mode)  # type: ignore[arg-type]
            return self._http_lookup.topics_of_namespace(namespace, mode_name)
        response = self.service_connection().call(T.GET_TOPICS_OF_NAMESPACE, self.operation_timeout, namespace=namespace, mode=mode)
        return list(response.topics)

    # ---- transactions ----

    def new_transaction(self, transaction_timeout_ms: int = 60_000) -> Transaction:
        """Open a transaction on one of the cluster's coordinators; they abort it after
        ``transaction_timeout_ms`` unless it was committed or aborted by then.

        Raises:
            InvalidConfiguration: the client was built without ``enable_transaction=True``.
            TransactionCoordinatorNotFoundError: the cluster runs no transaction coordinator.
        """
        check_type(int, transaction_timeout_ms, "transaction_timeout_ms")
        check(transaction_timeout_ms > 0, "transaction_timeout_ms", "positive", transaction_timeout_ms)
        if self._closed:
            raise AlreadyClosed("the client is closed")
        if self._coordinator is None:
            raise exception_for(Result.InvalidConfiguration, "transactions are not enabled: build the Client with enable_transaction=True")
        txn_id = self._coordinator.new_transaction(transaction_timeout_ms)
        return Transaction(self._coordinator, txn_id, transaction_timeout_ms, self.timer, self.operation_timeout)

    # ---- lifecycle ----

    def register(self, handler: TrackedHandler) -> None:
        """Track a producer, consumer or reader so ``close()`` closes it."""
        self._handlers.append(handler)

    def unregister(self, handler: TrackedHandler) -> None:
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
        self._release()

    def shutdown(self) -> None:
        """Close everything at once, without waiting: no flush, no close handshake with the broker;
        pending sends fail with AlreadyClosed."""
        if self._closed:
            return
        self._closed = True
        for handler in list(self._handlers):
            handler.shutdown()
        self._release()

    def _release(self) -> None:
        self._closed = True
        self.partition_watch.close()
        if self._provider is not None:
            self._provider.close()
        with self._pool_lock:
            connections = list(self._pool.values())
            self._pool.clear()
        for connection in connections:
            connection.close()
        for connection in connections:
            connection.join(_THREAD_JOIN_SECONDS)
        if self._http_lookup is not None:
            self._http_lookup.close()
        self.timer.close()
        if self._log_route is not None:
            self._log_route.close()

    def _after_fork_in_child(self) -> None:
        """In a forked child: start over with no connection, new threads and fresh locks (see
        ``forks``). The parent's connections are let go of, never closed on the wire; what was
        opened on them stays the parent's and refuses to work here."""
        parent, self._pid = self._pid, os.getpid()
        self._pool_lock = threading.Lock()
        inherited, self._pool = list(self._pool.values()), {}
        handlers, self._handlers = self._handlers, []
        if self._closed:
            return
        for connection in inherited:
            connection.abandon()
        if self._coordinator is not None:
            self._coordinator.forget_connections()
        for handler in handlers:
            handler.forked(parent)
        self.timer = Timer()
        self.memory_limit = MemoryLimit(self.memory_limit.limit)
        self.partition_watch = PartitionWatch(self.partition_count, self.partition_watch.interval)
        if self._stats_handle is not None:
            self._stats_handle = self.timer.call_every(self._stats_interval, self._log_stats)
        if self._provider is not None:
            # Its threads did not come along: it starts providing again, from the endpoint in use.
            self._provider.initialize(self._switch_service)

    def _log_stats(self) -> None:
        """Every ``stats_interval_in_seconds``: one stats line per producer and consumer, as the official client logs them."""
        for handler in list(self._handlers):
            handler.log_stats()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
