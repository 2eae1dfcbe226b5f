"""Templated operator and sensor arguments: checked when the DAG is parsed, or once rendered.

A templated field may hold a Jinja template, a TaskFlow output (``XComArg``), or a collection
holding either; Airflow turns it into a value just before the task runs (for a mapped task, after
``.expand()`` has picked its value). Such a value cannot be checked while the DAG is parsed, so it
is kept as written and checked after rendering, by the same function and with the same message a
static value gets at parse time. A static value is checked at once, so a bad DAG fails to parse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.definitions._internal.mixins import ResolveMixin

from airflow_pulsar import arguments

# A check of one argument: ``check(value, name)`` returns the value to keep or raises ValueError naming ``name``.
Check = Callable[[Any, str], Any]


def is_rendered_later(value: Any) -> bool:
    """Whether Airflow replaces ``value`` before the task runs: a Jinja template, a runtime-resolved
    value (``XComArg``, a mapped argument), or a list, tuple, set or dict holding one."""
    if isinstance(value, ResolveMixin) or arguments.is_template(value):
        return True
    if isinstance(value, Mapping):
        return any(is_rendered_later(item) for item in (*value.keys(), *value.values()))
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(is_rendered_later(item) for item in value)
    return False


class ArgumentChecks:
    """Where DAG-author arguments are checked: here at once; :class:`TemplatedArguments` defers the
    templated ones of an operator or sensor until they are rendered."""

    def _argument(self, name: str, value: Any, check: Check, *, keep_as_written: bool = False) -> Any:
        """``check(value, name)``'s result (``value`` itself when ``keep_as_written``)."""
        checked = check(value, name)
        return value if keep_as_written else checked


class TemplatedArguments(ArgumentChecks, BaseOperator):
    """Base of the provider's operators and sensors: templated values are checked once rendered.

    Declare a field with ``self.field = self._argument("field", value, check)`` in ``__init__``.
    ``keep_as_written`` keeps the value as the DAG author wrote it (so the rendered-template view
    shows it so) and only checks it; ``execute`` then reads it with the same check.
    """

    def __init__(self, **kwargs: Any) -> None:
        # Defined so that a sensor's __init__ reaches BaseSensorOperator's: Airflow wraps each
        # class's own __init__, an inherited one included, as that class's.
        super().__init__(**kwargs)

    def _argument(self, name: str, value: Any, check: Check, *, keep_as_written: bool = False) -> Any:
        if not is_rendered_later(value):
            return super()._argument(name, value, check, keep_as_written=keep_as_written)
        pending: dict[str, tuple[Check, bool]] = self.__dict__.setdefault("_checks_after_rendering", {})
        pending[name] = (check, keep_as_written)
        return value

    def _do_render_template_fields(
        self, parent: Any, template_fields: Iterable[str], context: Any, jinja_env: Any, seen_oids: set[int]
    ) -> None:
        # Every rendering of this operator comes through here, a mapped task's included (after
        # .expand() gave its values), where render_template_fields is not called.
        super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
        if parent is not self:
            return
        for name, (check, keep_as_written) in self.__dict__.get("_checks_after_rendering", {}).items():
            value = getattr(self, name)
            checked = check(value, name)
            if not keep_as_written:
                setattr(self, name, checked)
