"""Lookups over HTTP: what the client asks a broker's (or proxy's) admin REST port when its service
URL is ``http://`` or ``https://``, as the official client does.

The topic's broker comes from ``GET /lookup/v2/topic/...`` (``brokerUrl``, or ``brokerUrlTls``
for ``https://``), partitioned metadata from ``GET /admin/v2/.../partitions``, a schema version
from ``GET /admin/v2/schemas/.../schema/{version}`` and a namespace's topics from
``GET /admin/v2/namespaces/.../topics``; producers and consumers then speak the binary protocol to
the broker found. A URL naming several hosts (``http://h1:8080,h2:8080``) is served by the first
that answers, the next one tried when one does not. Failures are raised as the client's own errors (``ConnectError`` when the port
does not answer, ``TopicNotFound``, ``AuthenticationError``...), so retries treat them as they
treat the binary lookup's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from .admin import PulsarAdmin
from .admin.errors import AdminError, AdminNotFoundError, AdminServerError
from .auth import Authentication
from .exceptions import ConnectError, Result, exception_for
from .schema import SchemaInfo, SchemaType
from .service_info import ServiceUrl

__all__ = ["HttpLookup"]

R = TypeVar("R")
log = logging.getLogger(__name__)


class HttpLookup:
    """The lookup service of a client whose service URL is ``http://`` or ``https://``."""

    def __init__(
        self,
        service_url: ServiceUrl,
        authentication: Authentication | None,
        timeout_seconds: float,
        tls_trust_certs_file_path: str | None,
        tls_allow_insecure_connection: bool,
        tls_validate_hostname: bool,
    ):
        self._tls = service_url.tls
        scheme = "https" if service_url.tls else "http"
        # One admin client per host; the one that answered last is asked first.
        self._admins = [
            PulsarAdmin(
                f"{scheme}://{host}:{port}",
                authentication,
                timeout_seconds,
                tls_trust_certs_file_path,
                tls_allow_insecure_connection,
                tls_validate_hostname,
            )
            for host, port in service_url.hosts
        ]

    def broker_url(self, topic: str) -> str:
        """The binary URL (``pulsar://`` or, for ``https://``, ``pulsar+ssl://``) of the broker serving ``topic``."""
        data = self._ask(lambda admin: admin.lookup_topic(topic))
        url = data.get("brokerUrlTls") if self._tls else data.get("brokerUrl")
        if not url:
            field = "brokerUrlTls" if self._tls else "brokerUrl"
            raise exception_for(Result.LookupError, f"the HTTP lookup of {topic} answered no {field}: {data}")
        return str(url)

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; 0 when it is not partitioned."""
        return self._ask(lambda admin: admin.partitioned_topic_metadata(topic))

    def schema_info(self, topic: str, version: int) -> SchemaInfo:
        """The schema ``topic`` registered under ``version``."""
        document = self._ask(lambda admin: admin.get_schema(topic, version))
        return _schema_info(topic, document)

    def topics_of_namespace(self, namespace: str, mode: str) -> list[str]:
        """The topics of ``namespace`` of the kind ``mode`` (``PERSISTENT``, ``NON_PERSISTENT``, ``ALL``)."""
        return self._ask(lambda admin: admin.topics_of_namespace(namespace, mode))

    def close(self) -> None:
        """Close the HTTP connections."""
        for admin in self._admins:
            admin.close()

    def _ask(self, request: Callable[[PulsarAdmin], R]) -> R:
        admins = list(self._admins)
        for admin in admins[:-1]:
            try:
                return _translated(request, admin)
            except ConnectError as exc:
                # Nothing answered there: the next host, and this one last from now on.
                log.info("%s; trying the next host of the service URL", exc)
                self._admins.remove(admin)
                self._admins.append(admin)
        return _translated(request, admins[-1])


def _translated(request: Callable[[PulsarAdmin], R], admin: PulsarAdmin) -> R:
    """``request`` of ``admin``, its admin errors raised as the client's own."""
    try:
        return request(admin)
    except AdminNotFoundError as exc:
        raise exception_for(Result.TopicNotFound, str(exc)) from None
    except AdminServerError as exc:  # the broker is busy or moving the topic: worth retrying
        raise exception_for(Result.ServiceUnitNotReady, str(exc)) from None
    except AdminError as exc:
        result = exc.result if exc.result != Result.UnknownError else Result.LookupError
        raise exception_for(result, str(exc)) from None


def _schema_info(topic: str, document: dict[str, Any]) -> SchemaInfo:
    """A SchemaInfo from Pulsar's GetSchemaResponse JSON (``type``, ``data``, ``properties``)."""
    try:
        schema_type = SchemaType[str(document["type"])]
    except KeyError:
        raise exception_for(Result.UnknownError, f"the schema of {topic} has an unknown type: {document!r:.200}") from None
    text = str(document.get("data") or "")
    data = _key_value_data(text) if schema_type == SchemaType.KEY_VALUE and text else text
    properties = {str(key): str(value) for key, value in (document.get("properties") or {}).items()}
    return SchemaInfo(schema_type, schema_type.name, data, properties)


def _key_value_data(data: str) -> bytes:
    """The binary KeyValue definition (each side length-prefixed) from REST's ``{"key": ..., "value": ...}``."""
    try:
        sides = json.loads(data)
        parts = [json.dumps(sides[side], separators=(",", ":")).encode() for side in ("key", "value")]
    except (ValueError, KeyError, TypeError):
        return data.encode()
    return b"".join(len(part).to_bytes(4, "big") + part for part in parts)
