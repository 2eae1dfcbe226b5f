"""The broker's authentication: its providers by method name, CONNECT credentials, admin HTTP headers.

As a Pulsar broker with ``authenticationEnabled`` and a list of ``authenticationProviders``: a
CONNECT is checked by the provider of the auth method it names (``token``, ``basic``, ``tls``);
an admin request by its ``Authorization`` header (``Bearer`` for tokens, ``Basic`` for users) or,
on the HTTPS port, by its client certificate. A refusal names its cause, never the credentials.
Every admin path needs authentication, as every ``/admin`` path does on a Pulsar broker with
authentication on. A connection outliving its credentials (an expiring token) is challenged for
fresh ones, as Pulsar's authentication refresh does.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

log = logging.getLogger(__name__)

# What a Pulsar broker puts in the AUTH_CHALLENGE asking a client to refresh its credentials.
REFRESH_CHALLENGE = b"PulsarAuthRefresh"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Where an authenticated admin request keeps its role name.
ROLE = "airflow_pulsar.role"
# What ssl.SSLSocket.getpeercert() gives for a verified certificate.
PeerCertificate = dict[str, Any]


class AuthenticationFailed(Exception):
    """Credentials refused; the message says why."""


@dataclass(frozen=True)
class Role:
    """Who the credentials stand for, and when they stop doing so (None: never)."""

    name: str
    expires_at: float | None = None


@dataclass(frozen=True)
class Credentials:
    """What a client presents (Pulsar's AuthenticationDataSource): the auth data of CONNECT, or of
    an HTTP ``Authorization`` header after its scheme, and the verified TLS client certificate."""

    data: bytes = b""
    peer_certificate: PeerCertificate | None = None


class AuthenticationProvider(Protocol):
    """One authentication method: its CONNECT method name, and the HTTP scheme carrying it (if any)."""

    @property
    def method_name(self) -> str:
        """The auth method name of CONNECT (``token``, ``basic``, ``tls``)."""
        ...

    @property
    def http_scheme(self) -> str | None:
        """The ``Authorization`` header scheme carrying these credentials (``Bearer``, ``Basic``), if any."""
        ...

    def authenticate(self, credentials: Credentials) -> Role:
        """The role of these credentials; AuthenticationFailed saying why not."""
        ...


# How each HTTP scheme's value becomes the data the provider reads, as Pulsar's providers decode it.
def _basic_header_data(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise AuthenticationFailed("the Basic credentials are not base64") from None


_HTTP_DECODERS: dict[str, Callable[[str], bytes]] = {"bearer": str.encode, "basic": _basic_header_data}
_HTTP_FORMS = {"bearer": "'Bearer <token>'", "basic": "'Basic <base64 of user:password>'"}


class AuthenticationService:
    """The providers a broker has, by method name (Pulsar's ``authenticationProviders``)."""

    def __init__(self, providers: Sequence[AuthenticationProvider]):
        if not providers:
            raise ValueError("authentication needs at least one provider")
        self.providers = {provider.method_name: provider for provider in providers}
        self._by_scheme = {p.http_scheme.lower(): p for p in providers if p.http_scheme is not None}
        self._tls = self.providers.get("tls")

    def authenticate(self, method: str, credentials: Credentials) -> Role:
        """Check the credentials of a CONNECT (or AUTH_RESPONSE) with the provider of ``method``."""
        provider = self.providers.get(method)
        if provider is None:
            names = [repr(name) for name in self.providers]
            accepted = f"method {names[0]}" if len(names) == 1 else f"one of the methods {', '.join(names)}"
            raise AuthenticationFailed(
                f"this broker requires authentication {accepted}, the client sent {method or 'none'!r}"
            )
        return provider.authenticate(credentials)

    def authenticate_http(self, header: str | None, peer_certificate: PeerCertificate | None = None) -> Role:
        """Check an admin request: its ``Authorization`` header, else its TLS client certificate."""
        if not header:
            if self._tls is not None and peer_certificate is not None:
                return self._tls.authenticate(Credentials(peer_certificate=peer_certificate))
            raise AuthenticationFailed(f"no Authorization header: send {self._accepted_forms()}")
        scheme, _, value = header.strip().partition(" ")
        provider = self._by_scheme.get(scheme.lower())
        if provider is None or not value.strip():
            raise AuthenticationFailed(f"the Authorization header must be {self._accepted_forms(header_only=True)}")
        data = _HTTP_DECODERS[scheme.lower()](value.strip())
        return provider.authenticate(Credentials(data, peer_certificate))

    def _accepted_forms(self, header_only: bool = False) -> str:
        forms = [_HTTP_FORMS[scheme] for scheme in self._by_scheme]
        if header_only:
            return " or ".join(forms)
        headers = " or ".join(f"'Authorization: {form[1:-1]}'" for form in forms)
        certificate = "a TLS client certificate signed by a CA the broker trusts" if self._tls is not None else ""
        return " or ".join(part for part in (headers, certificate) if part)

    def http_middleware(self) -> Middleware:
        """An aiohttp middleware answering 401 with Pulsar's ``{"reason": ...}`` to unauthenticated requests;
        an authenticated one carries its role name under ``request[ROLE]``."""
        challenges = ", ".join(f'{p.http_scheme} realm="pulsar"' for p in self._by_scheme.values())

        @web.middleware
        async def require_authentication(request: web.Request, handler: Handler) -> web.StreamResponse:
            peer = request.transport.get_extra_info("peercert") if request.transport is not None else None
            try:
                request[ROLE] = self.authenticate_http(request.headers.get("Authorization"), peer or None).name
            except AuthenticationFailed as exc:
                log.info("refusing %s %s from %s: %s", request.method, request.path, request.remote, exc)
                headers = {"WWW-Authenticate": challenges} if challenges else {}
                return web.json_response({"reason": f"authentication required: {exc}"}, status=401, headers=headers)
            return await handler(request)

        return require_authentication


class AuthenticationSession:
    """One connection's authentication: the method and credentials of its CONNECT, then of each
    AUTH_RESPONSE, checked against the same method.

    When the current credentials expire the client is challenged (``challenge``) for fresh ones,
    if it announced it can refresh; a client that cannot, or sends no valid ones within ``grace``
    seconds, is refused (``refuse`` with the reason), as a Pulsar broker does.
    """

    def __init__(
        self,
        service: AuthenticationService,
        *,
        peer_certificate: PeerCertificate | None,
        can_refresh: bool,
        challenge: Callable[[str], None],
        refuse: Callable[[str], None],
        grace: float,
    ):
        self._service = service
        self._peer_certificate = peer_certificate
        self._can_refresh = can_refresh
        self._challenge = challenge
        self._refuse = refuse
        self._grace = grace
        self.method: str | None = None
        self._challenged = False
        self._timer: asyncio.TimerHandle | None = None

    def authenticate(self, method: str, data: bytes) -> Role:
        """Check credentials and watch their expiry; raises AuthenticationFailed."""
        if self.method is not None and method != self.method:
            raise AuthenticationFailed(
                f"the client answered with authentication method {method!r} on a connection authenticated "
                f"with {self.method!r}"
            )
        role = self._service.authenticate(method, Credentials(data, self._peer_certificate))
        self.method = method
        self._challenged = False
        self._watch(None if role.expires_at is None else role.expires_at - time.time())
        return role

    def cancel(self) -> None:
        """Stop watching (the connection is gone)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _watch(self, delay: float | None) -> None:
        self.cancel()
        if delay is not None:
            self._timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._expired)

    def _expired(self) -> None:
        self._timer = None
        assert self.method is not None
        if self._challenged:
            self._refuse(f"the token expired and no valid token answered the challenge within {self._grace:g} s")
        elif not self._can_refresh:
            self._refuse("the token expired and the client cannot refresh it")
        else:
            self._challenged = True
            self._challenge(self.method)
            self._watch(self._grace)
