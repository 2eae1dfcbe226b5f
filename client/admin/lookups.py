"""What a client asks the admin REST port when its service URL is ``http://`` or ``https://``: the
broker that serves a topic, a topic's partitioned metadata (creating it as a producer would), and
the topics of a namespace. They are the requests the official client's HTTP lookup makes.
"""

from __future__ import annotations

from typing import Any

from .calls import AdminCall, Operation, decode_document, decode_names, decode_partitions
from .paths import lookup_path, namespace_policy_path, topic_name, topic_path

# CommandGetTopicsOfNamespace.Mode names, as ``?mode=`` takes them.
TOPIC_MODES = ("PERSISTENT", "NON_PERSISTENT", "ALL")


def lookup_topic(topic: str) -> Operation[dict[str, Any]]:
    """The broker serving ``topic``, as Pulsar's LookupData: ``brokerUrl``, ``brokerUrlTls``,
    ``httpUrl``, ``httpUrlTls`` and ``nativeUrl`` (a field the broker has no URL for is absent or empty)."""
    return (yield AdminCall("lookup_topic", "GET", lookup_path(topic_name(topic)), decode=decode_document))


def partitioned_topic_metadata(topic: str) -> Operation[int]:
    """The partition count of ``topic`` (0: not partitioned), as a client asks for it before it
    opens a producer or consumer: a topic that does not exist yet but that the broker would create
    counts as it would be created; AdminNotFoundError when the broker would not create it."""
    call = AdminCall(
        "partitioned_topic_metadata",
        "GET",
        topic_path(topic_name(topic), "partitions"),
        params={"checkAllowAutoCreation": "true"},
        decode=decode_partitions,
    )
    return (yield call)


def topics_of_namespace(namespace: str, mode: str = "PERSISTENT") -> Operation[list[str]]:
    """The topics of ``namespace`` (``tenant/namespace``) of the kind ``mode`` names
    (``PERSISTENT``, ``NON_PERSISTENT`` or ``ALL``), partitions listed one by one."""
    if mode not in TOPIC_MODES:
        raise ValueError(f"mode must be one of {', '.join(TOPIC_MODES)}; got {mode!r}")
    path = namespace_policy_path(namespace, "topics")
    return (yield AdminCall("topics_of_namespace", "GET", path, params={"mode": mode}, decode=decode_names))
