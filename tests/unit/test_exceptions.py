"""Exceptions and results carry the official client's names and hierarchy."""

from __future__ import annotations

import inspect

import pulsar
import pulsar.exceptions
import pytest

import airflow_pulsar.client as ours
from airflow_pulsar.client import exceptions
from airflow_pulsar.client.exceptions import PulsarException, Result, exception_for

OFFICIAL = {
    name: cls
    for name, cls in vars(pulsar.exceptions).items()
    if inspect.isclass(cls) and issubclass(cls, BaseException)
}


def test_official_exceptions_are_found() -> None:
    # Guards the comparison below against an official package that exposes them differently.
    assert "PulsarException" in OFFICIAL and "Timeout" in OFFICIAL and len(OFFICIAL) > 40


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_exception_has_the_official_name_and_bases(name: str) -> None:
    # A class statement of this module (no module __getattr__), exported by the package too.
    assert inspect.isclass(vars(exceptions).get(name)), f"exceptions.{name} is missing"
    cls = vars(exceptions)[name]
    assert cls.__module__ == exceptions.__name__
    assert name in exceptions.__all__ and name in ours.__all__
    assert getattr(ours, name) is cls
    assert getattr(pulsar, name) is OFFICIAL[name]
    assert [base.__name__ for base in cls.__bases__] == [base.__name__ for base in OFFICIAL[name].__bases__]
    assert cls.__doc__ and "\n" not in cls.__doc__.strip()


def test_no_exception_beyond_the_official_ones() -> None:
    ours_names = {
        name
        for name, cls in vars(exceptions).items()
        if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == exceptions.__name__
    }
    assert ours_names == set(OFFICIAL)


def test_results_have_the_official_names() -> None:
    assert list(Result.__members__) == list(pulsar.Result.__members__)


@pytest.mark.parametrize("result", [r for r in Result if r is not Result.Ok], ids=lambda r: r.name)
def test_each_failed_result_raises_the_class_named_after_it(result: Result) -> None:
    error = exception_for(result, "why")
    assert type(error) is vars(exceptions)[result.name]
    assert isinstance(error, PulsarException)
    assert error.result is result
    assert str(error) == "why"
    assert str(exception_for(result)) == result.name
