"""The authentication provider interface, and the official client's generic ``Authentication`` form.

The generic form picks a method by the plugin names the official client accepts for it. Each
method names its own (``plugin_names``) and is found by them once its class exists: the package
imports every method module, so they all exist before anything can construct one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

# The prefix of the Java class names the official client also accepts as plugin names.
JAVA_PLUGIN_PREFIX = "org.apache.pulsar.client.impl.auth."


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
    class names (``org.apache.pulsar.client.impl.auth.AuthenticationTls`` and the like), compared
    case-insensitively as there; the params string is read as that method reads it (its
    ``from_params``). The subclasses are the methods themselves, with the official constructors.
    """

    auth_method_name: str = "none"
    # The plugin names of a method (lower case), set by its class.
    plugin_names: ClassVar[tuple[str, ...]] = ()
    _methods: ClassVar[dict[str, Callable[[str], Authentication]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Only the names a class sets itself: a user's subclass of a method does not take them over.
        for name in cls.__dict__.get("plugin_names", ()):
            Authentication._methods[name] = cls.from_params

    def __init__(self, dynamicLibPath: str, authParamsString: str):
        require_str(dynamicLibPath, "dynamicLibPath")
        require_str(authParamsString, "authParamsString")
        method = self._methods.get(dynamicLibPath.strip().lower())
        if method is None:
            raise ValueError(
                f"unknown authentication plugin {dynamicLibPath!r}: the built-in ones are tls, token, basic and oauth2token "
                f"(or their Java class names under {JAVA_PLUGIN_PREFIX}); this client cannot load a shared library"
            )
        self._method = method(authParamsString)
        self.auth_method_name = self._method.auth_method_name

    @classmethod
    def from_params(cls, params: str) -> Authentication:
        """The method configured by its plugin's params string, as the official client reads it."""
        raise NotImplementedError(f"{cls.__name__} has no plugin params form")

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
