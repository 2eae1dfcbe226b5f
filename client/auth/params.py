"""The two formats of an authentication params string the official client reads."""

from __future__ import annotations

import json
from typing import Any


def parse_json_params(text: str, plugin: str) -> dict[str, str]:
    """A JSON object of string fields (numbers and booleans become strings, as the official client
    reads them); ValueError naming the plugin and what is wrong."""
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the {plugin} authentication params are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"the {plugin} authentication params must be a JSON object, got {type(value).__name__}")
    params: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, (dict, list)) or item is None:
            raise ValueError(f"the {plugin} authentication param {key!r} must be a string, got {json.dumps(item)}")
        params[key] = json.dumps(item) if isinstance(item, bool) else str(item)
    return params


def parse_default_params(text: str) -> dict[str, str]:
    """``key1:value1,key2:value2``, as the official client's default format: an entry that is not
    exactly one key and one value (a value holding ``:``) is left out, as there."""
    params: dict[str, str] = {}
    for entry in text.split(",") if text else ():
        parts = entry.split(":")
        if len(parts) == 2:
            params[parts[0]] = parts[1]
    return params
