"""The authentication a ``pulsar`` connection names, as the bundled client's ``Authentication``.

The connection's ``auth_method`` extra picks one of the methods the client supports:

* ``token``: the password is a JWT (the method when a password is set and none is named);
* ``basic``: login and password, as Pulsar's ``AuthenticationProviderBasic`` checks them;
* ``tls``: the client certificate (``tls_certificate_file_path`` and ``tls_private_key_file_path``),
  whose common name is the role;
* ``oauth2``: an access token from ``oauth2_issuer_url`` by the client credentials grant, the client
  id and secret given as login and password or in the JSON file ``oauth2_private_key``.

Building one opens no connection (an OAuth2 token is fetched when the client first connects).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from airflow_pulsar.client import (
    Authentication,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
)

AUTH_METHODS = ("token", "basic", "tls", "oauth2")


@dataclass(frozen=True)
class ConnectionAuthentication:
    """The credentials of a connection; the password is left out of the repr."""

    method: str | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    tls_certificate_file_path: str | None = None
    tls_private_key_file_path: str | None = None
    oauth2_issuer_url: str | None = None
    oauth2_private_key: str | None = None
    oauth2_audience: str | None = None
    oauth2_scope: str | None = None

    @classmethod
    def from_connection(cls, conn_id: str, login: str | None, password: str | None, extra: dict[str, Any]) -> ConnectionAuthentication:
        """Read and check the method and the fields it needs; ValueError naming what is missing."""
        named = extra.get("auth_method") or None
        method = str(named).strip().lower() if named is not None else ("token" if password else None)
        if method is not None and method not in AUTH_METHODS:
            raise ValueError(f"connection {conn_id!r}: auth_method must be one of {', '.join(AUTH_METHODS)}, got {named!r}")
        credentials = cls(
            method,
            login or None,
            password or None,
            *(extra.get(name) or None for name in _EXTRA_FIELDS),
        )
        missing = [name for name in _REQUIRED.get(method or "", ()) if not getattr(credentials, name)]
        if method == "oauth2" and not credentials.oauth2_private_key and not (credentials.login and credentials.password):
            missing.append("oauth2_private_key (or login and password as the client id and secret)")
        if missing:
            raise ValueError(f"connection {conn_id!r}: auth_method {method!r} needs {', '.join(missing)}")
        return credentials

    @property
    def token(self) -> str | None:
        """The token of token authentication, else None."""
        return self.password if self.method == "token" else None

    def authentication(self) -> Authentication | None:
        """The client's ``Authentication`` for this method (None: no authentication)."""
        if self.method == "token":
            return AuthenticationToken(self.password or "")
        if self.method == "basic":
            return AuthenticationBasic(self.login, self.password)
        if self.method == "tls":
            return AuthenticationTLS(self.tls_certificate_file_path or "", self.tls_private_key_file_path or "")
        if self.method == "oauth2":
            params = {
                "issuer_url": self.oauth2_issuer_url,
                "private_key": self.oauth2_private_key,
                "audience": self.oauth2_audience,
                "scope": self.oauth2_scope,
                "client_id": None if self.oauth2_private_key else self.login,
                "client_secret": None if self.oauth2_private_key else self.password,
            }
            return AuthenticationOauth2(json.dumps({key: value for key, value in params.items() if value}))
        return None


# Connection extras read into the fields after login and password, in order.
_EXTRA_FIELDS = (
    "tls_certificate_file_path",
    "tls_private_key_file_path",
    "oauth2_issuer_url",
    "oauth2_private_key",
    "oauth2_audience",
    "oauth2_scope",
)
# What each method cannot go without (oauth2's credentials are checked on their own).
_REQUIRED = {
    "token": ("password",),
    "basic": ("login", "password"),
    "tls": ("tls_certificate_file_path", "tls_private_key_file_path"),
    "oauth2": ("oauth2_issuer_url",),
}
