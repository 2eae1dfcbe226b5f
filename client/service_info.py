"""Where the client connects: the service URL, and the cluster endpoints a provider switches between.

``ServiceUrl`` parses ``pulsar://host:port[,host2:port2]`` (or ``pulsar+ssl://``), or the
``http://`` / ``https://`` URL of a broker's admin port, over which the client looks topics up. A
:class:`ServiceInfo` is one cluster endpoint with its own authentication and trust store; a
:class:`ServiceInfoProvider` hands the client the first one and pushes later changes, which is how
:class:`~.failover.AutoClusterFailover` moves a client to another cluster (``pulsar.ServiceInfo``,
``pulsar.ServiceInfoProvider``).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from .arguments import check_type, check_type_or_none
from .auth import Authentication

__all__ = ["ServiceInfo", "ServiceInfoProvider", "ServiceUrl"]


# Scheme -> (TLS, looked up over HTTP, default port).
_SCHEMES = {
    "pulsar": (False, False, 6650),
    "pulsar+ssl": (True, False, 6651),
    "http": (False, True, 8080),
    "https": (True, True, 8443),
}


class ServiceUrl:
    """``pulsar://host:port[,host2:port2]``, ``pulsar+ssl://...``, ``http://...`` or ``https://...``;
    a malformed one raises ``ValueError``. With ``http``/``https`` (``http`` True) the client looks
    topics up over the admin REST port; ``tls`` is True for ``pulsar+ssl`` and ``https``."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        if parts.scheme not in _SCHEMES:
            raise ValueError(f"service URL {url!r} must start with pulsar://, pulsar+ssl://, http:// or https://")
        self.url = url
        self.tls, self.http, default_port = _SCHEMES[parts.scheme]
        self.hosts: list[tuple[str, int]] = []
        for hostport in parts.netloc.split(","):
            host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
            if not host:
                raise ValueError(f"service URL {url!r} has no host")
            try:
                self.hosts.append((host, int(port) if port else default_port))
            except ValueError:
                raise ValueError(f"service URL {url!r} has a bad port {port!r}") from None


class ServiceInfo:
    """One cluster endpoint: its service URL, and the authentication and trust store it needs."""

    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None = None,
        tls_trust_certs_file_path: str | None = None,
    ):
        check_type(str, service_url, "service_url")
        check_type_or_none(Authentication, authentication, "authentication")
        check_type_or_none(str, tls_trust_certs_file_path, "tls_trust_certs_file_path")
        self._url = ServiceUrl(service_url)
        self._authentication = authentication
        self._trust_certs = tls_trust_certs_file_path

    @property
    def service_url(self) -> str:
        """The service URL."""
        return self._url.url

    @property
    def use_tls(self) -> bool:
        """Whether the URL is ``pulsar+ssl://`` or ``https://``."""
        return self._url.tls

    @property
    def tls_trust_certs_file_path(self) -> str | None:
        """The CA bundle that verifies this cluster's brokers (None: the system's)."""
        return self._trust_certs

    @property
    def authentication(self) -> Authentication | None:
        """The credentials presented to this cluster."""
        return self._authentication

    @property
    def hosts(self) -> list[tuple[str, int]]:
        """(host, port) of each broker the URL names."""
        return self._url.hosts

    @classmethod
    def wrap(cls, service_info: ServiceInfo) -> ServiceInfo:
        """A ServiceInfo with the fields of ``service_info`` (the official method wraps the core's object)."""
        return cls(service_info.service_url, service_info.authentication, service_info.tls_trust_certs_file_path)

    def __repr__(self) -> str:
        return (
            f"ServiceInfo(service_url={self.service_url!r}, use_tls={self.use_tls!r}, "
            f"tls_trust_certs_file_path={self.tls_trust_certs_file_path!r})"
        )


class ServiceInfoProvider:
    """Base of service discovery and failover: the first :class:`ServiceInfo`, then updates.

    A subclass returns the initial endpoint from :meth:`initial_service_info` and keeps the callback
    :meth:`initialize` receives, calling it with a new ServiceInfo to move the client there; the
    client closes its connections and its producers and consumers reconnect to the new cluster.
    """

    def initial_service_info(self) -> ServiceInfo:
        """The endpoint the client connects to first."""
        raise NotImplementedError

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        """Start providing: call ``on_service_info_update`` whenever the endpoint changes. Called again
        in a process forked from this one, whose copy of the provider has none of its threads."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop background work; called when the client closes."""
        return None
