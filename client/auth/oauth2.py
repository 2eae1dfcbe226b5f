"""OAuth 2.0 authentication: access tokens from an issuer, sent as tokens (method ``token``)."""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..forks import reset_after_fork
from .base import JAVA_PLUGIN_PREFIX, Authentication, require_str
from .oauth2_flow import AccessToken, ClientCredentials, ClientCredentialsFlow
from .params import parse_json_params

# A token is used until this share of its lifetime has passed, then a fresh one is fetched: the
# broker challenges when the old one expires, and the answer must not be the one about to expire.
REFRESH_AFTER_FRACTION = 0.9
_DATA_JSON_BASE64 = "data:application/json;base64,"


class AuthenticationOauth2(Authentication):
    """OAuth 2.0 client credentials authentication, configured by a JSON string::

        AuthenticationOauth2('{"issuer_url": "https://auth.example.com", "private_key": "/path/key.json",'
                             ' "audience": "urn:pulsar:cluster", "scope": "pulsar"}')

    ``private_key`` is a path, a ``file:`` URL or ``data:application/json;base64,...``, holding
    ``{"client_id": ..., "client_secret": ...}``; without it, ``client_id`` and ``client_secret``
    may be given directly. The access token is cached and fetched again once
    ``REFRESH_AFTER_FRACTION`` of its ``expires_in`` has passed, for new connections and for the
    broker's refresh challenges alike.
    """

    plugin_names = ("oauth2token", JAVA_PLUGIN_PREFIX + "oauth2.authenticationoauth2")

    def __init__(self, auth_params_string: str):
        params = parse_json_params(require_str(auth_params_string, "auth_params_string"), "oauth2")
        issuer_url = params.get("issuer_url", "")
        if not issuer_url:
            raise ValueError("the oauth2 authentication params need issuer_url, the URL of the token issuer")
        method = params.get("tokenEndpointAuthMethod") or "client_secret_post"
        if method != "client_secret_post":
            raise ValueError(
                f"unsupported oauth2 tokenEndpointAuthMethod {method!r}: this client supports client_secret_post"
            )
        self.auth_method_name = "token"
        self._flow = ClientCredentialsFlow(
            issuer_url, read_credentials(params), params.get("audience", ""), params.get("scope", "")
        )
        self._cached: AccessToken | None = None
        self._lock = threading.Lock()
        reset_after_fork(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # a thread of the parent may have held it at the fork

    @classmethod
    def from_params(cls, params: str) -> AuthenticationOauth2:
        """The ``oauth2token`` plugin's params: the JSON object the constructor takes."""
        return cls(params)

    def access_token(self) -> str:
        """The cached access token, or a fresh one when it has lived ``REFRESH_AFTER_FRACTION`` of
        its lifetime; AuthenticationError if the issuer gives none."""
        with self._lock:
            cached = self._cached
            if cached is None or time.monotonic() >= cached.expires_at - cached.lifetime * (1 - REFRESH_AFTER_FRACTION):
                self._cached = cached = self._flow.fetch()
            return cached.token

    def auth_data(self) -> bytes:
        return self.access_token().encode()

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token()}"}

    def tls_certificate_files(self) -> tuple[str, str] | None:
        return None

    def __repr__(self) -> str:
        return f"AuthenticationOauth2({self._flow!r})"


def read_credentials(params: dict[str, str]) -> ClientCredentials:
    """The client id and secret: from ``private_key`` (a path, ``file:`` URL or base64 ``data:``
    URL of a JSON key file), else from the ``client_id`` and ``client_secret`` params."""
    source = params.get("private_key")
    if source is None:
        return _credentials(params, "the oauth2 authentication params")
    if source.startswith("data:"):
        if not source.startswith(_DATA_JSON_BASE64):
            raise ValueError(f"an oauth2 private_key data: URL must start with {_DATA_JSON_BASE64!r}")
        try:
            text = base64.b64decode(source[len(_DATA_JSON_BASE64) :], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise ValueError(f"the oauth2 private_key data: URL is not base64 of UTF-8 JSON: {exc}") from None
        return _credentials(_json_object(text, "the private_key data: URL"), "the private_key data: URL")
    if source.startswith("file:"):
        # file:///path and file:/path both name /path
        source = unquote(source[len("file://") :] if source.startswith("file://") else source[len("file:") :])
    path = Path(source)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read the oauth2 private_key file {path}: {exc.strerror or exc}") from None
    return _credentials(_json_object(text, f"the private_key file {path}"), f"the private_key file {path}")


def _json_object(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where} must hold a JSON object with client_id and client_secret")
    return value


def _credentials(fields: dict[str, Any], where: str) -> ClientCredentials:
    missing = [name for name in ("client_id", "client_secret") if not isinstance(fields.get(name), str)]
    if missing:
        raise ValueError(f"{where} has no {' or '.join(missing)} (a string is needed)")
    return ClientCredentials(fields["client_id"], fields["client_secret"])
