"""Authentication providers, as the official client names them."""

from __future__ import annotations

from collections.abc import Callable


class Authentication:
    """No authentication; subclasses supply a method name and credentials for CONNECT."""

    auth_method_name = "none"

    def auth_data(self) -> bytes:
        """The credentials sent in CONNECT (and again when the broker challenges)."""
        return b""

    def http_headers(self) -> dict[str, str]:
        """Headers for the admin REST API."""
        return {}


class AuthenticationToken(Authentication):
    """Token authentication: a JWT string, or a callable returning a fresh one each time."""

    auth_method_name = "token"

    def __init__(self, token: str | Callable[[], str]):
        if not callable(token) and not (isinstance(token, str) and token):
            raise ValueError("AuthenticationToken needs a non-empty token string or a callable returning one")
        self._token = token

    def token(self) -> str:
        """The current token."""
        return self._token() if callable(self._token) else self._token

    def auth_data(self) -> bytes:
        return self.token().encode()

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token()}"}

    def __repr__(self) -> str:
        # Never show the token itself.
        return "AuthenticationToken(***)"
