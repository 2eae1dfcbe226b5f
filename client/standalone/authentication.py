"""The broker's token authentication: CONNECT credentials and ``Authorization: Bearer`` headers.

As a Pulsar broker with ``AuthenticationProviderToken``: a client authenticates with the method
name ``token`` and a token signed with the broker's secret key. A refusal names its cause (no
token, wrong method, bad signature, expired), never the token. Every admin path needs a token, as
every ``/admin`` path does on a Pulsar broker with authentication on. A connection outliving its
token is challenged for a fresh one, as Pulsar's authentication refresh does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from .tokens import TokenClaims, TokenError, read_secret_key, verify_token

log = logging.getLogger(__name__)

METHOD_NAME = "token"
# What a Pulsar broker puts in the AUTH_CHALLENGE asking a client to refresh its credentials.
REFRESH_CHALLENGE = b"PulsarAuthRefresh"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AuthenticationFailed(Exception):
    """Credentials refused; the message says why."""


class TokenAuthenticator:
    """Checks tokens against one secret key."""

    def __init__(self, secret: bytes):
        self._secret = secret

    @classmethod
    def from_secret_file(cls, source: str | Path) -> TokenAuthenticator:
        """Load the key as Pulsar's ``tokenSecretKey``: a file of raw bytes, ``file:`` or ``data:`` URL."""
        return cls(read_secret_key(source))

    def authenticate(self, method: str, data: bytes) -> TokenClaims:
        """Check the credentials of a CONNECT (or AUTH_RESPONSE)."""
        if method != METHOD_NAME:
            raise AuthenticationFailed(
                f"this broker requires authentication method {METHOD_NAME!r}, the client sent {method or 'none'!r}"
            )
        if not data:
            raise AuthenticationFailed("the client sent no token")
        try:
            return self._verify(data.decode("ascii"))
        except UnicodeDecodeError:
            raise AuthenticationFailed("invalid token: not ASCII text") from None

    def authenticate_header(self, header: str | None) -> TokenClaims:
        """Check an HTTP ``Authorization`` header value."""
        if not header:
            raise AuthenticationFailed("no Authorization header: send 'Authorization: Bearer <token>'")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed("the Authorization header must be 'Bearer <token>'")
        return self._verify(token.strip())

    def _verify(self, token: str) -> TokenClaims:
        try:
            return verify_token(token, self._secret)
        except TokenError as exc:
            raise AuthenticationFailed(f"invalid token: {exc}") from None

    def http_middleware(self) -> Middleware:
        """An aiohttp middleware answering 401 with Pulsar's ``{"reason": ...}`` to unauthenticated requests."""

        @web.middleware
        async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
            try:
                self.authenticate_header(request.headers.get("Authorization"))
            except AuthenticationFailed as exc:
                log.info("refusing %s %s from %s: %s", request.method, request.path, request.remote, exc)
                return web.json_response(
                    {"reason": f"authentication required: {exc}"},
                    status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="pulsar"'},
                )
            return await handler(request)

        return require_token


class TokenSession:
    """One connection's authentication: the token of its CONNECT, then of each AUTH_RESPONSE.

    When the current token expires the client is challenged (``challenge``) for a fresh one, if it
    announced it can refresh; a client that cannot, or sends no valid token within ``grace``
    seconds, is refused (``refuse`` with the reason), as a Pulsar broker does.
    """

    def __init__(
        self,
        authenticator: TokenAuthenticator,
        *,
        can_refresh: bool,
        challenge: Callable[[], None],
        refuse: Callable[[str], None],
        grace: float,
    ):
        self._authenticator = authenticator
        self._can_refresh = can_refresh
        self._challenge = challenge
        self._refuse = refuse
        self._grace = grace
        self._challenged = False
        self._timer: asyncio.TimerHandle | None = None

    def authenticate(self, method: str, data: bytes) -> TokenClaims:
        """Check credentials and watch their expiry; raises AuthenticationFailed."""
        claims = self._authenticator.authenticate(method, data)
        self._challenged = False
        self._watch(None if claims.expires_at is None else claims.expires_at - time.time())
        return claims

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
        if self._challenged:
            self._refuse(f"the token expired and no valid token answered the challenge within {self._grace:g} s")
        elif not self._can_refresh:
            self._refuse("the token expired and the client cannot refresh it")
        else:
            self._challenged = True
            self._challenge()
            self._watch(self._grace)
