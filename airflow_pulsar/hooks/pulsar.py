"""PulsarHook: turns an Airflow ``pulsar`` connection into a bundled-client ``Client``.

Nothing here connects at import or construction; the client is built on first use and cached.
The password (a token, a basic password or an OAuth2 client secret) is registered with Airflow's
secrets masker and never appears in a repr, a log line or a ``test_connection`` message.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from airflow.sdk import BaseHook

from airflow_pulsar.client import Client, Consumer, MessageId, Producer, Reader
from airflow_pulsar.client.asyncio import Client as AsyncClient
from airflow_pulsar.client.forks import reset_after_fork
from airflow_pulsar.get_provider_info import PULSAR_UI_FIELD_BEHAVIOUR
from airflow_pulsar.hooks.authentication import ConnectionAuthentication

if TYPE_CHECKING:  # at run time the admin client is imported on first use
    from airflow_pulsar.client.admin import AsyncPulsarAdmin, PulsarAdmin

DEFAULT_PORT = 6650
DEFAULT_TLS_PORT = 6651
DEFAULT_ADMIN_PORT = 8080
DEFAULT_ADMIN_TLS_PORT = 8443
# Service URL schemes a host may hold; http(s):// URLs are looked up over the admin REST port.
_SERVICE_SCHEMES = ("pulsar", "pulsar+ssl", "http", "https")
_TLS_SCHEMES = ("pulsar+ssl", "https")
# A producer, consumer or reader the hook closes on close().
H = TypeVar("H", Producer, Consumer, Reader)
_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off", ""}


def _mask_secret(secret: str) -> None:
    """Register ``secret`` with Airflow's secrets masker (task process and, in a task, its supervisor)."""
    from airflow.sdk.log import mask_secret

    mask_secret(secret)


def _as_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"connection extra {name!r} must be a boolean, got {value!r}")


def _as_number(value: Any, name: str, kind: type) -> Any:
    try:
        number = kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"connection extra {name!r} must be a number, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"connection extra {name!r} must be positive, got {value!r}")
    return number


@dataclass(frozen=True)
class PulsarConnectionConfig:
    """What a ``pulsar`` connection resolves to; the password is left out of the repr."""

    service_url: str
    admin_url: str
    credentials: ConnectionAuthentication = field(default_factory=ConnectionAuthentication)
    use_tls: bool = False
    tls_trust_certs_file_path: str | None = None
    tls_allow_insecure_connection: bool = False
    tls_validate_hostname: bool = True
    operation_timeout_seconds: float | None = None
    memory_limit_bytes: int | None = None

    @property
    def token(self) -> str | None:
        """The token of token authentication, else None."""
        return self.credentials.token

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Client`` (without the service URL); None values are left out."""
        kwargs: dict[str, Any] = {
            "authentication": self.credentials.authentication(),
            # Presented in every TLS handshake (mutual TLS), whichever the authentication method.
            "tls_certificate_file_path": self.credentials.tls_certificate_file_path,
            "tls_private_key_file_path": self.credentials.tls_private_key_file_path,
            "use_tls": self.use_tls,
            "tls_trust_certs_file_path": self.tls_trust_certs_file_path,
            "tls_allow_insecure_connection": self.tls_allow_insecure_connection,
            "tls_validate_hostname": self.tls_validate_hostname,
            "operation_timeout_seconds": self.operation_timeout_seconds,
            "memory_limit_bytes": self.memory_limit_bytes,
        }
        return {key: value for key, value in kwargs.items() if value is not None}

    @classmethod
    def from_connection(cls, conn: Any) -> PulsarConnectionConfig:
        """Resolve host, port, password and extras of an Airflow connection."""
        extra = _unprefixed(conn.extra_dejson)
        host = (conn.host or "").strip()
        if not host:
            raise ValueError(f"connection {conn.conn_id!r} has no host: set the broker host or a pulsar:// URL")
        use_tls = _as_bool(extra.get("use_tls", False), "use_tls")
        if "://" in host:
            scheme = host.split("://", 1)[0].lower()
            if scheme not in _SERVICE_SCHEMES:
                raise ValueError(
                    f"connection {conn.conn_id!r}: host {host!r} must be a host name or a pulsar://, "
                    "pulsar+ssl://, http:// or https:// service URL"
                )
            service_url = host
            use_tls = use_tls or scheme in _TLS_SCHEMES
            first_host = urlsplit(host).netloc.split(",")[0].rsplit(":", 1)[0]
            if scheme.startswith("http"):  # the admin REST port is the one the client looks topics up on
                extra.setdefault("admin_url", host.split(",")[0])
        else:
            scheme = "pulsar+ssl" if use_tls else "pulsar"
            port = conn.port or (DEFAULT_TLS_PORT if use_tls else DEFAULT_PORT)
            service_url = f"{scheme}://{host}:{port}"
            first_host = host
        admin_url = extra.get("admin_url") or (
            f"https://{first_host}:{DEFAULT_ADMIN_TLS_PORT}" if use_tls else f"http://{first_host}:{DEFAULT_ADMIN_PORT}"
        )
        password = conn.password or None
        if password:
            _mask_secret(password)
        timeout = extra.get("operation_timeout_seconds")
        memory = extra.get("memory_limit_bytes")
        return cls(
            service_url=service_url,
            admin_url=str(admin_url).rstrip("/"),
            credentials=ConnectionAuthentication.from_connection(conn.conn_id, conn.login, password, extra),
            use_tls=use_tls,
            tls_trust_certs_file_path=extra.get("tls_trust_certs_file_path") or None,
            tls_allow_insecure_connection=_as_bool(
                extra.get("tls_allow_insecure_connection", False), "tls_allow_insecure_connection"
            ),
            tls_validate_hostname=_as_bool(extra.get("tls_validate_hostname", True), "tls_validate_hostname"),
            operation_timeout_seconds=(
                _as_number(timeout, "operation_timeout_seconds", float) if timeout not in (None, "") else None
            ),
            memory_limit_bytes=_as_number(memory, "memory_limit_bytes", int) if memory not in (None, "") else None,
        )


def _unprefixed(extra: dict[str, Any]) -> dict[str, Any]:
    """Extras by plain name; accepts the old ``extra__pulsar__<name>`` form too (plain name wins)."""
    prefix = "extra__pulsar__"
    result = {key[len(prefix) :]: value for key, value in extra.items() if key.startswith(prefix)}
    result.update({key: value for key, value in extra.items() if not key.startswith(prefix)})
    return result


class PulsarHook(BaseHook):
    """
    Interact with Apache Pulsar through the bundled client (``airflow_pulsar.client``).

    The connection's host (and port) give the service URL, ``pulsar://host:6650`` or, with the
    ``use_tls`` extra, ``pulsar+ssl://host:6651``; a host holding a ``pulsar://`` or
    ``pulsar+ssl://`` URL (several brokers allowed) is used as is, and so is an ``http://`` or
    ``https://`` URL of the admin port (the client then looks topics up over HTTP, and the admin
    URL defaults to it). The ``auth_method`` extra picks
    the authentication (see the docs' connection page): by default the password
    is a token for ``AuthenticationToken``; ``basic``, ``tls`` (client certificate) and ``oauth2``
    read the login, password and extras. Producers, consumers and readers made here are closed by
    ``close()``.

    :param pulsar_conn_id: The Airflow connection to use, ``pulsar_default`` by default.
    :param client_kwargs: Further keyword arguments for ``Client``, overriding the connection's.
    :param enable_transaction: Build the client with ``enable_transaction=True``, for
        ``client.new_transaction()`` (the broker must run transaction coordinators).
    """

    conn_name_attr = "pulsar_conn_id"
    default_conn_name = "pulsar_default"
    conn_type = "pulsar"
    hook_name = "Apache Pulsar"

    test_topic = "persistent://public/default/airflow-connection-test"
    test_timeout_seconds = 10.0

    def __init__(
        self,
        pulsar_conn_id: str = default_conn_name,
        client_kwargs: dict[str, Any] | None = None,
        *,
        enable_transaction: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pulsar_conn_id = pulsar_conn_id
        self.client_kwargs = dict(client_kwargs or {})
        if enable_transaction:
            self.client_kwargs["enable_transaction"] = True
        self._config: PulsarConnectionConfig | None = None
        self._client: Client | None = None
        self._admin: PulsarAdmin | None = None
        self._handlers: list[Producer | Consumer | Reader] = []
        self._lock = threading.RLock()
        reset_after_fork(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        """In a forked child (a LocalExecutor or Celery worker): the cached client and admin carry
        on, reconnecting on first use; the producers, consumers and readers made here before the
        fork are the parent's and refuse to work here, so they are forgotten (see the client's ``forks``)."""
        self._lock = threading.RLock()  # a thread of the parent may have held it at the fork
        self._handlers = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pulsar_conn_id={self.pulsar_conn_id!r})"

    # ---- connection form: Airflow 3.3 reads the fields from get_provider_info ----

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Relabel host, port, login and password for Pulsar's authentication methods; hide schema."""
        return {
            "hidden_fields": list(PULSAR_UI_FIELD_BEHAVIOUR["hidden-fields"]),
            "relabeling": dict(PULSAR_UI_FIELD_BEHAVIOUR["relabeling"]),
            "placeholders": dict(PULSAR_UI_FIELD_BEHAVIOUR["placeholders"]),
        }

    # ---- configuration ----

    @property
    def config(self) -> PulsarConnectionConfig:
        """The resolved connection (read once; the token is masked when read)."""
        with self._lock:
            if self._config is None:
                self._config = PulsarConnectionConfig.from_connection(self.get_connection(self.pulsar_conn_id))
            return self._config

    async def aget_config(self) -> PulsarConnectionConfig:
        """The resolved connection, read without blocking the event loop (for triggers)."""
        if self._config is None:
            config = PulsarConnectionConfig.from_connection(await self.aget_connection(self.pulsar_conn_id))
            with self._lock:
                self._config = self._config or config
        return self._config

    @property
    def service_url(self) -> str:
        return self.config.service_url

    @property
    def admin_url(self) -> str:
        return self.config.admin_url

    def _client_kwargs(self) -> dict[str, Any]:
        return {**self.config.client_kwargs(), **self.client_kwargs}

    # ---- client and factories ----

    def get_client(self) -> Client:
        """The hook's client, built on first call and cached until ``close()``."""
        with self._lock:
            if self._client is None:
                self.log.info("Creating Pulsar client for %s (connection %s)", self.service_url, self.pulsar_conn_id)
                self._client = Client(self.service_url, **self._client_kwargs())
            return self._client

    def get_conn(self) -> Client:
        """Same as ``get_client()`` (Airflow's generic hook entry point)."""
        return self.get_client()

    def get_async_client(self) -> AsyncClient:
        """A new asyncio ``Client`` (``airflow_pulsar.client.asyncio``, the ``pulsar.asyncio`` API) on the
        connection; not cached, since it belongs to the caller's event loop: close it with
        ``await client.close()``. In a trigger, ``await aget_config()`` first so the connection is
        read without blocking the loop."""
        return AsyncClient(self.service_url, **self._client_kwargs())

    def _track(self, handler: H) -> H:
        with self._lock:
            self._handlers.append(handler)
        return handler

    def create_producer(self, topic: str, **settings: Any) -> Producer:
        """A producer on ``topic``; settings as ``pulsar.Client.create_producer``."""
        return self._track(self.get_client().create_producer(topic, **settings))

    def subscribe(self, topics: str | list[str] | re.Pattern[str], subscription: str, **settings: Any) -> Consumer:
        """A consumer on a topic, list of topics or pattern; settings as ``pulsar.Client.subscribe``."""
        return self._track(self.get_client().subscribe(topics, subscription, **settings))

    def create_reader(self, topic: str, start_message_id: MessageId, **settings: Any) -> Reader:
        """A reader from ``start_message_id``; settings as ``pulsar.Client.create_reader``."""
        return self._track(self.get_client().create_reader(topic, start_message_id, **settings))

    # ---- admin REST (client/admin/, imported on first use) ----

    def _admin_kwargs(self) -> dict[str, Any]:
        config = self.config
        return {
            "authentication": config.credentials.authentication(),
            "timeout_seconds": config.operation_timeout_seconds or 30,
            "tls_trust_certs_file_path": config.tls_trust_certs_file_path,
            "tls_allow_insecure_connection": config.tls_allow_insecure_connection,
            "tls_validate_hostname": config.tls_validate_hostname,
        }

    def get_admin(self) -> PulsarAdmin:
        """The hook's blocking ``PulsarAdmin`` on the admin URL, cached until ``close()``."""
        from airflow_pulsar.client.admin import PulsarAdmin

        with self._lock:
            if self._admin is None:
                self._admin = PulsarAdmin(self.admin_url, **self._admin_kwargs())
            return self._admin

    def get_async_admin(self, max_concurrent_requests: int | None = None) -> AsyncPulsarAdmin:
        """A new ``AsyncPulsarAdmin`` on the admin URL; not cached (it belongs to the caller's event
        loop): use it as ``async with hook.get_async_admin() as admin:`` or ``await admin.aclose()``.
        ``max_concurrent_requests`` bounds its admin calls in flight (None: the client's default)."""
        from airflow_pulsar.client.admin import AsyncPulsarAdmin

        options = self._admin_kwargs()
        if max_concurrent_requests is not None:
            options["max_concurrent_requests"] = max_concurrent_requests
        return AsyncPulsarAdmin(self.admin_url, **options)

    def close(self) -> None:
        """Close the producers (flushing), consumers and readers made here, then the client and admin."""
        with self._lock:
            handlers, self._handlers = self._handlers, []
            client, self._client = self._client, None
            admin, self._admin = self._admin, None
        if admin is not None:
            admin.close()
        for handler in reversed(handlers):
            try:
                handler.close()
            except Exception as exc:
                self.log.warning("Closing %s failed: %s", type(handler).__name__, exc)
        if client is not None:
            client.close()

    def __enter__(self) -> PulsarHook:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- connection test ----

    def test_connection(self) -> tuple[bool, str]:
        """Ask the broker, over the binary protocol and then over the admin REST API (which the
        backlog sensor and subscription admin use), for a probe topic's partition metadata;
        (ok, message), the message naming which of the two failed."""
        try:
            config = self.config
        except Exception as exc:
            return False, f"Invalid Pulsar connection {self.pulsar_conn_id!r}: {exc}"
        kwargs = self._client_kwargs()
        kwargs["operation_timeout_seconds"] = min(
            float(kwargs.get("operation_timeout_seconds") or self.test_timeout_seconds), self.test_timeout_seconds
        )
        kwargs.setdefault("connection_timeout_ms", int(self.test_timeout_seconds * 1000))
        try:
            client = Client(config.service_url, **kwargs)
        except Exception as exc:
            return False, self._redact(f"Invalid Pulsar client settings for {config.service_url}: {exc}")
        try:
            partitions = client.partition_count(self.test_topic)
            # The broker serving the probe topic: over the binary protocol, or found over HTTP.
            connection = client.lookup(self.test_topic)
        except Exception as exc:
            return False, self._redact(f"Cannot reach Pulsar at {config.service_url}: {type(exc).__name__}: {exc}")
        finally:
            client.close()
        version = getattr(connection, "server_version", "") or "unknown version"
        connected = f"Connected to Pulsar at {config.service_url} ({version})"
        from airflow_pulsar.client.admin import PulsarAdmin

        try:
            admin_kwargs = {**self._admin_kwargs(), "timeout_seconds": self.test_timeout_seconds}
            with PulsarAdmin(config.admin_url, **admin_kwargs) as admin:
                admin.partition_count(self.test_topic)
        except Exception as exc:
            return False, self._redact(
                f"{connected}, but not to its admin REST API at {config.admin_url} (the connection's admin_url, "
                f"which the backlog sensor needs): {type(exc).__name__}: {exc}"
            )
        return True, (
            f"{connected} and to its admin REST API at {config.admin_url}; {self.test_topic} has {partitions} partitions."
        )

    def _redact(self, message: str) -> str:
        password = self._config.credentials.password if self._config is not None else None
        return message.replace(password, "***") if password else message
