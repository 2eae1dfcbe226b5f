"""Factory signatures taken from one declaration of their options: each API's own parameters, in the
declared order, with its own defaults, bound from positional and keyword arguments alike."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from dataclasses import KW_ONLY, dataclass
from typing import Any

import pytest

from airflow_pulsar.client import Client, ProducerOptions
from airflow_pulsar.client import asyncio as pulsar_asyncio
from airflow_pulsar.client.factory_options import Api, asyncio_default, only_in
from airflow_pulsar.client.factory_signature import factory


@dataclass(frozen=True)
class Options:
    size: int = 1
    listener: Any = only_in(Api.SYNC, None)
    batching: bool | None = asyncio_default(None, True)
    pattern: bool = only_in(Api.ASYNCIO, False)
    _: KW_ONLY
    extra: str = "x"


class Blocking:
    @factory(Options, Api.SYNC)
    def make(self, topic: str, options: Options) -> tuple[str, Options]:
        """Makes one."""
        return topic, options


class Awaiting:
    @factory(Options, Api.ASYNCIO)
    async def make(self, topic: str, options: Options) -> tuple[str, Options]:
        return topic, options


def _shape(method: Any) -> list[tuple[str, str, Any]]:
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(method).parameters.values()]


def test_each_api_takes_its_own_options_in_the_declared_order_with_its_own_defaults() -> None:
    empty = inspect.Parameter.empty
    assert _shape(Blocking.make) == [
        ("self", "POSITIONAL_OR_KEYWORD", empty),
        ("topic", "POSITIONAL_OR_KEYWORD", empty),
        ("size", "POSITIONAL_OR_KEYWORD", 1),
        ("listener", "POSITIONAL_OR_KEYWORD", None),
        ("batching", "POSITIONAL_OR_KEYWORD", None),
        ("extra", "KEYWORD_ONLY", "x"),
    ]
    assert _shape(Awaiting.make)[2:] == [
        ("size", "POSITIONAL_OR_KEYWORD", 1),
        ("batching", "POSITIONAL_OR_KEYWORD", True),
        ("pattern", "POSITIONAL_OR_KEYWORD", False),
        ("extra", "KEYWORD_ONLY", "x"),
    ]
    assert (Blocking.make.__name__, Blocking.make.__doc__) == ("make", "Makes one.")
    assert inspect.iscoroutinefunction(Awaiting.make) and not inspect.iscoroutinefunction(Blocking.make)


def test_a_call_builds_the_options_from_positions_keywords_and_the_api_s_defaults() -> None:
    listener = print
    assert Blocking().make("t", 5, listener, extra="y") == ("t", Options(5, listener, None, False, extra="y"))
    assert Blocking().make(topic="t") == ("t", Options())
    assert asyncio.run(Awaiting().make("t", 2, False, True)) == ("t", Options(2, None, False, True))
    assert asyncio.run(Awaiting().make("t")) == ("t", Options(batching=True))
    with pytest.raises(TypeError, match="pattern"):
        Blocking().make("t", pattern=True)
    with pytest.raises(TypeError, match="listener"):
        asyncio.run(Awaiting().make("t", listener=print))
    with pytest.raises(TypeError):
        Blocking().make("t", 1, None, None, "extra is keyword only")


def test_both_clients_take_the_producer_options_declared_once() -> None:
    declared = [option.name for option in dataclasses.fields(ProducerOptions)]
    for method in (Client.create_producer, pulsar_asyncio.Client.create_producer):
        assert [name for name, _, _ in _shape(method)] == ["self", "topic", *declared]
    assert inspect.signature(Client.create_producer).parameters["batching_enabled"].default is None
    assert inspect.signature(pulsar_asyncio.Client.create_producer).parameters["batching_enabled"].default is True
