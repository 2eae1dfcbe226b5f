"""How a Pulsar connection's credentials go to spark-submit, for the masters this machine cannot run.

YARN and Kubernetes cannot run here: for them, the command SparkSubmitHook builds
(``_build_spark_submit_command``), what it logs and the environment it would give spark-submit are
checked, for each auth method and deploy mode. Their environment variables (``env_vars``) become
``--conf spark.yarn.appMasterEnv.*`` / ``spark.kubernetes.driverEnv.*`` on that command line, so
no secret may travel in them: each travels in a file of mode 0600 named by ``--files``. Local
Spark and a standalone cluster are checked on live processes in test_ingest_auth.py.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.spark.credentials import ShippedCredentials
from airflow_pulsar.spark.job.credentials import (
    CERTIFICATE_FILE,
    CREDENTIALS_FILE,
    PRIVATE_KEY_FILE,
    TRUST_FILE,
    JobAuth,
    shipped_file,
)
from airflow_pulsar.spark.submit import JobSubmit
from tests.support.security import Pki

TOKEN, PASSWORD, CLIENT_SECRET = "eyJ0b2tlbi1vbi15YXJu.c2VjcmV0", "basic-password-4Yx", "oauth2-secret-8Tq"
KEY_FILE_BODY = {"client_id": "etl", "client_secret": CLIENT_SECRET}
MASTERS = {
    "yarn": {"conn_type": "spark", "host": "yarn"},
    "kubernetes": {"conn_type": "spark", "host": "k8s://https://k8s.example:6443"},
}


def connection(method: str, pki: Pki, directory: Path) -> tuple[dict[str, Any], list[str]]:
    """The fields of a Pulsar connection with ``method``, and its secrets."""
    extra: dict[str, Any] = {"auth_method": method, "tls_trust_certs_file_path": str(pki.ca)}
    key_lines = [line for line in pki.client_key.read_text().splitlines() if line and not line.startswith("-----")]
    if method == "token":
        return {"password": TOKEN, "extra": extra}, [TOKEN]
    if method == "basic":
        return {"login": "etl", "password": PASSWORD, "extra": extra}, [PASSWORD]
    if method == "tls":
        extra.update(tls_certificate_file_path=str(pki.client_cert), tls_private_key_file_path=str(pki.client_key))
        return {"extra": extra}, key_lines
    key_file = directory / "key.json"
    key_file.write_text(json.dumps(KEY_FILE_BODY))
    extra.update(oauth2_issuer_url="https://auth.example.com", oauth2_private_key=str(key_file))
    return {"extra": extra}, [CLIENT_SECRET]


@pytest.mark.parametrize("deploy_mode", ["client", "cluster"])
@pytest.mark.parametrize("master", sorted(MASTERS))
@pytest.mark.parametrize("method", ["token", "basic", "tls", "oauth2"])
def test_no_secret_reaches_the_command_or_the_log_on_yarn_and_kubernetes(
    submitted: dict,
    pki: Pki,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    method: str,
    master: str,
    deploy_mode: str,
) -> None:
    if master == "kubernetes":
        # The hook refuses a k8s:// master unless the Kubernetes provider, which it uses only to
        # follow a driver pod (not asked for here), is installed; it is not, in this environment.
        from airflow.providers.apache.spark.hooks import spark_submit

        monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)
    fields, secrets = connection(method, pki, tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_TEST", json.dumps({"conn_type": "pulsar", "host": "pulsar+ssl://broker:6651", **fields}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_ELSEWHERE", json.dumps(MASTERS[master]))
    credentials = ShippedCredentials.of(PulsarHook("pulsar_test").config)
    arguments = {"conn_id": "spark_elsewhere", "deploy_mode": deploy_mode, "env_vars": {"PYSPARK_PYTHON": sys.executable}}
    caplog.set_level(logging.INFO)

    JobSubmit(arguments, json.dumps({"auth": credentials.auth.to_dict()}), credentials).run()

    command = submitted["command"]
    log = caplog.text + "".join(capfd.readouterr())
    assert "Spark-Submit cmd" in log
    for secret in secrets:
        assert not [part for part in command if secret in part], f"a secret on the command line: {command}"
        assert secret not in log
        assert secret not in json.dumps(submitted["hook_env"] or {}) + json.dumps(submitted["popen"].get("env") or {})
    # Each secret is in a file of mode 0600 that --files ships, and only there.
    files = command[command.index("--files") + 1].split(",")
    assert sorted(Path(path).name for path in files) == sorted(credentials.auth.files)
    assert {mode for mode, _ in submitted["files"].values()} == {0o600}
    shipped = b"".join(content for _, content in submitted["files"].values()).decode()
    assert all(secret in shipped for secret in secrets)
    # A driver in client mode is told where the files were written: YARN gives it no copies.
    files_dir = command[command.index("--files-dir") + 1] if deploy_mode == "client" else None
    assert deploy_mode == "cluster" or {str(Path(path).parent) for path in files} == {files_dir}
    # The driver's environment on the cluster goes on the command line: it holds only env_vars.
    driver_env = [part for part in command if part.startswith(("spark.yarn.appMasterEnv.", "spark.kubernetes.driverEnv."))]
    assert [part.split("=", 1)[0].rsplit(".", 1)[1] for part in driver_env] == ["PYSPARK_PYTHON"]


@pytest.mark.parametrize("source", ["path", "file-url", "data-url", "login"])
def test_an_oauth2_connection_ships_a_key_file_of_its_client_credentials(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    key_file = tmp_path / "key.json"
    key_file.write_text(json.dumps({**KEY_FILE_BODY, "type": "client_credentials"}))
    private_key = {
        "path": str(key_file),
        "file-url": key_file.as_uri(),
        "data-url": "data:application/json;base64," + base64.b64encode(key_file.read_bytes()).decode(),
    }
    extra = {
        "auth_method": "oauth2",
        "oauth2_issuer_url": "https://auth.example.com",
        "oauth2_audience": "urn:pulsar:x",
        "oauth2_scope": "s",
    }
    fields: dict[str, Any] = {"login": "etl", "password": CLIENT_SECRET} if source == "login" else {}
    if source != "login":
        extra["oauth2_private_key"] = private_key[source]
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_TEST", json.dumps({"conn_type": "pulsar", "host": "broker", "extra": extra, **fields}))

    credentials = ShippedCredentials.of(PulsarHook("pulsar_test").config)

    assert credentials.auth.method == "oauth2" and credentials.auth.files == (CREDENTIALS_FILE,)
    assert credentials.auth.oauth2 == {"issuer_url": "https://auth.example.com", "audience": "urn:pulsar:x", "scope": "s"}
    body = json.loads(credentials.contents[CREDENTIALS_FILE])
    assert (body["client_id"], body["client_secret"]) == ("etl", CLIENT_SECRET)
    assert CLIENT_SECRET not in repr(credentials)
    (tmp_path / "out").mkdir()
    paths = credentials.write(tmp_path / "out")
    assert [(path.name, path.stat().st_mode & 0o777) for path in paths] == [(CREDENTIALS_FILE, 0o600)]


def test_the_spec_names_the_shipped_files_and_holds_no_path_or_secret(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"auth_method": "tls", "tls_certificate_file_path": str(pki.client_cert), "tls_private_key_file_path": str(pki.client_key)}
    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_TEST",
        json.dumps({"conn_type": "pulsar", "host": "broker", "extra": {**extra, "tls_trust_certs_file_path": str(pki.ca)}}),
    )
    auth = ShippedCredentials.of(PulsarHook("pulsar_test").config).auth

    assert auth.method == "tls" and set(auth.files) == {TRUST_FILE, CERTIFICATE_FILE, PRIVATE_KEY_FILE}
    assert str(pki.ca.parent) not in json.dumps(auth.to_dict())
    with pytest.raises(ValueError, match="needs the shipped files"):
        type(auth)("tls", (TRUST_FILE,))
    with pytest.raises(ValueError, match="ships no files named"):
        type(auth)("token", ("/etc/passwd",))
    assert type(auth).from_dict(json.loads(json.dumps(auth.to_dict()))) == auth


def test_the_job_finds_a_shipped_file_where_spark_placed_it_or_in_the_directory_it_was_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside Spark (no SparkContext here): the working directory (a YARN container's), then the
    directories given; a copy holding a secret is left readable by its owner only."""
    written = tmp_path / "written"
    written.mkdir()
    (written / CREDENTIALS_FILE).write_text('{"token": "t"}')
    (written / CREDENTIALS_FILE).chmod(0o644)
    (written / TRUST_FILE).write_text("CA")
    (written / TRUST_FILE).chmod(0o644)
    monkeypatch.chdir(tmp_path)

    assert shipped_file(CREDENTIALS_FILE, [str(written)]) == str(written / CREDENTIALS_FILE)
    assert (written / CREDENTIALS_FILE).stat().st_mode & 0o777 == 0o600
    assert shipped_file(TRUST_FILE, [str(written)]) == str(written / TRUST_FILE)
    assert (written / TRUST_FILE).stat().st_mode & 0o777 == 0o644
    (tmp_path / TRUST_FILE).write_text("CA here")
    assert shipped_file(TRUST_FILE, [str(written)]) == str(tmp_path / TRUST_FILE)
    with pytest.raises(FileNotFoundError, match=f"{PRIVATE_KEY_FILE} was not shipped with the job: looked in {tmp_path}, {written}"):
        shipped_file(PRIVATE_KEY_FILE, [str(written)])
    # The driver keeps copies for its report, made after Spark removed its own.
    kept = tmp_path / "kept"
    kept.mkdir()
    JobAuth("token", (CREDENTIALS_FILE, TRUST_FILE)).keep_files(str(kept), [str(written)])
    assert {path.name: path.stat().st_mode & 0o777 for path in kept.iterdir()} == {CREDENTIALS_FILE: 0o600, TRUST_FILE: 0o600}
    assert (kept / TRUST_FILE).read_text() == "CA here"
