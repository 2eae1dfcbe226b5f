"""The blocking and the asyncio admin clients offer the same methods, with the same signatures,
and send the same requests for them."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from airflow_pulsar.client.admin import AdminNotFoundError, AsyncPulsarAdmin, PulsarAdmin

# asyncio's name for close; the asyncio client has close as well.
ASYNC_ONLY = {"aclose": "close"}


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    return {name: getattr(cls, name) for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


SYNC = public_methods(PulsarAdmin)
ASYNC = public_methods(AsyncPulsarAdmin)


def test_both_clients_have_the_same_methods() -> None:
    assert sorted(SYNC) == sorted(name for name in ASYNC if name not in ASYNC_ONLY)
    assert len(SYNC) > 20


@pytest.mark.parametrize("name", sorted(ASYNC))
def test_a_method_has_the_same_signature_in_both_clients(name: str) -> None:
    method = SYNC[ASYNC_ONLY.get(name, name)]
    assert inspect.signature(ASYNC[name], eval_str=True) == inspect.signature(method, eval_str=True)
    assert ASYNC[name].__doc__ and ASYNC[name].__doc__ == method.__doc__
    assert inspect.iscoroutinefunction(ASYNC[name]) and not inspect.iscoroutinefunction(method)


def stats_broker(requests: list[tuple[str, str]]) -> httpx.MockTransport:
    """Two partitions with subscription ``s``; any other path is missing."""

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append((request.method, str(request.url)))
        if request.url.path == "/admin/v2/persistent/public/default/t/partitions":
            return httpx.Response(200, json={"partitions": 2})
        if request.url.path == "/admin/v2/persistent/public/default/t/partitioned-stats":
            parts = {f"persistent://public/default/t-partition-{i}": {"subscriptions": {"s": {"msgBacklog": i}}} for i in (1, 0)}
            return httpx.Response(200, json={"subscriptions": {"s": {"msgBacklog": 1}}, "partitions": parts})
        return httpx.Response(404, json={"reason": "Topic not found"})

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("name", "args"),
    [("backlog", ("t", "s")), ("partition_count", ("missing",)), ("topic_stats", ("missing",))],
)
def test_both_clients_send_the_same_requests_and_give_the_same_outcome(name: str, args: tuple[Any, ...]) -> None:
    sync_requests: list[tuple[str, str]] = []
    with PulsarAdmin("http://broker:8080") as admin:
        admin._http = httpx.Client(base_url="http://broker:8080", transport=stats_broker(sync_requests))
        try:
            sync_outcome = getattr(admin, name)(*args)
        except AdminNotFoundError as error:
            sync_outcome = repr(error)

    async def run_async(requests: list[tuple[str, str]]) -> Any:
        async with AsyncPulsarAdmin("http://broker:8080") as async_admin:
            async_admin._http = httpx.AsyncClient(base_url="http://broker:8080", transport=stats_broker(requests))
            try:
                return await getattr(async_admin, name)(*args)
            except AdminNotFoundError as error:
                return repr(error)

    async_requests: list[tuple[str, str]] = []
    assert asyncio.run(run_async(async_requests)) == sync_outcome
    assert async_requests == sync_requests and sync_requests
