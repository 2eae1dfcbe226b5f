"""AutoClusterFailover between two embedded brokers, and Ctrl-C during a blocking call.

The failover test kills the primary: the client's probe finds it gone, switches to the secondary,
and a producer created on the primary goes on producing there.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

from airflow_pulsar.client import AutoClusterFailover, Client, MessageId, ServiceInfo
from airflow_pulsar.client.failover import ClusterFailoverProvider
from tests.support.polling import wait_until


def test_the_client_fails_over_to_the_secondary_and_produces_there(broker_factory: Callable[..., Any]) -> None:
    primary, secondary = broker_factory(), broker_factory()
    failover = AutoClusterFailover(ServiceInfo(primary.service_url), [ServiceInfo(secondary.service_url)], check_interval_ms=200)
    topic = "persistent://public/default/failover"
    with Client(failover, operation_timeout_seconds=10) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"on the primary")
        primary.kill()
        wait_until(lambda: client.get_service_info().service_url == secondary.service_url, 10)
        producer.send(b"on the secondary")
    with Client(secondary.service_url) as check, check.create_reader(topic, MessageId.earliest) as reader:
        assert reader.read_next(timeout_millis=5000).data() == b"on the secondary"


def test_failover_and_switch_back_follow_the_thresholds() -> None:
    """The provider's decisions, with the reachability of each cluster set by the test."""
    primary, secondary = ServiceInfo("pulsar://primary:6650"), ServiceInfo("pulsar://secondary:6650")
    up = {primary.service_url: True, secondary.service_url: True}
    switches: list[str] = []
    provider = ClusterFailoverProvider(
        AutoClusterFailover(primary, [secondary], failover_threshold=2, switch_back_threshold=2),
        probe=lambda info: up[info.service_url],
    )
    provider.initialize(lambda info: switches.append(info.service_url))  # probes every 5 s: not within this test
    up[primary.service_url] = False
    provider.check()
    assert switches == []  # one failure of two
    provider.check()
    assert switches == [secondary.service_url]
    up[primary.service_url] = True
    provider.check()
    assert switches == [secondary.service_url]  # one good probe of two
    provider.check()
    assert switches == [secondary.service_url, primary.service_url]
    provider.close()


def test_ctrl_c_interrupts_a_blocking_receive_with_interrupted(broker: Any, topic_name: str) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from airflow_pulsar.client import Client, Interrupted
        with Client({broker.service_url!r}) as client:
            consumer = client.subscribe({topic_name!r}, "sub")
            print("receiving", flush=True)
            try:
                consumer.receive()
            except Interrupted as exc:
                print("Interrupted", type(exc.__cause__).__name__, flush=True)
                sys.exit(0)
        sys.exit(3)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        # Ctrl-C as in a terminal: a test run started as a background job passes SIGINT on ignored,
        # and Python only turns SIGINT into KeyboardInterrupt when it starts with the default action.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "receiving"
        time.sleep(0.5)  # into the wait of receive()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0 and out.strip() == "Interrupted KeyboardInterrupt"
