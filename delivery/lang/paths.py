"""Dotted paths into the flat context (SPEC §3), shared by conditions, templates and the validator.

The context is a flat map from dotted keys to JSON values. A path is resolved by finding
the longest stored key that is a prefix of it and walking the rest into the value: a
number picks a list item, `length` counts items (or characters of a string), a name
picks an object member. A string holding a JSON array or object (how `json` outputs are
stored) is walked as that array or object.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Final


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

CONTEXT_PREFIX = "context."


def normalize_key(key: str) -> str:
    """`context.pr.state` and `pr.state` name the same key."""
    return key[len(CONTEXT_PREFIX) :] if key.startswith(CONTEXT_PREFIX) else key


def resolve(flat: Mapping[str, Any], key: str,
            load: Callable[[Any], Any] = lambda value: value) -> Any:
    """The value at a dotted path, or MISSING. `load` turns a stored value into the value
    (the Context passes one that reads artifact pointers back)."""
    key = normalize_key(key)
    if key in flat:
        return load(flat[key])
    segments = key.split(".")
    for cut in range(len(segments) - 1, 0, -1):
        prefix = ".".join(segments[:cut])
        if prefix in flat:
            return walk(load(flat[prefix]), segments[cut:])
    return MISSING


def walk(value: Any, segments: list[str]) -> Any:
    for segment in segments:
        if isinstance(value, str) and value[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        if segment == "length" and isinstance(value, (list, str, dict)):
            value = len(value)
        elif isinstance(value, list):
            if not segment.isdigit() or int(segment) >= len(value):
                return MISSING
            value = value[int(segment)]
        elif isinstance(value, dict):
            if segment not in value:
                return MISSING
            value = value[segment]
        else:
            return MISSING
    return value


def string_form(value: Any) -> str:
    """The JSON spelling used by `=` and `!=`: true, false, 42; null and missing are empty."""
    if value is MISSING or value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
