"""TLS client-certificate authentication: the certificate goes in the TLS handshake, CONNECT says ``tls``."""

from __future__ import annotations

import os
import ssl

from ..exceptions import AuthenticationError
from .base import JAVA_PLUGIN_PREFIX, Authentication, require_str
from .params import parse_default_params, parse_json_params


class AuthenticationTLS(Authentication):
    """Authenticate with a client certificate (PEM) and its private key (PEM).

    The broker takes the role from the certificate's common name (CN). The certificate is presented
    on every TLS connection the client makes, binary and admin; over plain TCP there is none to
    present, and a broker refuses the connection.
    """

    plugin_names = ("tls", JAVA_PLUGIN_PREFIX + "authenticationtls")

    def __init__(self, certificate_path: str, private_key_path: str):
        self.auth_method_name = "tls"
        self._certificate = require_str(certificate_path, "certificate_path")
        self._private_key = require_str(private_key_path, "private_key_path")

    @classmethod
    def from_params(cls, params: str) -> AuthenticationTLS:
        """The ``tls`` plugin's params: ``tlsCertFile:/path,tlsKeyFile:/path`` as the official client
        reads them, or the JSON object ``{"tlsCertFile": ..., "tlsKeyFile": ...}`` Java clients take."""
        fields = parse_json_params(params, "tls") if params.lstrip().startswith("{") else parse_default_params(params)
        missing = [name for name in ("tlsCertFile", "tlsKeyFile") if not fields.get(name)]
        if missing:
            raise ValueError(
                f"the tls authentication params need tlsCertFile and tlsKeyFile "
                f"(e.g. 'tlsCertFile:/path/cert.pem,tlsKeyFile:/path/key.pem'); missing: {', '.join(missing)}"
            )
        return cls(fields["tlsCertFile"], fields["tlsKeyFile"])

    def auth_data(self) -> bytes:
        return b""  # the credentials are the certificate, already checked in the handshake

    def http_headers(self) -> dict[str, str]:
        return {}

    def tls_certificate_files(self) -> tuple[str, str] | None:
        return self._certificate, self._private_key

    def __repr__(self) -> str:
        return f"AuthenticationTLS({self._certificate!r}, {self._private_key!r})"


def load_client_certificate(
    context: ssl.SSLContext,
    authentication: Authentication | None,
    certificate_path: str | None = None,
    private_key_path: str | None = None,
) -> None:
    """Load the client certificate into ``context``: the authentication's if it has one (it wins,
    as in the official client), else the given files; AuthenticationError naming an unusable file."""
    files = authentication.tls_certificate_files() if authentication is not None else None
    certificate, key = files if files is not None else (certificate_path, private_key_path)
    if not certificate:
        return
    for path, what in ((certificate, "certificate"), (key, "private key")):
        if path and not os.path.isfile(path):
            raise AuthenticationError(f"{path}: no such TLS client {what} file")
    try:
        context.load_cert_chain(certificate, key)
    except (OSError, ssl.SSLError) as exc:
        raise AuthenticationError(
            f"cannot load the TLS client certificate {certificate} with key {key or '(in the same file)'}: {exc}"
        ) from None
