"""OAuth 2.0 client credentials grant (RFC 6749 section 4.4) against an OpenID issuer.

The token endpoint is discovered once from ``{issuer_url}/.well-known/openid-configuration``, as
the official client does; each token request POSTs ``grant_type=client_credentials`` with the
client id and secret (``client_secret_post``), the audience and, if set, the scope.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import AuthenticationError
from ..forks import reset_after_fork

if TYPE_CHECKING:
    import httpx

HTTP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class ClientCredentials:
    """What a key file holds: the OAuth2 client's id and secret."""

    client_id: str
    client_secret: str


@dataclass(frozen=True)
class AccessToken:
    """A token from the token endpoint, and when (``time.monotonic()``) its lifetime runs out."""

    token: str
    expires_at: float
    lifetime: float


class ClientCredentialsFlow:
    """Obtains access tokens for one client from one issuer."""

    def __init__(self, issuer_url: str, credentials: ClientCredentials, audience: str = "", scope: str = ""):
        self.issuer_url = issuer_url
        self._credentials = credentials
        self._audience = audience
        self._scope = scope
        self._token_endpoint: str | None = None
        self._lock = threading.Lock()
        reset_after_fork(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # a thread of the parent may have held it at the fork

    def token_endpoint(self) -> str:
        """The issuer's token endpoint, discovered on first use."""
        with self._lock:
            if self._token_endpoint is None:
                self._token_endpoint = self._discover()
            return self._token_endpoint

    def fetch(self) -> AccessToken:
        """A new access token; AuthenticationError saying why none could be had."""
        endpoint = self.token_endpoint()
        form = {
            "grant_type": "client_credentials",
            "client_id": self._credentials.client_id,
            "client_secret": self._credentials.client_secret,
            "audience": self._audience,
        }
        if self._scope:
            form["scope"] = self._scope
        requested = time.monotonic()
        answer = _json(_request("POST", endpoint, data=form, headers={"Accept": "application/json"}), endpoint)
        if not isinstance(answer, dict) or not answer.get("access_token"):
            raise AuthenticationError(f"the token endpoint {endpoint} answered without an access_token")
        lifetime = answer.get("expires_in")
        if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or lifetime <= 0:
            raise AuthenticationError(
                f"the token endpoint {endpoint} gave no valid expires_in (got {lifetime!r}): "
                "a positive number of seconds is needed to know when to refresh the token"
            )
        # Counted from the request, not the answer: the token may have been issued at any moment between.
        return AccessToken(str(answer["access_token"]), requested + lifetime, float(lifetime))

    def _discover(self) -> str:
        url = self.issuer_url.rstrip("/") + "/.well-known/openid-configuration"
        document = _json(_request("GET", url, headers={"Accept": "application/json"}), url)
        endpoint = document.get("token_endpoint") if isinstance(document, dict) else None
        if not isinstance(endpoint, str) or not endpoint:
            raise AuthenticationError(f"the OpenID configuration at {url} names no token_endpoint")
        return endpoint

    def __repr__(self) -> str:
        return f"ClientCredentialsFlow({self.issuer_url!r}, client_id={self._credentials.client_id!r})"


def _request(method: str, url: str, **options: Any) -> httpx.Response:
    # Imported here: httpx (with the console tools it loads) is a third of the client's import
    # time, and only OAuth2 users need it.
    import httpx

    try:
        response = httpx.request(method, url, timeout=HTTP_TIMEOUT_SECONDS, **options)
    except httpx.HTTPError as exc:
        raise AuthenticationError(f"cannot reach {url}: {exc}") from None
    if response.status_code != 200:
        raise AuthenticationError(f"{url} refused the request: HTTP {response.status_code}{_oauth_error(response)}")
    return response


def _oauth_error(response: httpx.Response) -> str:
    """The RFC 6749 ``error`` and ``error_description`` of a refusal, if it has them."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict) or "error" not in body:
        return ""
    description = body.get("error_description")
    return f" {body['error']}" + (f": {description}" if description else "")


def _json(response: httpx.Response, url: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise AuthenticationError(f"{url} answered with something that is not JSON") from None
