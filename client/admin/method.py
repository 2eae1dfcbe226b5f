"""Admin client methods declared once, from their operations, for the blocking and the asyncio client."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Coroutine
from typing import Any, Generic, ParamSpec, Protocol, overload

from .calls import Operation, T

P = ParamSpec("P")

# The two kinds of client, told apart by what ``_run`` returns, so that type checkers give each
# method the operation's result on the one and a coroutine of it on the other.


class _Blocking(Protocol):
    def _run(self, operation: Operation[T], /) -> T: ...


class _Awaiting(Protocol):
    def _run(self, operation: Operation[T], /) -> Coroutine[Any, Any, T]: ...


class AdminMethod(Generic[P, T]):
    """A public method of both admin clients, made from the operation that is its body.

    The method has the operation's parameters and docstring; it hands the operation to the
    client's ``_run``, which does the I/O. On a client whose ``_run`` is a coroutine function
    (:class:`AsyncPulsarAdmin`) the method is a coroutine function too, so it is awaited.
    """

    def __init__(self, operation: Callable[P, Operation[T]]) -> None:
        signature = inspect.signature(operation, eval_str=True)
        _, _, result = typing.get_args(signature.return_annotation)
        if result is type(None):  # as a plain ``-> None`` reads
            result = None
        client = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        method_signature = signature.replace(parameters=[client, *signature.parameters.values()], return_annotation=result)

        def blocking(admin: Any, *args: Any, **kwargs: Any) -> Any:
            return admin._run(operation(*args, **kwargs))

        async def awaiting(admin: Any, *args: Any, **kwargs: Any) -> Any:
            return await admin._run(operation(*args, **kwargs))

        for function in (blocking, awaiting):
            function.__doc__ = operation.__doc__
            function.__signature__ = method_signature  # type: ignore[union-attr]
        self._blocking, self._awaiting = blocking, awaiting

    def __set_name__(self, owner: type[Any], name: str) -> None:
        for function in (self._blocking, self._awaiting):
            function.__name__ = name
            function.__qualname__ = f"{owner.__qualname__}.{name}"
            function.__module__ = owner.__module__

    @overload
    def __get__(self, admin: None, owner: type[Any]) -> Callable[..., Any]: ...

    @overload
    def __get__(self, admin: _Awaiting, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, admin: _Blocking, owner: type[Any]) -> Callable[P, T]: ...

    def __get__(self, admin: Any, owner: type[Any]) -> Callable[..., Any]:
        function = self._awaiting if inspect.iscoroutinefunction(owner._run) else self._blocking
        return function if admin is None else types.MethodType(function, admin)
