"""The client page's example (docs/client.md): a client given a broker's admin (HTTP) URL instead
of its ``pulsar://`` URL looks topics up over REST, then produces and consumes over the binary
protocol."""

from __future__ import annotations

from airflow_pulsar.client import AuthenticationToken, Client


def round_trip(web_service_url: str, topic: str, token: str | None = None) -> bytes:
    """Send one message to ``topic`` and receive it, through ``web_service_url``
    (``http://host:8080`` or ``https://host:8443``)."""
    authentication = AuthenticationToken(token) if token else None
    with Client(web_service_url, authentication=authentication) as client:
        consumer = client.subscribe(topic, "example")
        client.create_producer(topic).send(b"hello over an HTTP lookup")
        return consumer.receive(timeout_millis=10_000).data()
