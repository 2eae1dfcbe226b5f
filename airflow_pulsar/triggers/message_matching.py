"""Which messages fire a trigger, and the JSON payload their events carry.

Shared by the await-message trigger (one event, for a sensor) and the message event trigger
(one event per message, for asset watchers). A user function decides: it is called with the
``Message`` and its extra arguments, and a truthy return value fires. Events carry
``{"message": message_payload(...), "result": <the returned value>}``; the returned value must be
JSON-serializable, since the event is stored in Airflow's database.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow_pulsar import arguments, times
from airflow_pulsar.client import Message


def message_payload(message: Message) -> dict[str, Any]:
    """A message as plain JSON: topic, id, key, properties, timestamps and value.

    ``value`` is the payload as UTF-8 text; a payload that is not valid UTF-8 is given as
    ``value_base64`` instead (and ``value`` is None). Timestamps are milliseconds since the epoch,
    and ``publish_time`` and ``event_time`` the same instants as ISO 8601 UTC text (``pendulum.parse``
    reads them back); the event ones are None when the producer set none.
    """
    data = message.data()
    try:
        value, value_base64 = data.decode("utf-8"), None
    except UnicodeDecodeError:
        value, value_base64 = None, base64.b64encode(data).decode("ascii")
    payload: dict[str, Any] = {
        "topic": message.topic_name(),
        "message_id": str(message.message_id()),
        "key": message.partition_key() or None,
        "properties": message.properties(),
        "publish_timestamp": message.publish_timestamp(),
        "event_timestamp": message.event_timestamp() or None,
        "publish_time": times.iso_time(message.publish_timestamp()),
        "event_time": times.iso_time(message.event_timestamp()),
        "redelivery_count": message.redelivery_count(),
        "value": value,
    }
    if value_base64 is not None:
        payload["value_base64"] = value_base64
    return payload


class MessageMatcher:
    """Applies the user function (a dotted path, imported on first use) to messages.

    :param apply_function: Dotted path of ``function(message, *args, **kwargs)``; None: every message matches.
    :param apply_function_args: Extra positional arguments.
    :param apply_function_kwargs: Extra keyword arguments.
    """

    def __init__(
        self,
        apply_function: str | None,
        apply_function_args: Sequence[Any] = (),
        apply_function_kwargs: dict[str, Any] | None = None,
    ):
        self.apply_function = apply_function
        self.args = tuple(apply_function_args)
        self.kwargs = dict(apply_function_kwargs or {})

    @cached_property
    def _function(self) -> Any:
        return arguments.resolve_function(self.apply_function, "apply_function")

    def resolve(self) -> None:
        """Import the function now; ImportError (naming this process's import path) or TypeError if it cannot be."""
        if self.apply_function is None:
            return
        try:
            _ = self._function  # touching the cached_property imports the function
        except ImportError as exc:
            raise ImportError(
                f"{exc}. Functions that run in the triggerer must be importable there (an installed package or "
                f"Airflow's plugins folder); this process imports from: {os.pathsep.join(sys.path)}"
            ) from exc

    def event_payload(self, message: Message) -> dict[str, Any] | None:
        """The event payload if the message matches, else None; the function's errors propagate."""
        if self.apply_function is None:
            result: Any = True
        else:
            result = self._function(message, *self.args, **self.kwargs)
            if not result:
                return None
        try:
            json.dumps(result)
        except (TypeError, ValueError):
            raise TypeError(
                f"apply_function {self.apply_function!r} returned a {type(result).__name__}, which is not "
                "JSON-serializable; return True or plain data (str, number, list, dict)"
            ) from None
        return {"message": message_payload(message), "result": result}
