"""The ``pulsar`` asset URI scheme: ``pulsar://host:port/persistent/tenant/namespace/topic``.

A URI names a topic of the cluster reached at ``host:port`` (the broker service URL's first host,
as with Kafka's ``kafka://server/topic``). Airflow calls :func:`sanitize_uri` on every such URI
(registered in the provider info), so ``Asset("pulsar://broker/orders")`` and
``Asset("pulsar://broker:6650/persistent/public/default/orders")`` are the same asset: the port
defaults to 6650 and a short topic name is expanded as Pulsar expands it. In OpenLineage
(:func:`convert_asset_to_openlineage`) the asset is the dataset of namespace
``pulsar://host:port`` and name the full topic, as the operators report their topics.

Nothing here imports the OpenLineage provider unless a conversion is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, unquote, urlsplit

from airflow.sdk import Asset

from airflow_pulsar.client import ServiceUrl
from airflow_pulsar.client.topic_name import TopicName

if TYPE_CHECKING:
    from airflow.providers.common.compat.openlineage.facet import Dataset

SCHEME = "pulsar"
DEFAULT_PORT = 6650
_DOMAINS = ("persistent", "non-persistent")


def _authority(host: str, port: int) -> str:
    """``host:port`` with the host in lower case (host names are case-insensitive)."""
    return f"{host.lower()}:{port}"


def cluster_namespace(service_url: str) -> str:
    """``pulsar://host:port`` of a service URL's first host: the cluster an asset or dataset names.

    The scheme is always ``pulsar`` (also for ``pulsar+ssl://`` URLs, whose port tells them
    apart), as OpenLineage names Kafka clusters ``kafka://host:port``.
    """
    url = ServiceUrl(service_url)
    if url.http:  # an admin port's URL does not name the binary port the cluster is known by
        raise ValueError(f"service URL {service_url!r} must start with pulsar:// or pulsar+ssl:// to name a cluster")
    host, port = url.hosts[0]
    return f"{SCHEME}://{_authority(host, port)}"


def full_topic_name(topic: str) -> str:
    """The full name of a topic (``orders`` gives ``persistent://public/default/orders``)."""
    return str(TopicName.parse(topic))


def _uri_topic(uri: SplitResult) -> TopicName:
    """The topic a URI's path names: ``/domain/tenant/namespace/topic``, ``/tenant/namespace/topic`` or ``/topic``."""
    path = unquote(uri.path).strip("/")
    if not path:
        raise ValueError(f"pulsar asset URI {uri.geturl()!r} names no topic: give /persistent/<tenant>/<namespace>/<topic>")
    parts = path.split("/")
    name = f"{parts[0]}://{'/'.join(parts[1:])}" if parts[0] in _DOMAINS and len(parts) > 1 else path
    try:
        return TopicName.parse(name)
    except ValueError as exc:
        raise ValueError(f"pulsar asset URI {uri.geturl()!r} does not name a topic: {exc}") from None


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Check and normalise a ``pulsar://`` asset URI (Airflow's asset URI handler for the scheme).

    The result has one host in lower case, its port (6650 unless given), the full topic name as
    its path and no query or fragment. Raises ``ValueError`` naming what is wrong.
    """
    text = uri.geturl()
    if not uri.netloc or "," in uri.netloc:
        raise ValueError(f"pulsar asset URI {text!r} must name one broker host, as pulsar://host:port/<topic>")
    try:
        host, port = uri.hostname, uri.port
    except ValueError as exc:  # a port that is not a number, or out of range
        raise ValueError(f"pulsar asset URI {text!r} has a bad port: {exc}") from None
    if not host:
        raise ValueError(f"pulsar asset URI {text!r} must name one broker host, as pulsar://host:port/<topic>")
    if uri.query:
        raise ValueError(f"pulsar asset URI {text!r} takes no query: the topic is the whole identity")
    topic = _uri_topic(uri)
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    return uri._replace(
        netloc=_authority(host, port or DEFAULT_PORT),
        path=f"/{topic.domain}/{topic.tenant}/{topic.namespace}/{topic.local_name}",
        fragment="",
    )


def create_asset(*, topic: str, service_url: str, extra: dict[str, Any] | None = None, **kwargs: Any) -> Asset:
    """The asset of ``topic`` on the cluster at ``service_url`` (``pulsar://host:port``, its first host).

    Further keyword arguments (``name``, ``group``, ``watchers``, ...) go to ``Asset``; the name
    defaults to the URI.
    """
    namespace = cluster_namespace(service_url)
    parsed = TopicName.parse(topic)
    uri = f"{namespace}/{parsed.domain}/{parsed.tenant}/{parsed.namespace}/{parsed.local_name}"
    return Asset(uri=uri, extra=extra, **kwargs)


def asset_topic(asset: Asset) -> tuple[str, str]:
    """(cluster namespace ``pulsar://host:port``, full topic name) of a ``pulsar://`` asset."""
    uri = sanitize_uri(urlsplit(asset.uri))
    if uri.scheme != SCHEME:
        raise ValueError(f"asset {asset.uri!r} is not a pulsar:// asset")
    return f"{SCHEME}://{uri.netloc}", str(_uri_topic(uri))


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Dataset:
    """The OpenLineage dataset of a ``pulsar://`` asset: namespace ``pulsar://host:port``, name the full topic."""
    from airflow.providers.common.compat.openlineage.facet import Dataset

    namespace, topic = asset_topic(asset)
    return Dataset(namespace=namespace, name=topic)
