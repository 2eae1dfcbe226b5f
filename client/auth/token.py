"""Token authentication: a JWT (or a supplier of fresh ones) sent with method ``token``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..exceptions import AuthenticationError
from .base import JAVA_PLUGIN_PREFIX, Authentication


class AuthenticationToken(Authentication):
    """Token authentication: a JWT string, or a callable returning a fresh one each time."""

    plugin_names = ("token", JAVA_PLUGIN_PREFIX + "authenticationtoken")

    def __init__(self, token: str | Callable[[], str]):
        if not callable(token) and not (isinstance(token, str) and token):
            raise ValueError("AuthenticationToken needs a non-empty token string or a callable returning one")
        self.auth_method_name = "token"
        self._token = token

    @classmethod
    def from_params(cls, params: str) -> AuthenticationToken:
        """The ``token`` plugin's params, read as the official client reads them: ``token:<jwt>``,
        ``file:///path`` (read again at each use, so a rotated file is picked up), ``env:NAME``, or
        the token itself."""
        if params.startswith("token:"):
            return cls(params[len("token:") :])
        if params.startswith("file:"):
            path = Path(params[len("file://") :] if params.startswith("file://") else params[len("file:") :])
            return cls(lambda: _read_token_file(path))
        if params.startswith("env:"):
            name = params[len("env:") :]
            return cls(lambda: _read_token_env(name))
        return cls(params)

    def token(self) -> str:
        """The current token; AuthenticationError when the supplier fails or gives no string (as
        the official client turns its failure into a Pulsar error, never the supplier's own)."""
        if not callable(self._token):
            return self._token
        try:
            token = self._token()
        except AuthenticationError:
            raise
        except Exception as exc:
            raise AuthenticationError(f"the token supplier failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(token, str):
            raise AuthenticationError(f"the token supplier returned {type(token).__name__}, not a str")
        return token

    def auth_data(self) -> bytes:
        return self.token().encode()

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token()}"}

    def tls_certificate_files(self) -> tuple[str, str] | None:
        return None

    def __repr__(self) -> str:
        # Never show the token itself.
        return "AuthenticationToken(***)"


def _read_token_file(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise AuthenticationError(f"cannot read the token file {path}: {exc.strerror or exc}") from None


def _read_token_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise AuthenticationError(f"the environment variable {name} holding the token is not set")
    return value.strip()
