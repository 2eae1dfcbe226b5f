"""The built-in authentication plugins of the official client, by the names it accepts.

Names compare case-insensitively, as there; each plugin reads its params string in its own format:
``tls`` the ``key:value,key:value`` form (or JSON), ``token`` ``token:``/``file:``/``env:`` or the
token itself, ``basic`` and ``oauth2token`` JSON.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Authentication
from .basic import AuthenticationBasic
from .oauth2 import AuthenticationOauth2
from .tls import AuthenticationTLS
from .token import AuthenticationToken

_JAVA = "org.apache.pulsar.client.impl.auth."
PLUGINS: dict[str, Callable[[str], Authentication]] = {
    "tls": AuthenticationTLS.from_params,
    _JAVA + "authenticationtls": AuthenticationTLS.from_params,
    "token": AuthenticationToken.from_params,
    _JAVA + "authenticationtoken": AuthenticationToken.from_params,
    "basic": lambda params: AuthenticationBasic(auth_params_string=params),
    _JAVA + "authenticationbasic": lambda params: AuthenticationBasic(auth_params_string=params),
    "oauth2token": AuthenticationOauth2,
    _JAVA + "oauth2.authenticationoauth2": AuthenticationOauth2,
}


def create_builtin(plugin: str, params: str) -> Authentication:
    """The authentication ``plugin`` names, configured by ``params``; ValueError for a name that
    is none of them (this client loads no shared libraries)."""
    factory = PLUGINS.get(plugin.strip().lower())
    if factory is None:
        raise ValueError(
            f"unknown authentication plugin {plugin!r}: the built-in ones are tls, token, basic and oauth2token "
            f"(or their Java class names under {_JAVA}); this client cannot load a shared library"
        )
    return factory(params)
