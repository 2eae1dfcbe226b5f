"""Basic authentication (Pulsar's ``AuthenticationProviderBasic``): users and password hashes from a file.

The file (Pulsar's ``basicAuthConf``) has one ``user:hash`` line per user, as ``htpasswd`` writes
it, with ``$apr1$`` MD5 (``htpasswd -m``) or crypt DES (``htpasswd -d``) hashes. It is given as a
path, a ``file:`` URL, a ``data:`` URL, or the file's content in base64, as Pulsar reads it, or as
``env:NAME``, the environment variable NAME holding the content (as text, base64 or a ``data:``
URL). A client authenticates with method ``basic`` and ``user:password`` (CONNECT), or ``Authorization:
Basic base64(user:password)`` (admin).
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from urllib.parse import unquote, unquote_to_bytes, urlsplit

from .authentication import AuthenticationFailed, Credentials, Role
from .password_hashes import UnsupportedHash, check_hash_format, verify_password
from .token_keys import ENV_PREFIX

# One message for an unknown user and a wrong password, as Pulsar: a refusal must not tell which.
REFUSED = "Unknown user or invalid password"


class BasicConfigError(ValueError):
    """A users file that cannot be used; the message says where and why."""


class BasicProvider:
    """Checks ``user:password`` against the users file's hashes."""

    method_name = "basic"
    http_scheme = "Basic"

    def __init__(self, users: dict[str, str]):
        self._users = users

    @classmethod
    def from_conf(cls, source: str) -> BasicProvider:
        """Load the users from ``basicAuthConf``; BasicConfigError naming the bad line."""
        content, where = _read_conf(source)
        users: dict[str, str] = {}
        for number, line in enumerate(content.splitlines(), 1):
            if not line.strip():
                continue
            fields = line.split(":")
            if len(fields) != 2 or not fields[0]:
                raise BasicConfigError(f"line {number} of {where} is not 'user:hash'")
            try:
                check_hash_format(fields[1])
            except UnsupportedHash as exc:
                raise BasicConfigError(f"line {number} of {where} (user {fields[0]!r}): {exc}") from None
            users[fields[0]] = fields[1]
        if not users:
            raise BasicConfigError(f"{where} names no user")
        return cls(users)

    def authenticate(self, credentials: Credentials) -> Role:
        try:
            text = credentials.data.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("the basic credentials are not UTF-8 text") from None
        fields = text.split(":")
        if len(fields) != 2:
            raise AuthenticationFailed("the basic credentials must be 'user:password' (neither holding ':')")
        user, password = fields
        hashed = self._users.get(user)
        if hashed is None or not verify_password(password, hashed):
            raise AuthenticationFailed(REFUSED)
        return Role(user)


def _read_conf(source: str) -> tuple[str, str]:
    """The users file's text, and where it came from (for messages)."""
    if source.startswith(ENV_PREFIX):
        return _read_environment(source[len(ENV_PREFIX) :])
    if source.startswith("data:"):
        return _data_url(source, "the data: URL"), "the data: URL"
    path = Path(unquote(urlsplit(source).path)) if source.startswith("file:") else Path(source)
    if path.is_file() or source.startswith("file:"):
        try:
            return _text(path.read_bytes(), str(path)), str(path)
        except OSError as exc:
            raise BasicConfigError(f"cannot read the basic auth users file {path}: {exc.strerror or exc}") from None
    try:
        data = base64.b64decode(source, validate=True)
    except binascii.Error:
        raise BasicConfigError(
            f"basic auth users {source!r}: no such file, and not a file: or data: URL or base64 content"
        ) from None
    return _text(data, "the base64 value"), "the base64 value"


def _read_environment(name: str) -> tuple[str, str]:
    """The users from an environment variable: the file's text, a ``data:`` URL, or base64."""
    where = f"the environment variable {name}"
    value = os.environ.get(name, "").strip()
    if not value:
        raise BasicConfigError(f"{where}, named for the basic auth users, is not set")
    if value.startswith("data:"):
        return _data_url(value, where), where
    if ":" in value:  # user:hash lines; base64 holds no ':'
        return value, where
    try:
        return _text(base64.b64decode(value, validate=True), where), where
    except binascii.Error:
        raise BasicConfigError(f"{where} holds neither user:hash lines nor base64 nor a data: URL") from None


def _data_url(url: str, where: str) -> str:
    header, comma, payload = url.partition(",")
    if not comma:
        raise BasicConfigError("a basicAuthConf data: URL needs a ',' before its content")
    try:
        data = base64.b64decode(payload, validate=True) if header.endswith(";base64") else unquote_to_bytes(payload)
    except binascii.Error as exc:
        raise BasicConfigError(f"the basicAuthConf data: URL is not valid base64: {exc}") from None
    return _text(data, where)


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise BasicConfigError(f"the basic auth users in {where} are not UTF-8 text") from None
