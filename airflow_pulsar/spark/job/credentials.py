"""How the job authenticates to the broker: files Spark ships, never values on a command line.

The operator writes what the connection's authentication needs into files of fixed names, mode
0600, and spark-submit ships them with ``--files``: the driver and every executor find their copy
through ``SparkFiles`` (on YARN, a container's working directory holds them, and a driver in
client mode is told the directory they were written to, with ``--files-dir``). The driver reports
the batch after its session stopped, which removes Spark's copies, so it keeps copies of its own. The spec carries only
:class:`JobAuth`: the method, which files were shipped, and OAuth2's issuer, audience and scope.

- :data:`CREDENTIALS_FILE`, JSON: ``{"token": ...}`` for token authentication, ``{"login": ...,
  "password": ...}`` for basic, and for OAuth2 the key file of the client credentials flow,
  ``{"client_id": ..., "client_secret": ...}``, which the client reads as its ``private_key``;
- :data:`TRUST_FILE`: the CA certificates to trust (the connection's ``tls_trust_certs_file_path``);
- :data:`CERTIFICATE_FILE` and :data:`PRIVATE_KEY_FILE`: the client certificate and its key, for
  TLS authentication (or a mutual TLS handshake with any method).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_pulsar.client import (
    Authentication,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
)

CREDENTIALS_FILE = "airflow-pulsar-credentials.json"
TRUST_FILE = "airflow-pulsar-trust-certs.pem"
CERTIFICATE_FILE = "airflow-pulsar-client-cert.pem"
PRIVATE_KEY_FILE = "airflow-pulsar-client-key.pem"
SHIPPED_FILES = (CREDENTIALS_FILE, TRUST_FILE, CERTIFICATE_FILE, PRIVATE_KEY_FILE)
# The files that hold a secret; written, and kept where the job reads them, readable by their owner only.
SECRET_FILES = (CREDENTIALS_FILE, PRIVATE_KEY_FILE)
# What reaches the job of an OAuth2 connection besides its key file: nothing secret.
OAUTH2_SETTINGS = ("issuer_url", "audience", "scope")
# The files each authentication method cannot go without.
_METHOD_FILES = {
    "token": (CREDENTIALS_FILE,),
    "basic": (CREDENTIALS_FILE,),
    "oauth2": (CREDENTIALS_FILE,),
    "tls": (CERTIFICATE_FILE, PRIVATE_KEY_FILE),
}


@dataclass(frozen=True)
class JobAuth:
    """The job's authentication, without its secrets: the method (None: none), the names of the
    files shipped with the job (of :data:`SHIPPED_FILES`) and OAuth2's settings."""

    method: str | None = None
    files: tuple[str, ...] = ()
    oauth2: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.files) - set(SHIPPED_FILES))
        if unknown:
            raise ValueError(f"the job ships no files named {unknown}; it knows {SHIPPED_FILES}")
        extra = sorted(set(self.oauth2) - set(OAUTH2_SETTINGS))
        if extra:
            raise ValueError(f"OAuth2 settings {extra} cannot reach the job; allowed: {OAUTH2_SETTINGS}")
        missing = [name for name in _METHOD_FILES.get(self.method or "", ()) if name not in self.files]
        if missing:
            raise ValueError(f"auth method {self.method!r} needs the shipped files {missing}")

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "files": list(self.files), "oauth2": dict(self.oauth2)}

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> JobAuth:
        return cls(body.get("method"), tuple(body.get("files") or ()), dict(body.get("oauth2") or {}))

    def client_kwargs(self, directories: Sequence[str] = ()) -> dict[str, Any]:
        """The ``Client`` keyword arguments of this authentication, from the shipped files (see
        :func:`shipped_file` for ``directories``)."""
        kwargs: dict[str, Any] = {}
        if TRUST_FILE in self.files:
            kwargs["tls_trust_certs_file_path"] = shipped_file(TRUST_FILE, directories)
        if CERTIFICATE_FILE in self.files and PRIVATE_KEY_FILE in self.files:
            kwargs["tls_certificate_file_path"] = shipped_file(CERTIFICATE_FILE, directories)
            kwargs["tls_private_key_file_path"] = shipped_file(PRIVATE_KEY_FILE, directories)
        authentication = self._authentication(kwargs, directories)
        if authentication is not None:
            kwargs["authentication"] = authentication
        return kwargs

    def keep_files(self, directory: str, directories: Sequence[str] = ()) -> None:
        """Copy the shipped files (found as :func:`shipped_file` finds them) into ``directory``,
        which should be this process's alone, readable by their owner only."""
        for name in self.files:
            content = Path(shipped_file(name, directories)).read_bytes()
            with os.fdopen(os.open(Path(directory) / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as copy:
                copy.write(content)

    def _authentication(self, tls_files: dict[str, Any], directories: Sequence[str]) -> Authentication | None:
        if self.method == "tls":
            return AuthenticationTLS(tls_files["tls_certificate_file_path"], tls_files["tls_private_key_file_path"])
        if self.method == "oauth2":
            return AuthenticationOauth2(json.dumps({**self.oauth2, "private_key": shipped_file(CREDENTIALS_FILE, directories)}))
        if self.method in ("token", "basic"):
            secrets = json.loads(Path(shipped_file(CREDENTIALS_FILE, directories)).read_text())
            if self.method == "token":
                return AuthenticationToken(secrets["token"])
            return AuthenticationBasic(secrets["login"], secrets["password"])
        return None


def shipped_file(name: str, directories: Sequence[str] = ()) -> str:
    """The local copy of the file ``name`` shipped with the job, found where Spark placed it: in
    ``SparkFiles``' directory, or (a YARN container's localised files) the working directory; else
    in ``directories`` (a driver on the submitting machine under YARN, which places none for it).
    A copy that holds a secret is made readable by its owner only, whatever mode Spark gave it."""
    spark_files = _spark_files_dir()
    places = [*([spark_files] if spark_files else []), Path.cwd(), *(Path(directory) for directory in directories)]
    candidates = [place / name for place in places]
    for path in candidates:
        if path.is_file():
            if name in SECRET_FILES:
                os.chmod(path, 0o600)
            return str(path)
    raise FileNotFoundError(f"{name} was not shipped with the job: looked in {', '.join(str(path.parent) for path in candidates)}")


def _spark_files_dir() -> Path | None:
    """``SparkFiles``' directory in this process; None where no SparkContext runs (a driver
    whose session ended, a process outside Spark)."""
    from pyspark import SparkContext, SparkFiles

    if SparkFiles._is_running_on_worker or SparkContext._active_spark_context is not None:
        return Path(SparkFiles.getRootDirectory())
    return None
