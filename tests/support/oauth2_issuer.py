"""A small OAuth 2.0 / OpenID issuer for the tests: discovery document and client credentials grant.

It serves ``/.well-known/openid-configuration`` (naming its token endpoint) and ``POST /oauth/token``,
which checks the client id and secret of a ``grant_type=client_credentials`` form and answers with
an RS256 access token signed by PyJWT (an implementation independent of ours) with the client id
as ``sub``, the requested audience as ``aud``, and a short ``expires_in``, so that refreshes happen
within a test. Wrong credentials get RFC 6749's ``401 {"error": "invalid_client"}``.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

TOKEN_PATH = "/oauth/token"


@dataclass
class IssuedToken:
    """One access token handed out, and to whom."""

    client_id: str
    token: str
    expires_at: float


@dataclass
class Oauth2Issuer:
    """The running issuer: its URL, the public key a broker checks its tokens with, what it issued."""

    url: str
    public_key_file: Path
    clients: dict[str, str]
    expires_in: int
    issued: list[IssuedToken] = field(default_factory=list)
    forms: list[dict[str, str]] = field(default_factory=list)

    def key_file(self, directory: Path, client_id: str, secret: str | None = None) -> Path:
        """A key file (``private_key`` of the oauth2 params) for ``client_id`` with its secret, or ``secret``."""
        path = directory / f"{client_id}-{secret or 'right'}.json"
        path.write_text(json.dumps({"client_id": client_id, "client_secret": secret or self.clients[client_id]}))
        return path

    def params(self, key_file: Path | str, audience: str = "urn:pulsar:test") -> str:
        """The oauth2 authentication params string for ``key_file``."""
        return json.dumps({"issuer_url": self.url, "private_key": str(key_file), "audience": audience})


def _handler(issuer: Oauth2Issuer, signing_key: rsa.RSAPrivateKey) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                self._answer(200, {"issuer": issuer.url, "token_endpoint": issuer.url + TOKEN_PATH})
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = {key: values[0] for key, values in parse_qs(self.rfile.read(length).decode()).items()}
            issuer.forms.append(form)
            if self.path != TOKEN_PATH or form.get("grant_type") != "client_credentials":
                self._answer(400, {"error": "unsupported_grant_type"})
                return
            client_id = form.get("client_id", "")
            if issuer.clients.get(client_id) != form.get("client_secret"):
                self._answer(401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"})
                return
            # Rounded up: the token lives at least expires_in, as the answer says.
            expires_at = math.ceil(time.time() + issuer.expires_in)
            claims = {"sub": client_id, "iss": issuer.url, "iat": int(time.time()), "exp": int(expires_at)}
            if form.get("audience"):
                claims["aud"] = form["audience"]
            token = jwt.encode(claims, signing_key, algorithm="RS256")
            issuer.issued.append(IssuedToken(client_id, token, expires_at))
            self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": issuer.expires_in})

    return Handler


class RunningIssuer:
    """Context manager: an Oauth2Issuer served from a thread on 127.0.0.1 (a free port)."""

    def __init__(self, directory: Path, clients: dict[str, str], expires_in: int = 3600):
        self._directory = directory
        self._clients = clients
        self._expires_in = expires_in
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> Oauth2Issuer:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = self._directory / "issuer-public.der"
        public.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        issuer = Oauth2Issuer("", public, dict(self._clients), self._expires_in)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(issuer, key))
        issuer.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="oauth2-issuer", daemon=True).start()
        return issuer

    def __exit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
