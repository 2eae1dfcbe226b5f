"""The Pulsar page's refresh cache (airflow_pulsar/ui/cache.py): requests that arrive together
share one read, a fresh result is served again, a stale one is read anew, keys are apart."""

from __future__ import annotations

import asyncio

from airflow_pulsar.ui.cache import RefreshCache


def test_concurrent_requests_share_one_read_and_a_stale_result_is_read_again() -> None:
    reads: list[str] = []

    async def read(key: str) -> str:
        reads.append(key)
        label = f"{key}#{len(reads)}"
        await asyncio.sleep(0.05)
        return label

    async def scenario() -> None:
        cache: RefreshCache[str] = RefreshCache(ttl=0.3)
        together = await asyncio.gather(*(cache.get("a", lambda: read("a")) for _ in range(5)), cache.get("b", lambda: read("b")))
        assert together == ["a#1"] * 5 + ["b#2"]
        assert await cache.get("a", lambda: read("a")) == "a#1"  # still fresh
        await asyncio.sleep(0.35)
        assert await cache.get("a", lambda: read("a")) == "a#3"
        assert reads == ["a", "b", "a"]

    asyncio.run(scenario())


def test_a_failed_read_is_not_kept_past_its_time() -> None:
    attempts = 0

    async def read() -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError("unreachable")
        return "read"

    async def scenario() -> None:
        cache: RefreshCache[str] = RefreshCache(ttl=0.1)
        try:
            await cache.get("a", read)
        except ConnectionError:
            pass
        await asyncio.sleep(0.15)
        assert await cache.get("a", read) == "read"

    asyncio.run(scenario())
