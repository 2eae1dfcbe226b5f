"""Checks of DAG-author arguments, run when an operator, sensor or trigger is built (DAG parse time).

A bad DAG fails while it is parsed, with a message naming the argument, instead of when a task
runs. Nothing here connects to Pulsar. Dotted paths are checked for shape (functions the triggerer
runs are also located, which imports only their parent packages) and imported with
:func:`resolve_function` when the task (or trigger) runs.
Each check takes the value as the task will use it: templated values are checked once rendered
(see :mod:`airflow_pulsar.templated_arguments`), by the same functions.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from airflow_pulsar.client import ConsumerType, InitialPosition, MessageId, ProducerOptions
from airflow_pulsar.client.topic_name import InvalidTopicNameError, TopicName

E = TypeVar("E", bound=enum.Enum)

# Subscription types by the names DAG authors write; Pulsar spells Key_Shared with an underscore.
_CONSUMER_TYPE_ALIASES = {"key_shared": ConsumerType.KeyShared}


def is_template(value: Any) -> bool:
    """Whether ``value`` is a string Airflow will render with Jinja before the task runs."""
    return isinstance(value, str) and ("{{" in value or "{%" in value or "{#" in value)


def enum_member(kind: type[E], value: Any, name: str) -> E:
    """An enum member from itself, its name (any case) or its number; the error lists the names."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        for member in kind:
            if member.name.lower() == value.strip().lower():
                return member
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return kind(value)
        except ValueError:
            pass
    elif isinstance(value, enum.Enum):  # the official pulsar-client's enums: same names
        return enum_member(kind, value.name, name)
    names = ", ".join(member.name for member in kind)
    raise ValueError(f"{name} must be one of {names}, got {value!r}")


def consumer_type(value: Any, name: str = "subscription_type") -> ConsumerType:
    """A subscription type: Exclusive, Shared, Failover or KeyShared (also Key_Shared)."""
    if isinstance(value, str) and value.strip().lower() in _CONSUMER_TYPE_ALIASES:
        return _CONSUMER_TYPE_ALIASES[value.strip().lower()]
    return enum_member(ConsumerType, value, name)


def initial_position(value: Any, name: str = "initial_position") -> InitialPosition:
    """Where a new subscription starts: Earliest or Latest."""
    return enum_member(InitialPosition, value, name)


# Where a subscription is placed: the start or end of the topic, a message id, or a publish time
# (ms since the epoch). InitialPosition is an IntEnum: tell it apart from a time before testing int.
SubscriptionPosition = InitialPosition | MessageId | int
_MESSAGE_ID_TEXT = re.compile(r"-?\d+:-?\d+(:-?\d+){0,2}")


def subscription_position(value: Any, name: str) -> SubscriptionPosition:
    """A subscription position: ``"earliest"``/``"latest"`` (or InitialPosition), a message id
    (MessageId, the official client's, or ``"ledger:entry[:partition[:batch]]"``), or a publish
    time: a datetime (naive means UTC), an ISO 8601 string, or ms since the epoch."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("earliest", "latest"):
            return initial_position(text, name)
        if _MESSAGE_ID_TEXT.fullmatch(text):
            ledger, entry, partition, batch = ([int(part) for part in text.split(":")] + [-1, -1])[:4]
            return MessageId(partition, ledger, entry, batch)
        if text.isdigit():  # ms, as a template renders a number
            return int(text)
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            pass
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return round(moment.timestamp() * 1000)
    if isinstance(value, enum.Enum):  # before int: InitialPosition is an IntEnum
        return initial_position(value, name)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if callable(getattr(value, "ledger_id", None)):  # an official pulsar.MessageId
        try:
            return MessageId.wrap(value)
        except ValueError:
            pass
    raise ValueError(
        f"{name} must be 'earliest', 'latest', a message id (MessageId or 'ledger:entry[:partition[:batch]]') "
        f"or a publish time (datetime, ISO 8601 text or ms since the epoch), got {value!r}"
    )


def topic_list(value: Any, name: str = "topics") -> list[str]:
    """One topic or a non-empty list of them."""
    topics = [value] if isinstance(value, str) else value
    if not isinstance(topics, Sequence) or isinstance(topics, (bytes, bytearray)) or not topics:
        raise ValueError(f"{name} must be a topic name or a non-empty list of topic names, got {value!r}")
    return [topic_name(topic, name) for topic in topics]


def topic_name(value: Any, name: str = "topic") -> str:
    """A topic name (short or ``persistent://tenant/ns/topic``)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty topic name, got {value!r}")
    try:
        TopicName.parse(value)
    except InvalidTopicNameError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return value


# A pattern subscription lists the topics of one namespace, so the namespace is written literally.
_PATTERN_NAMESPACE = re.compile(r"((non-)?persistent://)?[-=:.\w]+/[-=:.\w]+/.+")


def topics_pattern(value: Any, name: str = "topics_pattern") -> str:
    """A regular expression of full topic names in one namespace (a ``re.Pattern`` or its text),
    e.g. ``persistent://public/default/orders-.*``; returned as text, which triggers can serialize."""
    text = value.pattern if isinstance(value, re.Pattern) else value
    if not isinstance(text, str) or not _PATTERN_NAMESPACE.fullmatch(text.strip()):
        raise ValueError(
            f"{name} must be a regular expression of topic names that spells out its tenant and namespace, "
            f"like 'persistent://public/default/orders-.*', got {value!r}"
        )
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"{name} {text!r} is not a valid regular expression: {exc}") from None
    return text.strip()


def topic_source(topics: Any, pattern: Any) -> tuple[Any, Any]:
    """``(topics, topics_pattern)`` as given, exactly one of them set; a ``re.Pattern`` given as
    ``topics`` is taken as ``topics_pattern``."""
    if isinstance(topics, re.Pattern):
        if pattern is not None:
            raise ValueError("give a re.Pattern as topics or a topics_pattern, not both")
        topics, pattern = None, topics
    if (topics is None) == (pattern is None):
        raise ValueError("give exactly one of topics (a topic, a list of topics or a re.Pattern) or topics_pattern")
    return topics, pattern


def subscribed_topics(topics: Sequence[str], pattern: str | None) -> str | list[str] | re.Pattern[str]:
    """What ``Client.subscribe`` takes for the topics, or the pattern, of a checked topic source."""
    if pattern is not None:
        return re.compile(pattern)
    return topics[0] if len(topics) == 1 else list(topics)


def non_empty_str(value: Any, name: str) -> str:
    """A non-empty string (a subscription or connection id)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


@overload
def positive_int(value: Any, name: str, *, optional: Literal[False] = False, minimum: int = 1) -> int: ...
@overload
def positive_int(value: Any, name: str, *, optional: bool, minimum: int = 1) -> int | None: ...
def positive_int(value: Any, name: str, *, optional: bool = False, minimum: int = 1) -> int | None:
    """An int >= ``minimum`` (None allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{' or None' if optional else ''}, got {value!r}")
    return value


@overload
def seconds(value: Any, name: str, *, optional: Literal[False] = False, allow_zero: bool = False) -> float: ...
@overload
def seconds(value: Any, name: str, *, optional: bool, allow_zero: bool = False) -> float | None: ...
def seconds(value: Any, name: str, *, optional: bool = False, allow_zero: bool = False) -> float | None:
    """A duration in seconds from a number or a ``timedelta``; positive (or zero when allowed)."""
    if value is None and optional:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not allow_zero):
        kind = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{name} must be {kind} number of seconds or a timedelta, got {value!r}")
    return float(value)


def apply_functions(apply_function: Any, apply_function_batch: Any) -> tuple[Any, Any]:
    """The per-message and the per-batch function of an operator that consumes, exactly one of them
    given (the other None), each checked as :func:`function_reference`."""
    if (apply_function is None) == (apply_function_batch is None):
        raise ValueError("give exactly one of apply_function or apply_function_batch")
    return (
        function_reference(apply_function, "apply_function", optional=True),
        function_reference(apply_function_batch, "apply_function_batch", optional=True),
    )


def function_reference(value: Any, name: str, *, optional: bool = False, allow_callable: bool = True) -> Any:
    """A user function: a callable (when allowed) or a dotted path ``package.module.function``.

    Triggers need the dotted path, since they are rebuilt from plain arguments in the triggerer.
    """
    if value is None and optional:
        return None
    if allow_callable and callable(value):
        return value
    if isinstance(value, str) and _is_dotted_path(value):
        return value
    expected = "a callable or a dotted path" if allow_callable else "a dotted path"
    raise ValueError(f"{name} must be {expected} like 'package.module.function', got {value!r}")


def triggerer_function(value: str | None, name: str, *, must_be_found: bool) -> str | None:
    """Refuse, at parse time, a function that Airflow's triggerer will not be able to import.

    The dag-processor and the workers put the DAGs folder on the import path; the triggerer does
    not. A module found in the DAGs folder therefore imports while the DAG is parsed and fails in
    the triggerer, so it is refused here. ``must_be_found`` also refuses a module that cannot be
    found at all (a sensor is only built where the DAG file is parsed); a trigger is also rebuilt
    in the triggerer itself, where a missing module is reported by the trigger when it runs.
    """
    if value is None or is_template(value):
        return value
    module_name = value.rpartition(".")[0]
    try:
        spec = importlib.util.find_spec(module_name)
    except ImportError:  # a parent package is missing
        spec = None
    if spec is None:
        if must_be_found:
            raise ValueError(f"{name} {value!r}: no module named {module_name!r} can be imported")
        return value
    origin = spec.origin or next(iter(spec.submodule_search_locations or ()), None)
    dags_folder = _dags_folder()
    if origin and dags_folder and Path(origin).resolve().is_relative_to(dags_folder):
        raise ValueError(
            f"{name} {value!r} is defined in the DAGs folder ({origin}), which Airflow's triggerer does not "
            "import from; move it into an installed package or the plugins folder"
        )
    return value


def _dags_folder() -> Path | None:
    from airflow.configuration import conf

    folder = conf.get("core", "dags_folder", fallback=None)
    return Path(folder).expanduser().resolve() if folder else None


def _is_dotted_path(value: str) -> bool:
    parts = value.split(".")
    return len(parts) >= 2 and all(part.isidentifier() for part in parts)


def function_args(value: Any, name: str) -> Sequence[Any]:
    """The extra positional arguments of a user function: a list or tuple (None: none)."""
    value = () if value is None else value
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a list or tuple, got {value!r}")
    return value


def function_kwargs(value: Any, name: str) -> dict[str, Any]:
    """The extra keyword arguments of a user function: a dict with str keys (None: none)."""
    value = {} if value is None else value
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"{name} must be a dict with str keys, got {value!r}")
    return dict(value)


def function_arguments(args: Any, kwargs: Any, prefix: str) -> tuple[Sequence[Any], dict[str, Any]]:
    """The extra positional and keyword arguments of a user function."""
    return function_args(args, f"{prefix}_args"), function_kwargs(kwargs, f"{prefix}_kwargs")


def flag(value: Any, name: str) -> bool:
    """A bool setting (``True``/``False``, not merely truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def resolve_function(value: Any, name: str) -> Callable[..., Any]:
    """The callable itself, or the object a dotted path names (imported now, when the task runs)."""
    if callable(value):
        return value
    from airflow.sdk.module_loading import import_string

    try:
        function = import_string(value)
    except ImportError as exc:
        raise ImportError(f"{name} {value!r} cannot be imported: {exc}") from exc
    if not callable(function):
        raise TypeError(f"{name} {value!r} names a {type(function).__name__}, not a callable")
    return function


# Producer settings whose values are enums (those whose default is a member): DAG authors may
# write the member names ("LZ4").
_PRODUCER_ENUMS = {
    option.name: type(option.default) for option in dataclasses.fields(ProducerOptions) if isinstance(option.default, enum.Enum)
}


def producer_settings(settings: Mapping[str, Any] | None, name: str = "producer_settings") -> dict[str, Any]:
    """``create_producer`` keyword arguments, validated by the client's own rules (no connection)."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise ValueError(f"{name} must be a dict of create_producer keyword arguments, got {settings!r}")
    result = dict(settings)
    for key, kind in _PRODUCER_ENUMS.items():
        if isinstance(result.get(key), str):
            result[key] = enum_member(kind, result[key], f"{name}[{key!r}]")
    try:
        ProducerOptions.from_settings(**result).check()
    except Exception as exc:  # ValueError, or TypeError for unknown names
        raise ValueError(f"{name}: {exc}") from None
    return result
