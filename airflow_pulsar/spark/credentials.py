"""A Pulsar connection's credentials as the files the ingest job is shipped with.

What the job needs of the connection's authentication and TLS settings becomes files of the names
:mod:`airflow_pulsar.spark.job.credentials` reads, written with mode 0600 into the submit's private
directory and shipped with ``--files``; only their paths reach spark-submit's command line. An
OAuth2 key file (a path, ``file:`` URL or base64 ``data:`` URL) is shipped as the key file it holds,
client id and secret given as login and password as one written for them.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from airflow_pulsar.hooks.pulsar import PulsarConnectionConfig
from airflow_pulsar.spark.job.credentials import (
    CERTIFICATE_FILE,
    CREDENTIALS_FILE,
    PRIVATE_KEY_FILE,
    TRUST_FILE,
    JobAuth,
)

_DATA_URL = "data:"


@dataclass(frozen=True)
class ShippedCredentials:
    """The job's :class:`JobAuth` (which goes in its spec) and the contents of the files it names
    (which go with ``--files``); the contents are left out of the repr."""

    auth: JobAuth = field(default_factory=JobAuth)
    contents: dict[str, bytes] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, config: PulsarConnectionConfig) -> ShippedCredentials:
        """What the job needs of ``config``; OSError if a file it names cannot be read."""
        credentials = config.credentials
        contents: dict[str, bytes] = {}
        if config.tls_trust_certs_file_path:
            contents[TRUST_FILE] = Path(config.tls_trust_certs_file_path).read_bytes()
        if credentials.tls_certificate_file_path and credentials.tls_private_key_file_path:
            contents[CERTIFICATE_FILE] = Path(credentials.tls_certificate_file_path).read_bytes()
            contents[PRIVATE_KEY_FILE] = Path(credentials.tls_private_key_file_path).read_bytes()
        oauth2: dict[str, str] = {}
        if credentials.method == "token":
            contents[CREDENTIALS_FILE] = json.dumps({"token": credentials.password}).encode()
        elif credentials.method == "basic":
            contents[CREDENTIALS_FILE] = json.dumps({"login": credentials.login, "password": credentials.password}).encode()
        elif credentials.method == "oauth2":
            if credentials.oauth2_private_key:
                contents[CREDENTIALS_FILE] = _key_file(credentials.oauth2_private_key)
            else:
                contents[CREDENTIALS_FILE] = json.dumps({"client_id": credentials.login, "client_secret": credentials.password}).encode()
            settings = {
                "issuer_url": credentials.oauth2_issuer_url,
                "audience": credentials.oauth2_audience,
                "scope": credentials.oauth2_scope,
            }
            oauth2 = {key: value for key, value in settings.items() if value}
        return cls(JobAuth(credentials.method, tuple(contents), oauth2), contents)

    def write(self, directory: Path) -> list[Path]:
        """Write the files into ``directory`` (which should be this process's alone), mode 0600; their paths."""
        paths = []
        for name, content in self.contents.items():
            path = Path(directory) / name
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(content)
            paths.append(path)
        return paths


def _key_file(private_key: str) -> bytes:
    """The key file an OAuth2 ``private_key`` names (a path or ``file:`` URL) or holds (a base64
    ``data:`` URL); the job's client checks what it holds."""
    if private_key.startswith(_DATA_URL):
        return base64.b64decode(private_key.split(",", 1)[-1])
    if private_key.startswith("file:"):
        return Path(unquote(urlsplit(private_key).path)).read_bytes()
    return Path(private_key).read_bytes()
