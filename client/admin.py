"""Admin REST client for Pulsar's ``/admin/v2`` API, sync (:class:`PulsarAdmin`) and async
(:class:`AsyncPulsarAdmin`), over httpx.

The paths, request bodies, response decoding and error handling live once, in a sans-IO layer:
every operation is a generator that yields :class:`AdminCall` descriptions and receives their
decoded results (``backlog`` yields two calls, ``message_backlog`` a few per partition, the others
one). :class:`_Exchange` turns calls into
``httpx.Request`` objects, follows Pulsar's 307 redirects to the owning broker, decodes responses
and raises errors. The two public classes only move requests and responses through their httpx
client, so they cannot drift apart.

Only Pulsar's own paths and JSON field names are used, so this works against the standalone broker
and a real Pulsar cluster alike::

    with PulsarAdmin("http://localhost:8080") as admin:
        admin.create_partitioned_topic("orders", 4)
        print(admin.message_backlog("orders", "ingest").messages)

Credentials come from ``authentication.http_headers()`` on every request (so refreshed tokens are
picked up) and never appear in errors, reprs or logs.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from .auth import Authentication
from .consumer.settings import InitialPosition
from .exceptions import AlreadyClosed, InvalidConfiguration, PulsarException, Result
from .message_count import (
    DEFAULT_MAX_RANGE_LOOKUPS,
    CountError,
    CursorState,
    EntryIndex,
    MessageBacklog,
    PartitionMessageBacklog,
    Position,
    decode_entry_index,
    estimate_messages,
    index_at,
    lookup_position,
)
from .protocol.message_id import MessageId
from .topic_name import TopicName, is_valid_name_part

__all__ = [
    "AdminCall",
    "AdminAuthenticationError",
    "AdminAuthorizationError",
    "AdminConflictError",
    "AdminConnectionError",
    "AdminError",
    "AdminNotFoundError",
    "AdminPreconditionFailedError",
    "AdminServerError",
    "AdminTimeoutError",
    "AsyncPulsarAdmin",
    "MessageBacklog",
    "PartitionBacklog",
    "PartitionMessageBacklog",
    "PeekedMessage",
    "PulsarAdmin",
    "SubscriptionBacklog",
]

T = TypeVar("T")

_MAX_REDIRECTS = 5
_REDIRECTS = (307, 308)  # method- and body-preserving; Pulsar answers 307 toward the owning broker
_REASON_LIMIT = 300


# ---------------------------------------------------------------------------------------------
# Errors


class AdminError(PulsarException):
    """An admin REST call failed; ``status`` is the HTTP status (None when there was no HTTP error).

    The message names the client method, the HTTP method and path, and Pulsar's ``reason``.
    """

    def __init__(self, reason: str, *, operation: str, method: str, path: str, status: int | None = None):
        self.reason = reason
        self.operation = operation
        self.method = method
        self.path = path
        self.status = status
        super().__init__(self._describe())

    def _describe(self) -> str:
        outcome = f"HTTP {self.status}: " if self.status is not None else ""
        return f"{self.operation}: {self.method} {self.path} failed: {outcome}{self.reason}"


class AdminNotFoundError(AdminError):
    """404: the tenant, namespace, topic or subscription does not exist."""


class AdminConflictError(AdminError):
    """409: the topic or subscription already exists, or the topic is busy."""


class AdminPreconditionFailedError(AdminError):
    """412: e.g. deleting a subscription that has active consumers without ``force``."""


class AdminAuthorizationError(AdminError):
    """401 or 403: missing, invalid or insufficient credentials."""

    result = Result.AuthorizationError


class AdminAuthenticationError(AdminAuthorizationError):
    """401: no token, or one the broker refuses (wrong key, expired); the reason says which."""

    result = Result.AuthenticationError


class AdminServerError(AdminError):
    """5xx: the broker failed; usually worth retrying."""


class AdminConnectionError(AdminError):
    """No HTTP answer: the admin service could not be reached (the message names the URL)."""

    result = Result.ConnectError

    def __init__(self, reason: str, *, operation: str, method: str, path: str, url: str):
        self.url = url
        super().__init__(reason, operation=operation, method=method, path=path)

    def _describe(self) -> str:
        return f"{self.operation}: cannot reach the Pulsar admin service at {self.url} ({self.method}): {self.reason}"


class AdminTimeoutError(AdminConnectionError):
    """The admin service did not answer within ``timeout_seconds``."""

    result = Result.Timeout


_BY_STATUS: dict[int, type[AdminError]] = {
    401: AdminAuthenticationError,
    403: AdminAuthorizationError,
    404: AdminNotFoundError,
    409: AdminConflictError,
    412: AdminPreconditionFailedError,
}


def _status_error(call: AdminCall, path: str, response: httpx.Response) -> AdminError:
    cls = _BY_STATUS.get(response.status_code) or (AdminServerError if response.status_code >= 500 else AdminError)
    return cls(_reason(response), operation=call.operation, method=call.method, path=path, status=response.status_code)


def _reason(response: httpx.Response) -> str:
    """Pulsar's ``{"reason": ...}``, else the start of the body, else the status phrase."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("reason"):
        return str(body["reason"])
    text = " ".join(response.text.split())
    if text:
        return text[:_REASON_LIMIT] + ("..." if len(text) > _REASON_LIMIT else "")
    return response.reason_phrase or "no reason given"


def _display_url(url: httpx.URL) -> str:
    """The URL without credentials or query, for messages."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


# ---------------------------------------------------------------------------------------------
# Request descriptions (sans-IO)

_NO_BODY: Any = object()


class _UnexpectedResponse(ValueError):
    """A 2xx response whose body is not what the path returns."""


def _decode_json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise _UnexpectedResponse(f"expected JSON, got {response.text[:100]!r}") from None


def _decode_nothing(response: httpx.Response) -> None:
    return None


def _decode_names(response: httpx.Response) -> list[str]:
    body = _decode_json(response)
    if not isinstance(body, list) or not all(isinstance(item, str) for item in body):
        raise _UnexpectedResponse(f"expected a list of names, got {body!r:.100}")
    return body


def _decode_document(response: httpx.Response) -> dict[str, Any]:
    body = _decode_json(response)
    if not isinstance(body, dict):
        raise _UnexpectedResponse(f"expected a JSON object, got {body!r:.100}")
    return body


def _decode_partitions(response: httpx.Response) -> int:
    body = _decode_document(response)
    try:
        return int(body["partitions"])
    except (KeyError, TypeError, ValueError):
        raise _UnexpectedResponse(f"expected {{'partitions': N}}, got {body!r:.100}") from None


def _decode_policy_flag(response: httpx.Response) -> bool | None:
    # Pulsar answers an unset policy with an empty 200.
    if not response.content.strip():
        return None
    body = _decode_json(response)
    if not isinstance(body, bool):
        raise _UnexpectedResponse(f"expected true, false or nothing, got {body!r:.100}")
    return body


@dataclass(frozen=True)
class AdminCall:
    """One admin REST request described without doing it: what both clients send.

    ``operation`` is the client method named in errors; ``decode`` turns a 2xx response into
    the value the operation receives.
    """

    operation: str
    method: str
    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    body: Any = _NO_BODY
    decode: Callable[[httpx.Response], Any] = _decode_json


# An operation yields calls, receives each call's decoded result, and returns its own result.
Operation = Generator[AdminCall, Any, T]


def _topic(topic: str | TopicName) -> TopicName:
    return topic if isinstance(topic, TopicName) else TopicName.parse(topic)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _topic_path(name: TopicName, *suffix: str) -> str:
    parts = [name.domain, name.tenant, name.namespace, name.local_name, *suffix]
    return "/admin/v2/" + "/".join(_segment(part) for part in parts)


def _namespace_path(namespace: str, *suffix: str) -> str:
    tenant, _, local = namespace.partition("/")
    if not (is_valid_name_part(tenant) and is_valid_name_part(local)):
        raise ValueError(f"namespace must be 'tenant/namespace', got {namespace!r}")
    return "/admin/v2/persistent/" + "/".join(_segment(part) for part in (tenant, local, *suffix))


def _namespace_policy_path(namespace: str, *suffix: str) -> str:
    """``/admin/v2/namespaces/{tenant}/{namespace}/...``: the namespace's own resource."""
    tenant, _, local = namespace.partition("/")
    if not (is_valid_name_part(tenant) and is_valid_name_part(local)):
        raise ValueError(f"namespace must be 'tenant/namespace', got {namespace!r}")
    return "/admin/v2/namespaces/" + "/".join(_segment(part) for part in (tenant, local, *suffix))


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _stats_params(precise_backlog: bool) -> dict[str, str]:
    # subscriptionBacklogSize: newer Pulsar versions only fill a subscription's backlogSize on request.
    return {"getPreciseBacklog": _flag(precise_backlog), "subscriptionBacklogSize": "true"}


def _position_body(start: MessageId | InitialPosition) -> dict[str, Any]:
    """The message id body of a create-subscription request, as Pulsar's Java admin sends it."""
    if isinstance(start, InitialPosition):
        start = MessageId.earliest if start == InitialPosition.Earliest else MessageId.latest
    if not isinstance(start, MessageId):
        raise TypeError(f"start must be a MessageId or an InitialPosition, got {start!r}")
    body: dict[str, Any] = {"ledgerId": start.ledger_id(), "entryId": start.entry_id(), "partitionIndex": start.partition()}
    if start.batch_index() >= 0:
        body["batchIndex"] = start.batch_index()
    return body


@dataclass(frozen=True)
class PartitionBacklog:
    """One partition's backlog for a subscription, as Pulsar's stats give it: ``msg_backlog`` is
    ``msgBacklog``, in entries (a batch counts once)."""

    topic: str
    msg_backlog: int
    backlog_size: int


@dataclass(frozen=True)
class SubscriptionBacklog:
    """A subscription's backlog as Pulsar's stats give it: totals across partitions, and each
    partition's own. ``msg_backlog`` counts entries (see :class:`MessageBacklog` for messages).

    ``partitions`` is empty for a non-partitioned topic (the totals are then the topic's own).
    """

    topic: str
    subscription: str
    msg_backlog: int
    backlog_size: int
    partitions: tuple[PartitionBacklog, ...] = ()


@dataclass(frozen=True)
class PeekedMessage:
    """An entry looked at without consuming it (Pulsar's peek-messages, get-message-by-id and
    examine-message).

    ``message_id`` is Pulsar's ``ledger:entry`` text; ``publish_time_ms`` is milliseconds since the
    epoch; ``data`` is the entry's payload (a whole batch when ``batch_size`` is set). ``index`` is
    the broker entry index (PIP-90): the 0-based position of the entry's last message among all
    messages of the topic, None when the broker does not append it.
    """

    topic: str
    message_id: str
    publish_time_ms: int
    data: bytes = field(repr=False)
    batch_size: int | None = None
    index: int | None = None


def _publish_time_ms(text: str) -> int:
    """Pulsar's ``X-Pulsar-publish-time`` (ISO 8601; older brokers leave out the zone, meaning UTC)."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1000)


def _peek_decoder(topic: str) -> Callable[[httpx.Response], PeekedMessage]:
    def decode(response: httpx.Response) -> PeekedMessage:
        headers = response.headers
        try:
            publish_time = _publish_time_ms(headers["X-Pulsar-publish-time"])
        except (KeyError, ValueError):
            raise _UnexpectedResponse(f"expected an X-Pulsar-publish-time header, got {dict(headers)!r:.200}") from None
        batch = headers.get("X-Pulsar-num-batch-message")
        index = headers.get("X-Pulsar-Broker-Entry-METADATA-index")
        return PeekedMessage(
            topic=topic,
            message_id=headers.get("X-Pulsar-Message-ID", ""),
            publish_time_ms=publish_time,
            data=response.content,
            batch_size=int(batch) if batch and batch.isdigit() else None,
            index=int(index) if index and index.lstrip("-").isdigit() else None,
        )

    return decode


def _decode_entry_index(response: httpx.Response) -> EntryIndex:
    try:
        return decode_entry_index(response)
    except CountError as exc:
        raise _UnexpectedResponse(str(exc)) from None


def _non_negative_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be an int >= 0, got {value!r}")
    return value


def _sub_figures(stats: Mapping[str, Any], subscription: str) -> tuple[int, int] | None:
    sub = (stats.get("subscriptions") or {}).get(subscription)
    if sub is None:
        return None
    return int(sub.get("msgBacklog") or 0), int(sub.get("backlogSize") or 0)


class _Requests:
    """Every admin operation: Pulsar's paths, parameters and bodies, as generators of calls."""

    @staticmethod
    def list_topics(namespace: str) -> Operation[list[str]]:
        return (yield AdminCall("list_topics", "GET", _namespace_path(namespace), decode=_decode_names))

    @staticmethod
    def list_partitioned_topics(namespace: str) -> Operation[list[str]]:
        path = _namespace_path(namespace, "partitioned")
        return (yield AdminCall("list_partitioned_topics", "GET", path, decode=_decode_names))

    @staticmethod
    def create_namespace(namespace: str) -> Operation[None]:
        path = _namespace_policy_path(namespace)
        return (yield AdminCall("create_namespace", "PUT", path, decode=_decode_nothing))

    @staticmethod
    def namespace_deduplication(namespace: str) -> Operation[bool | None]:
        path = _namespace_policy_path(namespace, "deduplication")
        return (yield AdminCall("namespace_deduplication", "GET", path, decode=_decode_policy_flag))

    @staticmethod
    def set_namespace_deduplication(namespace: str, enabled: bool) -> Operation[None]:
        path = _namespace_policy_path(namespace, "deduplication")
        body = _check_flag(enabled, "enabled")
        return (yield AdminCall("set_namespace_deduplication", "POST", path, body=body, decode=_decode_nothing))

    @staticmethod
    def topic_deduplication(topic: str, applied: bool) -> Operation[bool | None]:
        path = _topic_path(_topic(topic), "deduplicationEnabled")
        params = {"applied": _flag(_check_flag(applied, "applied"))}
        return (yield AdminCall("topic_deduplication", "GET", path, params, decode=_decode_policy_flag))

    @staticmethod
    def set_topic_deduplication(topic: str, enabled: bool) -> Operation[None]:
        path = _topic_path(_topic(topic), "deduplicationEnabled")
        body = _check_flag(enabled, "enabled")
        return (yield AdminCall("set_topic_deduplication", "POST", path, body=body, decode=_decode_nothing))

    @staticmethod
    def create_topic(topic: str) -> Operation[None]:
        return (yield AdminCall("create_topic", "PUT", _topic_path(_topic(topic)), decode=_decode_nothing))

    @staticmethod
    def delete_topic(topic: str, force: bool) -> Operation[None]:
        path = _topic_path(_topic(topic))
        return (yield AdminCall("delete_topic", "DELETE", path, {"force": _flag(force)}, decode=_decode_nothing))

    @staticmethod
    def create_partitioned_topic(topic: str, partitions: int) -> Operation[None]:
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions <= 0:
            raise ValueError(f"partitions must be a positive int, got {partitions!r}")
        path = _topic_path(_topic(topic), "partitions")
        return (yield AdminCall("create_partitioned_topic", "PUT", path, body=partitions, decode=_decode_nothing))

    @staticmethod
    def partition_count(topic: str | TopicName, operation: str = "partition_count") -> Operation[int]:
        path = _topic_path(_topic(topic), "partitions")
        try:
            return (yield AdminCall(operation, "GET", path, decode=_decode_partitions))
        except AdminNotFoundError:
            return 0  # Pulsar answers 404 for a topic that does not exist (or not yet)

    @staticmethod
    def delete_partitioned_topic(topic: str, force: bool) -> Operation[None]:
        path = _topic_path(_topic(topic), "partitions")
        call = AdminCall("delete_partitioned_topic", "DELETE", path, {"force": _flag(force)}, decode=_decode_nothing)
        return (yield call)

    @staticmethod
    def topic_stats_call(topic: str | TopicName, precise_backlog: bool, operation: str = "topic_stats") -> AdminCall:
        path = _topic_path(_topic(topic), "stats")
        return AdminCall(operation, "GET", path, _stats_params(precise_backlog), decode=_decode_document)

    @staticmethod
    def partitioned_stats_call(
        topic: str | TopicName, per_partition: bool, precise_backlog: bool, operation: str = "partitioned_stats"
    ) -> AdminCall:
        path = _topic_path(_topic(topic), "partitioned-stats")
        params = {"perPartition": _flag(per_partition), **_stats_params(precise_backlog)}
        return AdminCall(operation, "GET", path, params, decode=_decode_document)

    @classmethod
    def topic_stats(cls, topic: str, precise_backlog: bool) -> Operation[dict[str, Any]]:
        return (yield cls.topic_stats_call(topic, precise_backlog))

    @staticmethod
    def internal_stats(topic: str) -> Operation[dict[str, Any]]:
        path = _topic_path(_topic(topic), "internalStats")
        return (yield AdminCall("internal_stats", "GET", path, decode=_decode_document))

    @classmethod
    def partitioned_stats(cls, topic: str, per_partition: bool, precise_backlog: bool) -> Operation[dict[str, Any]]:
        return (yield cls.partitioned_stats_call(topic, per_partition, precise_backlog))

    @staticmethod
    def list_subscriptions(topic: str) -> Operation[list[str]]:
        path = _topic_path(_topic(topic), "subscriptions")
        return (yield AdminCall("list_subscriptions", "GET", path, decode=_decode_names))

    @staticmethod
    def create_subscription(topic: str, subscription: str, start: MessageId | InitialPosition) -> Operation[None]:
        path = _topic_path(_topic(topic), "subscription", subscription)
        body = _position_body(start)
        return (yield AdminCall("create_subscription", "PUT", path, body=body, decode=_decode_nothing))

    @staticmethod
    def delete_subscription(topic: str, subscription: str, force: bool) -> Operation[None]:
        path = _topic_path(_topic(topic), "subscription", subscription)
        call = AdminCall("delete_subscription", "DELETE", path, {"force": _flag(force)}, decode=_decode_nothing)
        return (yield call)

    @staticmethod
    def clear_backlog(topic: str, subscription: str) -> Operation[None]:
        path = _topic_path(_topic(topic), "subscription", subscription, "skip_all")
        return (yield AdminCall("clear_backlog", "POST", path, decode=_decode_nothing))

    @staticmethod
    def peek_message(topic: str, subscription: str, position: int) -> Operation[PeekedMessage]:
        if isinstance(position, bool) or not isinstance(position, int) or position < 1:
            raise ValueError(f"position must be an int >= 1, got {position!r}")
        name = _topic(topic)
        path = _topic_path(name, "subscription", subscription, "position", str(position))
        return (yield AdminCall("peek_message", "GET", path, decode=_peek_decoder(str(name))))

    @staticmethod
    def get_message_by_id(topic: str, ledger_id: int, entry_id: int) -> Operation[PeekedMessage]:
        name = _topic(topic)
        ledger, entry = _non_negative_int(ledger_id, "ledger_id"), _non_negative_int(entry_id, "entry_id")
        path = _topic_path(name, "ledger", str(ledger), "entry", str(entry))
        return (yield AdminCall("get_message_by_id", "GET", path, decode=_peek_decoder(str(name))))

    @staticmethod
    def examine_message(
        topic: str, initial_position: str | InitialPosition, message_position: int
    ) -> Operation[PeekedMessage]:
        if isinstance(initial_position, InitialPosition):
            initial_position = "earliest" if initial_position == InitialPosition.Earliest else "latest"
        if initial_position not in ("latest", "earliest"):
            raise ValueError(f"initial_position must be 'latest' or 'earliest', got {initial_position!r}")
        if isinstance(message_position, bool) or not isinstance(message_position, int) or message_position < 1:
            raise ValueError(f"message_position must be an int >= 1, got {message_position!r}")
        name = _topic(topic)
        params = {"initialPosition": initial_position, "messagePosition": str(message_position)}
        path = _topic_path(name, "examinemessage")
        return (yield AdminCall("examine_message", "GET", path, params, decode=_peek_decoder(str(name))))

    @classmethod
    def _subscription_stats(
        cls, name: TopicName, subscription: str, precise_backlog: bool, operation: str
    ) -> Operation[tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]]:
        """The stats of the topic (summed for a partitioned one), checked to hold ``subscription``,
        and each partition's own stats in partition order (none for a non-partitioned topic)."""
        partitions = yield from cls.partition_count(name, operation=operation)
        if partitions > 0:
            call = cls.partitioned_stats_call(name, True, precise_backlog, operation=operation)
        else:
            call = cls.topic_stats_call(name, precise_backlog, operation=operation)
        stats = yield call
        if _sub_figures(stats, subscription) is None:
            known = ", ".join(sorted(stats.get("subscriptions") or {})) or "none"
            raise AdminNotFoundError(
                f"subscription {subscription!r} not found on topic {name} (its subscriptions: {known})",
                operation=operation,
                method=call.method,
                path=call.path,
            )
        parts = sorted((stats.get("partitions") or {}).items(), key=lambda item: TopicName.parse(item[0]).partition)
        return stats, parts

    @classmethod
    def backlog(cls, topic: str, subscription: str, precise_backlog: bool) -> Operation[SubscriptionBacklog]:
        name = _topic(topic)
        stats, parts = yield from cls._subscription_stats(name, subscription, precise_backlog, "backlog")
        msg_backlog, backlog_size = _sub_figures(stats, subscription) or (0, 0)
        return SubscriptionBacklog(
            topic=str(name),
            subscription=subscription,
            msg_backlog=msg_backlog,
            backlog_size=backlog_size,
            partitions=tuple(
                PartitionBacklog(part_name, *(_sub_figures(part_stats, subscription) or (0, 0)))
                for part_name, part_stats in parts
            ),
        )

    @classmethod
    def message_backlog(cls, topic: str, subscription: str, max_range_lookups: int) -> Operation[MessageBacklog]:
        name = _topic(topic)
        max_range_lookups = _non_negative_int(max_range_lookups, "max_range_lookups")
        stats, parts = yield from cls._subscription_stats(name, subscription, False, "message_backlog")
        counted = []
        for part_name, part_stats in parts or [(str(name), stats)]:
            part = TopicName.parse(part_name)
            counted.append((yield from cls._partition_messages(part, subscription, part_stats, max_range_lookups)))
        return MessageBacklog(
            topic=str(name),
            subscription=subscription,
            messages=sum(part.messages for part in counted),
            entries=sum(part.entries for part in counted),
            backlog_size=sum(part.backlog_size for part in counted),
            exact=all(part.exact for part in counted),
            partitions=tuple(counted) if parts else (),
        )

    @staticmethod
    def _partition_messages(
        part: TopicName, subscription: str, stats: Mapping[str, Any], max_range_lookups: int
    ) -> Operation[PartitionMessageBacklog]:
        """One partition's (or a non-partitioned topic's) backlog in messages: exact from the broker
        entry index where every entry looked up has one, else estimated (see message_count)."""
        entries, size = _sub_figures(stats, subscription) or (0, 0)
        if entries == 0:  # nothing to look up
            return PartitionMessageBacklog(str(part), 0, 0, size, exact=True)
        call = AdminCall("message_backlog", "GET", _topic_path(part, "internalStats"), decode=_decode_document)
        internal = yield call
        try:
            cursor = CursorState.from_internal_stats(internal, subscription)
        except CountError as exc:
            raise AdminError(
                f"unexpected internal stats: {exc}", operation=call.operation, method=call.method, path=call.path
            ) from None
        sampled: dict[Position, EntryIndex] = {}
        # Without a durable cursor, or with too many deleted ranges to look up, only an estimate is had.
        if cursor is not None and len(cursor.deleted) <= max_range_lookups:
            indexes: dict[Position, int] = {}
            for position in cursor.positions_needed():
                target = lookup_position(position)
                if target not in sampled:
                    path = _topic_path(part, "ledger", str(target.ledger_id), "entry", str(target.entry_id))
                    try:
                        # HEAD: the headers say it all, the payload (maybe a large batch) stays on the broker.
                        sampled[target] = yield AdminCall("message_backlog", "HEAD", path, decode=_decode_entry_index)
                    except (AdminNotFoundError, AdminServerError):  # e.g. a ledger trimmed meanwhile
                        break
                value = index_at(position, sampled[target])
                if value is None:
                    break
                indexes[position] = value
            else:
                return PartitionMessageBacklog(str(part), cursor.exact_messages(indexes), entries, size, exact=True)
        entries_added = cursor.entries_added if cursor is not None else int(internal.get("entriesAddedCounter") or 0)
        estimate = estimate_messages(entries, int(stats.get("msgInCounter") or 0), entries_added, sampled.values())
        return PartitionMessageBacklog(str(part), estimate, entries, size, exact=False)


# ---------------------------------------------------------------------------------------------
# The exchange: calls to requests, responses to results or errors (shared by both clients)


class _Exchange(Generic[T]):
    """Runs one operation without I/O: the client sends ``request`` and reports back.

    While ``request`` is not None the client sends it and calls :meth:`received` with the
    response or :meth:`failed` with the transport error; then ``result`` holds the outcome.
    Errors are thrown into the operation, so they carry its frame and an operation may handle them.
    """

    def __init__(self, admin: _AdminBase, operation: Operation[T]):
        if admin._http.is_closed:
            operation.close()
            raise AlreadyClosed(f"{type(admin).__name__} for {admin.web_service_url} is closed")
        self._admin = admin
        self._operation = operation
        self._call: AdminCall | None = None
        self._hops = 0
        self.request: httpx.Request | None = None
        self.result: T
        self._advance(lambda: next(operation))

    def _advance(self, step: Callable[[], AdminCall]) -> None:
        try:
            call = step()
        except StopIteration as stop:
            self._call, self.request = None, None
            self.result = stop.value
            return
        self._call, self._hops = call, 0
        self.request = self._admin._build_request(call)

    def received(self, response: httpx.Response) -> None:
        """Take a response: follow a redirect, or feed the decoded result (or the error) to the operation."""
        call, request = self._call, self.request
        assert call is not None and request is not None
        path = request.url.path
        if response.status_code in _REDIRECTS and "location" in response.headers:
            target = request.url.join(response.headers["location"])
            self._hops += 1
            if self._hops > _MAX_REDIRECTS:
                error = AdminError(f"more than {_MAX_REDIRECTS} redirects", operation=call.operation, method=call.method, path=path)
            elif request.url.scheme == "https" and target.scheme != "https":
                error = AdminError(
                    f"refusing a redirect from https to {_display_url(target)}",
                    operation=call.operation,
                    method=call.method,
                    path=path,
                )
            else:
                self.request = self._admin._build_request(call, target)
                return
            self._advance(lambda: self._operation.throw(error))
            return
        if not response.is_success:
            error = _status_error(call, path, response)
            self._advance(lambda: self._operation.throw(error))
            return
        try:
            value = call.decode(response)
        except _UnexpectedResponse as exc:
            error = AdminError(
                f"unexpected response: {exc}", operation=call.operation, method=call.method, path=path, status=response.status_code
            )
            self._advance(lambda: self._operation.throw(error))
            return
        self._advance(lambda: self._operation.send(value))

    def failed(self, exc: httpx.RequestError) -> None:
        """Take a transport failure (no HTTP answer)."""
        call, request = self._call, self.request
        assert call is not None and request is not None
        cls = AdminTimeoutError if isinstance(exc, httpx.TimeoutException) else AdminConnectionError
        error = cls(
            f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
            operation=call.operation,
            method=call.method,
            path=request.url.path,
            url=_display_url(request.url),
        )
        error.__cause__ = exc
        self._advance(lambda: self._operation.throw(error))


# ---------------------------------------------------------------------------------------------
# The clients: configuration shared, I/O each its own


class _AdminBase:
    """Configuration and request building shared by the sync and async clients."""

    _http: httpx.Client | httpx.AsyncClient

    def __init__(
        self,
        web_service_url: str,
        authentication: Authentication | None = None,
        timeout_seconds: float = 30,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = True,
    ):
        try:
            url = httpx.URL(web_service_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise InvalidConfiguration(f"admin web service URL {web_service_url!r} is invalid: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise InvalidConfiguration(
                f"admin web service URL {_display_url(url)!r} must be http://host:port or https://host:port"
            )
        if timeout_seconds is None or timeout_seconds <= 0:
            raise InvalidConfiguration(f"timeout_seconds must be positive, got {timeout_seconds}")
        self.web_service_url = _display_url(url).rstrip("/")
        self.authentication = authentication or Authentication()
        self.timeout_seconds = timeout_seconds
        self._base_url = url
        self._verify: ssl.SSLContext | bool = True
        if tls_allow_insecure_connection:
            self._verify = False
        elif tls_trust_certs_file_path or not tls_validate_hostname:
            # Without host name checks the certificate chain is still verified, as on the binary port.
            self._verify = ssl.create_default_context(cafile=tls_trust_certs_file_path)
            self._verify.check_hostname = tls_validate_hostname
        # Redirects are followed by _Exchange, which keeps the auth headers (httpx drops them across hosts).
        self._http = self._open(
            base_url=self._base_url, timeout=httpx.Timeout(timeout_seconds), verify=self._verify, follow_redirects=False
        )

    def _open(self, **options: Any) -> httpx.Client | httpx.AsyncClient:
        raise NotImplementedError

    def _build_request(self, call: AdminCall, url: httpx.URL | None = None) -> httpx.Request:
        headers = {"Accept": "application/json", **self.authentication.http_headers()}
        extra: dict[str, Any] = {} if call.body is _NO_BODY else {"json": call.body}
        if url is not None:  # a redirect target already carries the query
            return self._http.build_request(call.method, url, headers=headers, **extra)
        return self._http.build_request(call.method, call.path, params=dict(call.params), headers=headers, **extra)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.web_service_url!r})"


class PulsarAdmin(_AdminBase):
    """Blocking admin REST client (``with PulsarAdmin(url) as admin: ...``).

    Topics are given in short (``"my-topic"``) or full (``"persistent://t/ns/my-topic"``) form;
    namespaces as ``"tenant/namespace"``. Failures raise :class:`AdminError` subclasses.
    """

    _http: httpx.Client

    def _open(self, **options: Any) -> httpx.Client:
        return httpx.Client(**options)

    def _run(self, operation: Operation[T]) -> T:
        exchange = _Exchange(self, operation)
        while exchange.request is not None:
            try:
                response = self._http.send(exchange.request)
            except httpx.RequestError as exc:
                exchange.failed(exc)
            else:
                exchange.received(response)
        return exchange.result

    def close(self) -> None:
        """Close the HTTP connections; later calls raise AlreadyClosed."""
        self._http.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # ---- namespaces ----

    def list_topics(self, namespace: str = "public/default") -> list[str]:
        """Every persistent topic of ``tenant/namespace``, partitions listed individually."""
        return self._run(_Requests.list_topics(namespace))

    def list_partitioned_topics(self, namespace: str = "public/default") -> list[str]:
        """The partitioned topics of ``tenant/namespace`` (their base names)."""
        return self._run(_Requests.list_partitioned_topics(namespace))

    def create_namespace(self, namespace: str) -> None:
        """Create ``tenant/namespace``; 409 (AdminConflictError) if it exists, 404 for an unknown tenant."""
        self._run(_Requests.create_namespace(namespace))

    def namespace_deduplication(self, namespace: str) -> bool | None:
        """The namespace's deduplication policy; None when unset (the broker's default applies)."""
        return self._run(_Requests.namespace_deduplication(namespace))

    def set_namespace_deduplication(self, namespace: str, enabled: bool) -> None:
        """Turn deduplication on or off for every topic of the namespace without a topic policy of its own."""
        self._run(_Requests.set_namespace_deduplication(namespace, enabled))

    # ---- topics ----

    def create_topic(self, topic: str) -> None:
        """Create a non-partitioned topic; 409 (AdminConflictError) if it exists."""
        self._run(_Requests.create_topic(topic))

    def delete_topic(self, topic: str, force: bool = False) -> None:
        """Delete a non-partitioned topic and its data; ``force`` also when it has clients."""
        self._run(_Requests.delete_topic(topic, force))

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Create a partitioned topic with ``partitions`` partitions."""
        self._run(_Requests.create_partitioned_topic(topic, partitions))

    def partition_count(self, topic: str) -> int:
        """The number of partitions; 0 for a non-partitioned (or missing) topic."""
        return self._run(_Requests.partition_count(topic))

    def topic_deduplication(self, topic: str, applied: bool = False) -> bool | None:
        """The topic's own deduplication policy (None when unset), or with ``applied`` the one in
        force: the topic's, else its namespace's, else the broker's default. A missing topic gives 404."""
        return self._run(_Requests.topic_deduplication(topic, applied))

    def set_topic_deduplication(self, topic: str, enabled: bool) -> None:
        """Set the topic's own deduplication policy (a partitioned topic's covers its partitions)."""
        self._run(_Requests.set_topic_deduplication(topic, enabled))

    def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        """Delete a partitioned topic with all its partitions."""
        self._run(_Requests.delete_partitioned_topic(topic, force))

    # ---- stats ----

    def topic_stats(self, topic: str, precise_backlog: bool = False) -> dict[str, Any]:
        """Pulsar's stats document of a non-partitioned topic or one partition."""
        return self._run(_Requests.topic_stats(topic, precise_backlog))

    def internal_stats(self, topic: str) -> dict[str, Any]:
        """Pulsar's internal stats of a non-partitioned topic or one partition: its ledgers
        (``ledgerId``, ``entries``; the open ledger's count is ``currentLedgerEntries``),
        ``lastConfirmedEntry`` and each cursor's ``markDeletePosition`` as ``"ledger:entry"``."""
        return self._run(_Requests.internal_stats(topic))

    def partitioned_stats(self, topic: str, per_partition: bool = True, precise_backlog: bool = False) -> dict[str, Any]:
        """Stats summed across partitions, with each partition's own under ``partitions``."""
        return self._run(_Requests.partitioned_stats(topic, per_partition, precise_backlog))

    def backlog(self, topic: str, subscription: str, precise_backlog: bool = False) -> SubscriptionBacklog:
        """The subscription's backlog as Pulsar's stats give it (``msgBacklog``, which counts entries:
        a batch is one; and bytes), totalled and per partition. :meth:`message_backlog` counts messages.

        Works for partitioned and non-partitioned topics; a missing subscription raises
        AdminNotFoundError naming the subscriptions the topic has.
        """
        return self._run(_Requests.backlog(topic, subscription, precise_backlog))

    def message_backlog(
        self, topic: str, subscription: str, max_range_lookups: int = DEFAULT_MAX_RANGE_LOOKUPS
    ) -> MessageBacklog:
        """The subscription's backlog in messages (each message of a batch counted) and in entries
        (Pulsar's ``msgBacklog``), totalled and per partition.

        Exact where the broker appends the broker entry index (Pulsar with
        ``AppendIndexMetadataInterceptor``; the embedded broker by default), else estimated; each
        figure says which (``exact``). A batch acknowledged in part counts whole. Partitions with a
        backlog cost one internal-stats call and a few header-only lookups each; more than
        ``max_range_lookups`` individually acknowledged ranges on a partition make its count an
        estimate. A missing subscription raises AdminNotFoundError.
        """
        return self._run(_Requests.message_backlog(topic, subscription, max_range_lookups))

    # ---- subscriptions ----

    def list_subscriptions(self, topic: str) -> list[str]:
        """The subscription names of a topic (across partitions for a partitioned one)."""
        return self._run(_Requests.list_subscriptions(topic))

    def create_subscription(
        self, topic: str, subscription: str, start: MessageId | InitialPosition = InitialPosition.Latest
    ) -> None:
        """Create a durable subscription starting at ``start``: Earliest, Latest or a message id."""
        self._run(_Requests.create_subscription(topic, subscription, start))

    def delete_subscription(self, topic: str, subscription: str, force: bool = False) -> None:
        """Delete a subscription; without ``force`` one with connected consumers gives 412."""
        self._run(_Requests.delete_subscription(topic, subscription, force))

    def clear_backlog(self, topic: str, subscription: str) -> None:
        """Skip every message of the subscription's backlog (Pulsar's skip_all)."""
        self._run(_Requests.clear_backlog(topic, subscription))

    def peek_message(self, topic: str, subscription: str, position: int = 1) -> PeekedMessage:
        """The ``position``-th (from 1) unacknowledged message of the subscription, left unconsumed.

        A non-partitioned topic or one partition; AdminNotFoundError when there is none there.
        """
        return self._run(_Requests.peek_message(topic, subscription, position))

    def get_message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> PeekedMessage:
        """The entry at ``ledger_id:entry_id`` of a non-partitioned topic or one partition."""
        return self._run(_Requests.get_message_by_id(topic, ledger_id, entry_id))

    def examine_message(
        self, topic: str, initial_position: str | InitialPosition = "latest", message_position: int = 1
    ) -> PeekedMessage:
        """The ``message_position``-th entry (from 1) counted from the newest (``"latest"``) or the
        oldest (``"earliest"``) of a non-partitioned topic or one partition, whatever is acknowledged."""
        return self._run(_Requests.examine_message(topic, initial_position, message_position))


class AsyncPulsarAdmin(_AdminBase):
    """asyncio admin REST client, for triggers: the same methods as :class:`PulsarAdmin`, awaited.

    ``async with AsyncPulsarAdmin(url) as admin: await admin.backlog(topic, sub)``.
    """

    _http: httpx.AsyncClient

    def _open(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def _run(self, operation: Operation[T]) -> T:
        exchange = _Exchange(self, operation)
        while exchange.request is not None:
            try:
                response = await self._http.send(exchange.request)
            except httpx.RequestError as exc:
                exchange.failed(exc)
            else:
                exchange.received(response)
        return exchange.result

    async def aclose(self) -> None:
        """Close the HTTP connections; later calls raise AlreadyClosed."""
        await self._http.aclose()

    close = aclose

    async def __aenter__(self) -> AsyncPulsarAdmin:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ---- namespaces ----

    async def list_topics(self, namespace: str = "public/default") -> list[str]:
        """Every persistent topic of ``tenant/namespace``, partitions listed individually."""
        return await self._run(_Requests.list_topics(namespace))

    async def list_partitioned_topics(self, namespace: str = "public/default") -> list[str]:
        """The partitioned topics of ``tenant/namespace`` (their base names)."""
        return await self._run(_Requests.list_partitioned_topics(namespace))

    async def create_namespace(self, namespace: str) -> None:
        """Create ``tenant/namespace``; 409 (AdminConflictError) if it exists, 404 for an unknown tenant."""
        await self._run(_Requests.create_namespace(namespace))

    async def namespace_deduplication(self, namespace: str) -> bool | None:
        """The namespace's deduplication policy; None when unset (the broker's default applies)."""
        return await self._run(_Requests.namespace_deduplication(namespace))

    async def set_namespace_deduplication(self, namespace: str, enabled: bool) -> None:
        """Turn deduplication on or off for every topic of the namespace without a topic policy of its own."""
        await self._run(_Requests.set_namespace_deduplication(namespace, enabled))

    # ---- topics ----

    async def create_topic(self, topic: str) -> None:
        """Create a non-partitioned topic; 409 (AdminConflictError) if it exists."""
        await self._run(_Requests.create_topic(topic))

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        """Delete a non-partitioned topic and its data; ``force`` also when it has clients."""
        await self._run(_Requests.delete_topic(topic, force))

    async def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Create a partitioned topic with ``partitions`` partitions."""
        await self._run(_Requests.create_partitioned_topic(topic, partitions))

    async def partition_count(self, topic: str) -> int:
        """The number of partitions; 0 for a non-partitioned (or missing) topic."""
        return await self._run(_Requests.partition_count(topic))

    async def topic_deduplication(self, topic: str, applied: bool = False) -> bool | None:
        """The topic's own deduplication policy (None when unset), or with ``applied`` the one in
        force: the topic's, else its namespace's, else the broker's default. A missing topic gives 404."""
        return await self._run(_Requests.topic_deduplication(topic, applied))

    async def set_topic_deduplication(self, topic: str, enabled: bool) -> None:
        """Set the topic's own deduplication policy (a partitioned topic's covers its partitions)."""
        await self._run(_Requests.set_topic_deduplication(topic, enabled))

    async def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        """Delete a partitioned topic with all its partitions."""
        await self._run(_Requests.delete_partitioned_topic(topic, force))

    # ---- stats ----

    async def topic_stats(self, topic: str, precise_backlog: bool = False) -> dict[str, Any]:
        """Pulsar's stats document of a non-partitioned topic or one partition."""
        return await self._run(_Requests.topic_stats(topic, precise_backlog))

    async def internal_stats(self, topic: str) -> dict[str, Any]:
        """Pulsar's internal stats of a non-partitioned topic or one partition (ledgers, cursors)."""
        return await self._run(_Requests.internal_stats(topic))

    async def partitioned_stats(
        self, topic: str, per_partition: bool = True, precise_backlog: bool = False
    ) -> dict[str, Any]:
        """Stats summed across partitions, with each partition's own under ``partitions``."""
        return await self._run(_Requests.partitioned_stats(topic, per_partition, precise_backlog))

    async def backlog(self, topic: str, subscription: str, precise_backlog: bool = False) -> SubscriptionBacklog:
        """The subscription's backlog as Pulsar's stats give it (entries and bytes), totalled and per partition."""
        return await self._run(_Requests.backlog(topic, subscription, precise_backlog))

    async def message_backlog(
        self, topic: str, subscription: str, max_range_lookups: int = DEFAULT_MAX_RANGE_LOOKUPS
    ) -> MessageBacklog:
        """The subscription's backlog in messages and entries, exact or estimated (see PulsarAdmin)."""
        return await self._run(_Requests.message_backlog(topic, subscription, max_range_lookups))

    # ---- subscriptions ----

    async def list_subscriptions(self, topic: str) -> list[str]:
        """The subscription names of a topic (across partitions for a partitioned one)."""
        return await self._run(_Requests.list_subscriptions(topic))

    async def create_subscription(
        self, topic: str, subscription: str, start: MessageId | InitialPosition = InitialPosition.Latest
    ) -> None:
        """Create a durable subscription starting at ``start``: Earliest, Latest or a message id."""
        await self._run(_Requests.create_subscription(topic, subscription, start))

    async def delete_subscription(self, topic: str, subscription: str, force: bool = False) -> None:
        """Delete a subscription; without ``force`` one with connected consumers gives 412."""
        await self._run(_Requests.delete_subscription(topic, subscription, force))

    async def clear_backlog(self, topic: str, subscription: str) -> None:
        """Skip every message of the subscription's backlog (Pulsar's skip_all)."""
        await self._run(_Requests.clear_backlog(topic, subscription))

    async def peek_message(self, topic: str, subscription: str, position: int = 1) -> PeekedMessage:
        """The ``position``-th (from 1) unacknowledged message of the subscription, left unconsumed."""
        return await self._run(_Requests.peek_message(topic, subscription, position))

    async def get_message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> PeekedMessage:
        """The entry at ``ledger_id:entry_id`` of a non-partitioned topic or one partition."""
        return await self._run(_Requests.get_message_by_id(topic, ledger_id, entry_id))

    async def examine_message(
        self, topic: str, initial_position: str | InitialPosition = "latest", message_position: int = 1
    ) -> PeekedMessage:
        """The ``message_position``-th entry counted from the newest or the oldest (see PulsarAdmin)."""
        return await self._run(_Requests.examine_message(topic, initial_position, message_position))
