"""The client's authentication classes: the official constructors, plugin names and params strings."""

from __future__ import annotations

import base64
import inspect
import json
from pathlib import Path

import pulsar
import pytest

from airflow_pulsar.client import (
    Authentication,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
)
from airflow_pulsar.client.exceptions import AuthenticationError

CLASSES = ["Authentication", "AuthenticationBasic", "AuthenticationOauth2", "AuthenticationTLS", "AuthenticationToken"]


@pytest.mark.parametrize("name", CLASSES)
def test_constructors_are_the_official_ones(name: str) -> None:
    ours = inspect.signature(getattr(__import__("airflow_pulsar.client", fromlist=[name]), name).__init__)
    theirs = inspect.signature(getattr(pulsar, name).__init__)
    assert [(p.name, p.default) for p in ours.parameters.values()] == [
        (p.name, p.default) for p in theirs.parameters.values()
    ]


def test_basic_sends_user_and_password() -> None:
    auth = AuthenticationBasic("alice", "pa:ss")
    assert (auth.auth_method_name, auth.auth_data()) == ("basic", b"alice:pa:ss")
    assert auth.http_headers() == {"Authorization": "Basic " + base64.b64encode(b"alice:pa:ss").decode()}
    custom = AuthenticationBasic(auth_params_string='{"username": "u", "password": "p", "method": "oms3.0"}')
    assert (custom.auth_method_name, custom.auth_data()) == ("oms3.0", b"u:p")
    assert "pa:ss" not in repr(auth)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"auth_params_string": "not json"}, "basic authentication params are not valid JSON"),
        ({"auth_params_string": '{"username": "u"}'}, "No password provided for basic provider"),
        ({"username": "u", "password": 5}, "Argument password is expected to be of type 'str'"),
    ],
)
def test_bad_basic_arguments(args: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AuthenticationBasic(**args)


def test_tls_presents_the_certificate_and_sends_no_data() -> None:
    auth = AuthenticationTLS("/c.pem", "/k.pem")
    assert (auth.auth_method_name, auth.auth_data(), auth.http_headers()) == ("tls", b"", {})
    assert auth.tls_certificate_files() == ("/c.pem", "/k.pem")


@pytest.mark.parametrize(
    ("plugin", "params", "method", "data"),
    [
        ("tls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem", "tls", b""),
        ("org.apache.pulsar.client.impl.auth.AuthenticationTls", '{"tlsCertFile": "/c", "tlsKeyFile": "/k"}', "tls", b""),
        ("TOKEN", "token:abc.def.ghi", "token", b"abc.def.ghi"),
        ("org.apache.pulsar.client.impl.auth.AuthenticationToken", "abc.def.ghi", "token", b"abc.def.ghi"),
        ("basic", '{"username": "u", "password": "p"}', "basic", b"u:p"),
        ("org.apache.pulsar.client.impl.auth.AuthenticationBasic", '{"username": "u", "password": "p"}', "basic", b"u:p"),
    ],
)
def test_plugin_names_and_params_as_the_official_client_reads_them(
    plugin: str, params: str, method: str, data: bytes
) -> None:
    auth = Authentication(plugin, params)
    assert (auth.auth_method_name, auth.auth_data()) == (method, data)
    official = pulsar.Authentication(plugin, params)
    assert official.auth is not None  # the official client knows the name too


def test_token_plugin_reads_files_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from.the.file\n")
    from_file = Authentication("token", f"file://{token_file}")
    assert from_file.auth_data() == b"from.the.file"
    token_file.write_text("rotated.token.file")
    assert from_file.auth_data() == b"rotated.token.file"  # read at each use
    monkeypatch.setenv("PULSAR_TEST_TOKEN", "from.the.env")
    assert Authentication("token", "env:PULSAR_TEST_TOKEN").http_headers() == {"Authorization": "Bearer from.the.env"}
    with pytest.raises(AuthenticationError, match="PULSAR_MISSING_TOKEN holding the token is not set"):
        Authentication("token", "env:PULSAR_MISSING_TOKEN").auth_data()
    assert AuthenticationToken("t").auth_method_name == "token"


def test_oauth2_by_its_java_name_and_subclasses_keep_the_methods_plugin_names() -> None:
    params = '{"issuer_url": "http://x", "client_id": "c", "client_secret": "s"}'
    java = Authentication("org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2", params)
    assert java.auth_method_name == "token" and "client_id='c'" in repr(java)

    class Rotating(AuthenticationToken):  # a user's own token method
        def token(self) -> str:
            return "rotated"

    assert Rotating("t").auth_data() == b"rotated"
    assert Authentication("token", "token:abc").auth_data() == b"abc"  # still the built-in token method


@pytest.mark.parametrize(
    ("plugin", "params", "message"),
    [
        ("oauth2", "{}", "unknown authentication plugin 'oauth2': the built-in ones are tls, token, basic and oauth2token"),
        ("/usr/lib/libauth.so", "", "cannot load a shared library"),
        ("tls", "tlsCertFile:/c.pem", "need tlsCertFile and tlsKeyFile .* missing: tlsKeyFile"),
        ("oauth2token", "{}", "need issuer_url"),
        ("oauth2token", "[1]", "must be a JSON object"),
        ("oauth2token", '{"issuer_url": "http://x", "private_key": "/nowhere/key.json"}', "cannot read .* file /nowhere/key.json"),
        ("oauth2token", '{"issuer_url": "http://x", "private_key": "data:text/plain,x"}', "must start with 'data:application/json"),
        ("oauth2token", '{"issuer_url": "http://x", "client_id": "c"}', "has no client_secret"),
        (
            "oauth2token",
            '{"issuer_url": "http://x", "client_id": "c", "client_secret": "s", "tokenEndpointAuthMethod": "x"}',
            "unsupported oauth2 tokenEndpointAuthMethod 'x'",
        ),
    ],
)
def test_bad_plugins_and_params_name_the_problem(plugin: str, params: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Authentication(plugin, params)


def test_oauth2_key_file_forms(tmp_path: Path) -> None:
    key = {"client_id": "c", "client_secret": "s"}
    path = tmp_path / "key.json"
    path.write_text(json.dumps(key))
    encoded = "data:application/json;base64," + base64.b64encode(json.dumps(key).encode()).decode()
    for private_key in (str(path), f"file://{path}", f"file:{path}", encoded):
        auth = AuthenticationOauth2(json.dumps({"issuer_url": "http://127.0.0.1:9", "private_key": private_key}))
        assert auth.auth_method_name == "token" and "client_id='c'" in repr(auth)
    with pytest.raises(ValueError, match="Argument auth_params_string is expected to be of type 'str'"):
        AuthenticationOauth2(key)  # type: ignore[arg-type]
