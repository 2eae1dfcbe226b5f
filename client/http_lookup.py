"""Lookups over HTTP: what the client asks a broker's (or proxy's) admin REST port when its service
URL is ``http://`` or ``https://``, as the official client does.

The topic's broker comes from ``GET /lookup/v2/topic/...`` (``brokerUrl``, or ``brokerUrlTls``
for ``https://``), partitioned metadata from ``GET /admin/v2/.../partitions``, a schema version
from ``GET /admin/v2/schemas/.../schema/{version}`` and a namespace's topics from
``GET /admin/v2/namespaces/.../topics``; producers and consumers then speak the binary protocol to
the broker found. Failures are raised as the client's own errors (``ConnectError`` when the port
does not answer, ``TopicNotFound``, ``AuthenticationError``...), so retries treat them as they
treat the binary lookup's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from .admin import PulsarAdmin
from .admin.errors import AdminError, AdminNotFoundError, AdminServerError
from .auth import Authentication
from .exceptions import Result, exception_for
from .schema import SchemaInfo, SchemaType

__all__ = ["HttpLookup"]

R = TypeVar("R")


class HttpLookup:
    """The lookup service of a client whose service URL is ``http://`` or ``https://``."""

    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None,
        timeout_seconds: float,
        tls_trust_certs_file_path: str | None,
        tls_allow_insecure_connection: bool,
        tls_validate_hostname: bool,
    ):
        self._tls = service_url.startswith("https:")
        try:
            self._admin = PulsarAdmin(
                service_url,
                authentication,
                timeout_seconds,
                tls_trust_certs_file_path,
                tls_allow_insecure_connection,
                tls_validate_hostname,
            )
        except AdminError as exc:
            raise ValueError(f"service URL {service_url!r}: {exc}") from None

    def broker_url(self, topic: str) -> str:
        """The binary URL (``pulsar://`` or, for ``https://``, ``pulsar+ssl://``) of the broker serving ``topic``."""
        data = self._ask(lambda: self._admin.lookup_topic(topic))
        url = data.get("brokerUrlTls") if self._tls else data.get("brokerUrl")
        if not url:
            field = "brokerUrlTls" if self._tls else "brokerUrl"
            raise exception_for(Result.LookupError, f"the HTTP lookup of {topic} answered no {field}: {data}")
        return str(url)

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; 0 when it is not partitioned."""
        return self._ask(lambda: self._admin.partitioned_topic_metadata(topic))

    def schema_info(self, topic: str, version: int) -> SchemaInfo:
        """The schema ``topic`` registered under ``version``."""
        document = self._ask(lambda: self._admin.get_schema(topic, version))
        return _schema_info(topic, document)

    def topics_of_namespace(self, namespace: str, mode: str) -> list[str]:
        """The topics of ``namespace`` of the kind ``mode`` (``PERSISTENT``, ``NON_PERSISTENT``, ``ALL``)."""
        return self._ask(lambda: self._admin.topics_of_namespace(namespace, mode))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._admin.close()

    @staticmethod
    def _ask(request: Callable[[], R]) -> R:
        try:
            return request()
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
