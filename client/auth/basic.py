"""HTTP-style basic authentication: ``username:password`` in CONNECT, ``Authorization: Basic`` on admin."""

from __future__ import annotations

import base64

from .base import JAVA_PLUGIN_PREFIX, Authentication, require_str
from .params import parse_json_params

DEFAULT_METHOD = "basic"


class AuthenticationBasic(Authentication):
    """Basic authentication, as Pulsar's ``AuthenticationProviderBasic`` checks it.

    ``AuthenticationBasic("user", "pass")``, or ``AuthenticationBasic(auth_params_string=
    '{"username": "user", "password": "pass", "method": "basic"}')`` (then the other arguments are
    ignored). ``method`` is the auth method name sent in CONNECT (``basic`` unless the broker's
    provider is registered under another name).
    """

    plugin_names = ("basic", JAVA_PLUGIN_PREFIX + "authenticationbasic")

    def __init__(
        self,
        username: str | None = None,
        password: str | None = None,
        method: str = DEFAULT_METHOD,
        auth_params_string: str | None = None,
    ):
        if auth_params_string is not None:
            params = parse_json_params(require_str(auth_params_string, "auth_params_string"), "basic")
            for field in ("username", "password"):
                if field not in params:
                    raise ValueError(f"No {field} provided for basic provider (auth_params_string has no {field!r})")
            username, password = params["username"], params["password"]
            method = params.get("method", DEFAULT_METHOD)
        require_str(username, "username")
        require_str(password, "password")
        self.auth_method_name = require_str(method, "method")
        self._credentials = f"{username}:{password}".encode()

    @classmethod
    def from_params(cls, params: str) -> AuthenticationBasic:
        """The ``basic`` plugin's params: the JSON object of ``auth_params_string``."""
        return cls(auth_params_string=params)

    def auth_data(self) -> bytes:
        return self._credentials

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(self._credentials).decode("ascii")}

    def tls_certificate_files(self) -> tuple[str, str] | None:
        return None

    def __repr__(self) -> str:
        # Never show the password.
        user = self._credentials.split(b":", 1)[0].decode()
        return f"AuthenticationBasic({user!r}, ***, method={self.auth_method_name!r})"

