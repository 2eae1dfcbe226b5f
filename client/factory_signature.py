"""A factory method's signature, taken from the declaration of its options.

A factory is written with its leading arguments and one options object, and decorated with the
options' class and its API::

    @factory(ProducerOptions, Api.SYNC)
    def create_producer(self, topic: str, options: ProducerOptions) -> Producer: ...

Callers then pass the leading arguments and every option of that API, positionally or by
keyword, in the declared order: ``inspect.signature`` shows exactly that (the official
signature, the drop-in contract), and the call builds the options object from what it was
given, the API's defaults filling the rest. Type checkers see the leading arguments followed by
the options class's own parameters (all of them: an option of the other API only is refused when
called, as the official module refuses it).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from .factory_options import Api, api_default, in_api

__all__ = ["factory"]

P = ParamSpec("P")
Options = TypeVar("Options")
S = TypeVar("S")
A = TypeVar("A")
B = TypeVar("B")
R = TypeVar("R")


class factory(Generic[P, Options]):  # noqa: N801 (a decorator, named as one)
    """Decorates a factory method ``(self, *leading, options)`` of ``api`` with the signature its options declare."""

    def __init__(self, options: Callable[P, Options], api: Api) -> None:
        self._options = options
        self._api = api

    @overload
    def __call__(self, method: Callable[[S, A, Options], R]) -> Callable[Concatenate[S, A, P], R]: ...

    @overload
    def __call__(self, method: Callable[[S, A, B, Options], R]) -> Callable[Concatenate[S, A, B, P], R]: ...

    def __call__(self, method: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(method)
        leading = list(own.parameters.values())[:-1]  # self and the leading arguments
        declared = [
            inspect.Parameter(
                option.name,
                inspect.Parameter.KEYWORD_ONLY if option.kw_only else inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=api_default(option, self._api),
                annotation=option.type,
            )
            for option in dataclasses.fields(self._options)  # type: ignore[arg-type]
            if in_api(option, self._api)
        ]
        signature = own.replace(parameters=leading + declared)
        leading_names = [parameter.name for parameter in leading]
        option_names = [parameter.name for parameter in declared]
        build: Callable[..., Options] = self._options

        def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
            """The leading arguments and the options object of one call."""
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            return [given[name] for name in leading_names] + [build(**{name: given[name] for name in option_names})]

        if inspect.iscoroutinefunction(method):

            async def call_async(*args: Any, **kwargs: Any) -> Any:
                return await method(*arguments(args, kwargs))

            wrapper: Callable[..., Any] = call_async
        else:

            def call(*args: Any, **kwargs: Any) -> Any:
                return method(*arguments(args, kwargs))

            wrapper = call
        # The method's name and docstring, not its __wrapped__: its own signature is not the one callers use.
        functools.update_wrapper(wrapper, method, updated=())
        del wrapper.__wrapped__  # type: ignore[attr-defined]
        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        return wrapper
