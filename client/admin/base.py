"""What the blocking and the asyncio admin client share: configuration, request building and
every admin method, each declared once from its operation."""

from __future__ import annotations

import ssl
from typing import Any

import httpx

from ..auth import Authentication, AuthenticationDisabled, load_client_certificate
from ..exceptions import AlreadyClosed, InvalidConfiguration
from ..forks import reset_after_fork
from . import backlog as backlog_operations
from . import lookups, operations, permissions, schemas, transactions
from .calls import NO_BODY, AdminCall, Operation, T
from .exchange import display_url
from .method import AdminMethod
from .scheduler import Scheduler

# Admin calls one client has in flight at most: enough to hide a remote broker's round trips
# behind each other when a backlog is counted partition by partition, few enough for one broker.
DEFAULT_MAX_CONCURRENT_REQUESTS = 16


class AdminBase:
    """Configuration, request building and the admin methods of both clients; each client adds
    its own ``_run``, which sends the requests of a :class:`Scheduler` through its httpx client,
    at most ``max_concurrent_requests`` at a time (over all the operations it runs at once)."""

    _http: httpx.Client | httpx.AsyncClient

    def __init__(
        self,
        web_service_url: str,
        authentication: Authentication | None = None,
        timeout_seconds: float = 30,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = True,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
    ):
        try:
            url = httpx.URL(web_service_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise InvalidConfiguration(f"admin web service URL {web_service_url!r} is invalid: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise InvalidConfiguration(
                f"admin web service URL {display_url(url)!r} must be http://host:port or https://host:port"
            )
        if timeout_seconds is None or timeout_seconds <= 0:
            raise InvalidConfiguration(f"timeout_seconds must be positive, got {timeout_seconds}")
        if isinstance(max_concurrent_requests, bool) or not isinstance(max_concurrent_requests, int) or max_concurrent_requests < 1:
            raise InvalidConfiguration(f"max_concurrent_requests must be an int >= 1, got {max_concurrent_requests!r}")
        self.max_concurrent_requests = max_concurrent_requests
        self.web_service_url = display_url(url).rstrip("/")
        self.authentication = authentication or AuthenticationDisabled()
        self.timeout_seconds = timeout_seconds
        self._base_url = url
        self._verify: ssl.SSLContext
        client_certificate = self.authentication.tls_certificate_files() is not None
        if tls_allow_insecure_connection or tls_trust_certs_file_path or not tls_validate_hostname or client_certificate:
            self._verify = ssl.create_default_context(cafile=tls_trust_certs_file_path)
            if tls_allow_insecure_connection:
                self._verify.check_hostname = False
                self._verify.verify_mode = ssl.CERT_NONE
            else:
                # Without host name checks the certificate chain is still verified, as on the binary port.
                self._verify.check_hostname = tls_validate_hostname
            # A client certificate (AuthenticationTLS) is presented on https:// as on pulsar+ssl://.
            load_client_certificate(self._verify, self.authentication)
        else:
            # httpx's default, made once: httpx makes one per client even for http://, which costs
            # tens of ms, too long to make one for each lane of the asyncio client on its event loop.
            self._verify = httpx.create_ssl_context()
        # Redirects are followed by the Exchange, which keeps the auth headers (httpx drops them across hosts).
        # A connection per call in flight, kept alive between calls (the client bounds the calls).
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=max_concurrent_requests)
        self._http_options: dict[str, Any] = {
            "base_url": self._base_url,
            "timeout": httpx.Timeout(timeout_seconds),
            "verify": self._verify,
            "follow_redirects": False,
            "limits": limits,
        }
        self._inherited_http: list[httpx.Client | httpx.AsyncClient] = []
        self._http = self._open(**self._http_options)
        reset_after_fork(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        """In a forked child: a new connection pool. The parent's pooled connections are its own
        sockets: kept here unused, never closed, so nothing of this process ends them (see ``forks``)."""
        if not self._http.is_closed:
            self._inherited_http.append(self._http)
            self._http = self._open(**self._http_options)

    def _open(self, **options: Any) -> httpx.Client | httpx.AsyncClient:
        raise NotImplementedError

    def _run(self, operation: Operation[T]) -> Any:
        """Do ``operation``'s calls: its result, or from the asyncio client a coroutine giving it."""
        raise NotImplementedError

    def _schedule(self, operation: Operation[T]) -> Scheduler[T]:
        """Start ``operation``; AlreadyClosed once the client is closed."""
        if self._http.is_closed:
            operation.close()
            raise AlreadyClosed(f"{type(self).__name__} for {self.web_service_url} is closed")
        return Scheduler(operation, self._build_request, self.max_concurrent_requests)

    def _build_request(self, call: AdminCall, url: httpx.URL | None) -> httpx.Request:
        headers = {"Accept": "application/json", **self.authentication.http_headers()}
        extra: dict[str, Any] = {} if call.body is NO_BODY else {"json": call.body}
        if url is not None:  # a redirect target already carries the query
            return self._http.build_request(call.method, url, headers=headers, **extra)
        # No params, no query merge: httpx would parse the URL once more for an empty one.
        return self._http.build_request(call.method, call.path, params=dict(call.params) or None, headers=headers, **extra)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.web_service_url!r})"

    # ---- namespaces ----
    list_topics = AdminMethod(operations.list_topics)
    list_partitioned_topics = AdminMethod(operations.list_partitioned_topics)
    create_namespace = AdminMethod(operations.create_namespace)
    delete_namespace = AdminMethod(operations.delete_namespace)
    namespace_deduplication = AdminMethod(operations.namespace_deduplication)
    set_namespace_deduplication = AdminMethod(operations.set_namespace_deduplication)

    # ---- topics ----
    create_topic = AdminMethod(operations.create_topic)
    delete_topic = AdminMethod(operations.delete_topic)
    create_partitioned_topic = AdminMethod(operations.create_partitioned_topic)
    update_partitioned_topic = AdminMethod(operations.update_partitioned_topic)
    partition_count = AdminMethod(operations.partition_count)
    topic_deduplication = AdminMethod(operations.topic_deduplication)
    set_topic_deduplication = AdminMethod(operations.set_topic_deduplication)
    delete_partitioned_topic = AdminMethod(operations.delete_partitioned_topic)

    # ---- lookups (what a client with an http:// service URL asks) ----
    lookup_topic = AdminMethod(lookups.lookup_topic)
    partitioned_topic_metadata = AdminMethod(lookups.partitioned_topic_metadata)
    topics_of_namespace = AdminMethod(lookups.topics_of_namespace)

    # ---- stats ----
    topic_stats = AdminMethod(operations.topic_stats)
    internal_stats = AdminMethod(operations.internal_stats)
    partitioned_internal_stats = AdminMethod(operations.partitioned_internal_stats)
    partitioned_stats = AdminMethod(operations.partitioned_stats)
    transaction_buffer_stats = AdminMethod(transactions.transaction_buffer_stats)

    # ---- compaction ----
    trigger_compaction = AdminMethod(operations.trigger_compaction)
    compaction_status = AdminMethod(operations.compaction_status)
    backlog = AdminMethod(backlog_operations.backlog)
    message_backlog = AdminMethod(backlog_operations.message_backlog)

    # ---- subscriptions ----
    list_subscriptions = AdminMethod(operations.list_subscriptions)
    create_subscription = AdminMethod(operations.create_subscription)
    delete_subscription = AdminMethod(operations.delete_subscription)
    reset_cursor = AdminMethod(operations.reset_cursor)
    reset_cursor_to_message_id = AdminMethod(operations.reset_cursor_to_message_id)
    clear_backlog = AdminMethod(operations.clear_backlog)
    peek_message = AdminMethod(operations.peek_message)
    get_message_by_id = AdminMethod(operations.get_message_by_id)
    examine_message = AdminMethod(operations.examine_message)

    # ---- schemas ----
    get_schema = AdminMethod(schemas.get_schema)
    get_all_schemas = AdminMethod(schemas.get_all_schemas)
    create_schema = AdminMethod(schemas.create_schema)
    delete_schema = AdminMethod(schemas.delete_schema)
    namespace_schema_compatibility_strategy = AdminMethod(schemas.namespace_schema_compatibility_strategy)
    set_namespace_schema_compatibility_strategy = AdminMethod(schemas.set_namespace_schema_compatibility_strategy)

    # ---- permissions ----
    namespace_permissions = AdminMethod(permissions.namespace_permissions)
    grant_namespace_permission = AdminMethod(permissions.grant_namespace_permission)
    revoke_namespace_permission = AdminMethod(permissions.revoke_namespace_permission)
    topic_permissions = AdminMethod(permissions.topic_permissions)
    grant_topic_permission = AdminMethod(permissions.grant_topic_permission)
    revoke_topic_permission = AdminMethod(permissions.revoke_topic_permission)
    subscription_permissions = AdminMethod(permissions.subscription_permissions)
    grant_subscription_permission = AdminMethod(permissions.grant_subscription_permission)
    revoke_subscription_permission = AdminMethod(permissions.revoke_subscription_permission)
