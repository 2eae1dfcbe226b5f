"""The authentication provider interface, and the official client's generic ``Authentication`` form."""

from __future__ import annotations

from typing import Any


def require_str(value: Any, name: str) -> str:
    """``value`` if it is a string; otherwise the ValueError the official client raises for it."""
    if not isinstance(value, str):
        raise ValueError(f"Argument {name} is expected to be of type 'str' and not '{type(value).__name__}'")
    return value


class Authentication:
    """An authentication provider: what a connection sends in CONNECT, and the admin REST headers.

    ``Authentication(dynamicLibPath, authParamsString)`` is the official client's generic form. This
    client cannot load a shared library, so ``dynamicLibPath`` must name one of the built-in methods
    the official client knows by name: ``tls``, ``token``, ``basic``, ``oauth2token``, or the Java
    class names (``org.apache.pulsar.client.impl.auth.AuthenticationTls`` and the like); the params
    string is read as that method reads it (see :mod:`.plugins`). The subclasses are the methods
    themselves, with the official constructors.
    """

    auth_method_name: str = "none"

    def __init__(self, dynamicLibPath: str, authParamsString: str):
        require_str(dynamicLibPath, "dynamicLibPath")
        require_str(authParamsString, "authParamsString")
        from .plugins import create_builtin  # the plugins are subclasses of this class

        self._method = create_builtin(dynamicLibPath, authParamsString)
        self.auth_method_name = self._method.auth_method_name

    def auth_data(self) -> bytes:
        """The credentials sent in CONNECT, and again when the broker challenges for fresh ones."""
        return self._method.auth_data()

    def http_headers(self) -> dict[str, str]:
        """Headers for the admin REST API."""
        return self._method.http_headers()

    def tls_certificate_files(self) -> tuple[str, str] | None:
        """(certificate, private key) PEM files to present in the TLS handshake, or None."""
        return self._method.tls_certificate_files()

    def __repr__(self) -> str:
        return f"Authentication({self._method!r})"


class AuthenticationDisabled(Authentication):
    """No credentials: CONNECT with method ``none``, no admin headers."""

    def __init__(self) -> None:
        self.auth_method_name = "none"

    def auth_data(self) -> bytes:
        return b""

    def http_headers(self) -> dict[str, str]:
        return {}

    def tls_certificate_files(self) -> tuple[str, str] | None:
        return None

    def __repr__(self) -> str:
        return "AuthenticationDisabled()"
