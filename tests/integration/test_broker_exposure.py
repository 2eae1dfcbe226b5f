"""The embedded broker's surface beyond its clients: web pages in the user's browser, the rest
of the network, and the other users of the machine.

On the embedded broker only (``broker_factory``): Apache Pulsar's admin API has no browser
guard, and its data lives in BookKeeper, not in a data dir of the broker's.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.broker.token_keys import create_secret_key
from airflow_pulsar.broker.tokens import create_token
from airflow_pulsar.client import AuthenticationToken, Client

MakeBroker = Callable[..., BrokerProcess]


def _backlog(broker: BrokerProcess, topic: str) -> int:
    return int(broker.topic_stats(topic)["subscriptions"]["sub"]["msgBacklog"])


def _topic_with_backlog(broker: BrokerProcess, topic: str, messages: int = 3) -> None:
    assert broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic}/subscription/sub").status_code == 204
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic)
        for i in range(messages):
            producer.send(f"m{i}".encode())
    assert _backlog(broker, topic) == messages


def test_a_page_of_another_site_cannot_skip_or_reset(broker_factory: MakeBroker) -> None:
    broker = broker_factory()
    _topic_with_backlog(broker, "guarded")
    base = "/admin/v2/persistent/public/default/guarded/subscription/sub"
    for path in (f"{base}/skip_all", f"{base}/resetcursor/0"):
        # What a form or fetch() of a page at evil.example sends: no body, so no CORS preflight.
        for origin in ("http://evil.example", "null", f"{broker.web_url}.evil.example", broker.web_url.replace("http:", "https:")):
            refused = broker.admin("POST", path, headers={"Origin": origin})
            assert refused.status_code == 403, (origin, refused.text)
            assert refused.json()["reason"].startswith(f"cross-origin request refused: Origin {origin} is not")
        assert _backlog(broker, "guarded") == 3
    # The API's own origin (a page it served, were there one) and clients sending none are served.
    assert broker.admin("POST", f"{base}/skip_all", headers={"Origin": broker.web_url}).status_code == 204
    assert _backlog(broker, "guarded") == 0
    assert broker.admin("POST", f"{base}/resetcursor/0").status_code == 204
    assert _backlog(broker, "guarded") == 3


def test_a_rebound_name_is_refused_on_loopback(broker_factory: MakeBroker) -> None:
    broker = broker_factory()
    path = "/admin/v2/persistent/public/default"
    port = broker.http_port
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
        # A DNS-rebinding page: its own name re-pointed at 127.0.0.1, so its requests are same-origin.
        refused = broker.admin("GET", path, headers={"Host": host, "Origin": f"http://{host}"})
        assert refused.status_code == 421, (host, refused.text)
        reason = refused.json()["reason"]
        assert reason.startswith(f"Host {host!r} is not a name of this broker") and "DNS-rebinding" in reason
    for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", "127.0.0.1", f"[::1]:{port}", "[::1]", "LOCALHOST:1234"):
        assert broker.admin("GET", path, headers={"Host": host}).status_code == 200, host


def test_listening_beyond_loopback_without_authentication_warns_once(broker_factory: MakeBroker) -> None:
    # Ports 0: picked by the kernel, open for the test's few seconds only.
    broker = broker_factory("--host", "0.0.0.0")
    warnings = [line for line in broker.log_path.read_text().splitlines() if " WARNING " in line]
    assert len(warnings) == 1, warnings
    assert "listening on 0.0.0.0 (not loopback) without authentication" in warnings[0]
    assert f"ports {broker.port} and {broker.http_port} can read, write and delete every topic" in warnings[0]
    # Names are not checked off loopback (the machine's names are many); origins still are.
    url = f"http://127.0.0.1:{broker.http_port}/admin/v2/persistent/public/default"
    assert httpx.get(url, headers={"Host": "broker.example"}).status_code == 200
    assert httpx.get(url, headers={"Host": "broker.example", "Origin": "http://evil.example"}).status_code == 403


def test_a_loopback_broker_does_not_warn(broker_factory: MakeBroker) -> None:
    broker = broker_factory()
    assert " WARNING " not in broker.log_path.read_text()


def test_data_dir_and_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    data_dir = tmp_path / "new" / "data"
    previous = os.umask(0)  # the child inherits it: everything it creates would be world-writable
    try:
        # The broker's own --data-dir, after the helper's, so that the broker creates it.
        broker = BrokerProcess(tmp_path / "log", "--data-dir", str(data_dir)).start()
    finally:
        os.umask(previous)
    try:
        _topic_with_backlog(broker, "private")
        modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in (data_dir, *data_dir.iterdir())}
    finally:
        broker.stop()
    assert {"broker.sqlite", "broker.sqlite-wal", "broker.sqlite-shm", "broker.lock"} <= modes.keys()
    assert modes == {name: 0o700 if name == "data" else 0o600 for name in modes}


def test_files_of_an_older_broker_are_narrowed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    os.chmod(data_dir, 0o755)
    (data_dir / "broker.sqlite").touch(mode=0o644)
    os.chmod(data_dir / "broker.sqlite", 0o644)
    broker = BrokerProcess(data_dir).start()
    try:
        assert stat.S_IMODE((data_dir / "broker.sqlite").stat().st_mode) == 0o600
        # A directory it did not create keeps its mode: it may be shared with other things.
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o755
        log = broker.log_path.read_text()
    finally:
        broker.stop()
    assert f"data dir {data_dir} is open to other users (mode 0o755)" in log and f"chmod 700 {data_dir}" in log


def test_secret_key_from_the_environment_serves_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = create_secret_key()
    monkeypatch.setenv("PULSAR_TEST_SECRET_KEY", base64.b64encode(key).decode())  # the child inherits it
    broker = BrokerProcess(tmp_path / "data", "--token-secret-file", "env:PULSAR_TEST_SECRET_KEY").start()
    try:
        headers = {"Authorization": f"Bearer {create_token(key, 'admin')}"}
        assert broker.admin("GET", "/admin/v2/persistent/public/default", headers=headers).status_code == 200
        assert broker.admin("GET", "/admin/v2/persistent/public/default").status_code == 401
        with Client(broker.service_url, authentication=AuthenticationToken(create_token(key, "app"))) as client:
            assert client.create_producer("from-env").send(b"ok") is not None
    finally:
        broker.stop()
